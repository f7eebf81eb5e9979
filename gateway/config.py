"""The gateway's one YAML file, loaded into frozen dataclasses.

Why a schema walker instead of ``yaml.safe_load`` + ad-hoc checks: every error must name
the key path and the line (``listeners[0].port`` at line 12), and every key must be
known; PyYAML's node tree keeps the line marks, so the dataclasses below *are* the schema
(type hints give the type, ``metadata["check"]`` adds value checks, defaults are the
documented defaults of ``config.example.yaml``). Nothing here touches the network; the
edge checks that endpoints can be built (``check-config``).
"""
from __future__ import annotations

import collections.abc
import contextlib
import dataclasses
import enum
import ipaddress
import os
import re
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

import yaml

from gateway.auth.passwords import parse_stored
from gateway.broker.unroutable import UnroutablePolicy
from gateway.forward.outbound import RemoteSettings
from gateway.forward.settings import ForwardingSettings, forwarding_problems, remote_problems

__all__ = [
    "ConfigError",
    "TlsMode",
    "ListenerConfig",
    "SniCertificate",
    "MetricsConfig",
    "ManagementConfig",
    "PermissionConfig",
    "UserConfig",
    "Amqp10Config",
    "LimitsConfig",
    "LedgerConfig",
    "StoreConfig",
    "LoggingConfig",
    "GatewayConfig",
    "load_config",
    "load_config_text",
    "parse_host_port",
    "line_of",
    "directory_problem",
]


class ConfigError(Exception):
    """A configuration problem: ``key_path`` (e.g. ``listeners[0].port``), 1-based ``line``
    (0 when unknown) and a message for an operator.

    ``errors`` holds every problem found in one pass (``check-config`` prints each on its
    own line); the attributes are the first one's. A problem with no line (a file that
    cannot be read) names only the file."""

    def __init__(self, key_path: str, line: int, message: str, source: str = "") -> None:
        self.key_path = key_path
        self.line = line
        self.message = message
        self.source = source
        self.errors: tuple[ConfigError, ...] = (self,)
        where = f"{source}:{line}" if source and line else source or f"line {line}"
        super().__init__(": ".join(p for p in (where, key_path, message) if p))

    @classmethod
    def collected(cls, errors: "Sequence[ConfigError]") -> "ConfigError":
        """One exception for ``errors`` (in file order): the first's attributes, all of
        them in ``errors`` and, joined by ``; ``, in its text (for one-line logs)."""
        ordered = sorted(errors, key=lambda e: (e.source, e.line))
        if len(ordered) == 1:
            return ordered[0]
        first = ordered[0]
        combined = cls(first.key_path, first.line, first.message, first.source)
        combined.errors = tuple(ordered)
        combined.args = ("; ".join(str(e) for e in ordered),)
        return combined


class TlsMode(enum.Enum):
    OFF = "off"
    ON = "on"
    AUTO = "auto"


Check = Callable[[Any], Optional[str]]


def _checked(default: Any = dataclasses.MISSING, *, check: Check | None = None,
             factory: Any = dataclasses.MISSING) -> Any:
    meta = {"check": check} if check else {}
    if factory is not dataclasses.MISSING:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def _version_text(v: str) -> str | None:
    if v == "" or re.fullmatch(r"\d+(\.\d+){0,3}([-+][0-9A-Za-z.]+)?", v):
        return None
    return f"{v!r} is not a version such as \"4.1.0\" (or \"\" to announce amqp-gateway)"


def _port(v: int) -> str | None:
    return None if 0 <= v <= 65535 else f"{v} is not a valid port (0-65535; 0 picks a free port)"


def _positive(v: float) -> str | None:
    return None if v > 0 else f"{v} must be greater than 0"


def _non_negative(v: float) -> str | None:
    return None if v >= 0 else f"{v} must not be negative"


def _host(v: str) -> str | None:
    if not v:
        return "empty host"
    try:
        ipaddress.ip_address(v)
        return None
    except ValueError:
        pass
    if re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,252})", v):
        return None
    return f"{v!r} is neither an IP address nor a host name"


def _existing_file(v: str | None) -> str | None:
    if v is None or os.path.isfile(v):
        return None
    return f"file {v!r} does not exist"


def _regex(v: str) -> str | None:
    try:
        re.compile(v)
        return None
    except re.error as exc:
        return f"{v!r} is not a valid regular expression: {exc}"


def _password_hash(v: str) -> str | None:
    try:
        parse_stored(v)
        return None
    except ValueError as exc:
        return (f"not a password hash ({exc}); make one with 'amqp-gateway hash-password'"
                "; clear-text passwords are not accepted")


def _tls_version(v: str) -> str | None:
    return None if v in ("1.2", "1.3") else f"{v!r} is not a TLS version this gateway allows (1.2 or 1.3)"


def _verify_client(v: str) -> str | None:
    ok = ("none", "optional", "required")
    return None if v in ok else f"{v!r} is not one of: {', '.join(ok)}"


_MECHANISMS = ("SCRAM-SHA-256", "PLAIN", "AMQPLAIN", "EXTERNAL", "ANONYMOUS")


def _mechanisms(v: tuple[str, ...]) -> str | None:
    bad = [m for m in v if m not in _MECHANISMS]
    return f"unknown SASL mechanism(s) {', '.join(bad)} (known: {', '.join(_MECHANISMS)})" if bad else None


def _frame_max(v: int) -> str | None:
    return None if v == 0 or v >= 4096 else f"{v} is below the AMQP minimum frame size 4096"


def _log_level(v: str) -> str | None:
    ok = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
    return None if v.upper() in ok else f"{v!r} is not one of {', '.join(ok)}"


@dataclass(frozen=True, slots=True)
class SniCertificate:
    """A certificate chosen when the client's SNI names ``server_name``."""

    server_name: str
    cert_file: str = _checked(check=_existing_file)
    key_file: str = _checked(check=_existing_file)


@dataclass(frozen=True, slots=True)
class ListenerConfig:
    """One listening socket; every protocol is served on it (the sniffer decides)."""

    host: str = _checked("127.0.0.1", check=_host)
    port: int = _checked(5672, check=_port)
    name: str = ""
    tls: TlsMode = TlsMode.OFF
    tls_cert_file: Optional[str] = _checked(None, check=_existing_file)
    tls_key_file: Optional[str] = _checked(None, check=_existing_file)
    tls_ca_file: Optional[str] = _checked(None, check=_existing_file)
    tls_verify_client: str = _checked("none", check=_verify_client)
    tls_min_version: str = _checked("1.2", check=_tls_version)
    tls_ciphers: str = ""
    tls_sni: tuple[SniCertificate, ...] = ()
    mechanisms: tuple[str, ...] = _checked((), check=_mechanisms)
    sniff_timeout: float = _checked(10.0, check=_positive)
    default_vhost: str = "/"
    allow_anonymous: bool = False
    allow_amqp10_without_sasl: bool = False
    # this listener's cap on open connections; None: ``limits.max_connections``
    max_connections: Optional[int] = _checked(None, check=_non_negative)
    backlog: int = _checked(4096, check=_positive)  # listen(2) backlog: why 4096 in edge/listener.py


@dataclass(frozen=True, slots=True)
class MetricsConfig:
    enabled: bool = True
    host: str = _checked("127.0.0.1", check=_host)
    port: int = _checked(9419, check=_port)
    path: str = "/metrics"


@dataclass(frozen=True, slots=True)
class PermissionConfig:
    """RabbitMQ's model: regular expressions (full match) over exchange and queue names."""

    configure: str = _checked(".*", check=_regex)
    write: str = _checked(".*", check=_regex)
    read: str = _checked(".*", check=_regex)


@dataclass(frozen=True, slots=True)
class UserConfig:
    name: str
    password_hash: str = _checked(check=_password_hash)
    loopback_only: bool = False
    tags: tuple[str, ...] = ()
    permissions: Mapping[str, PermissionConfig] = _checked(factory=dict)
    max_connections: int = _checked(0, check=_non_negative)
    max_channels: int = _checked(0, check=_non_negative)


@dataclass(frozen=True, slots=True)
class Amqp10Config:
    """The RabbitMQ plugin's three settings (seed 001), and the outcome of an unroutable
    1.0 message (``gateway.broker.unroutable``)."""

    default_user: Optional[str] = "guest"
    default_vhost: str = "/"
    protocol_strict_mode: bool = False
    unroutable: UnroutablePolicy = UnroutablePolicy.ACCEPT
    #: "" or a version such as "4.1.0": the 1.0 open then announces product RabbitMQ
    rabbitmq_version: str = _checked("", check=_version_text)


@dataclass(frozen=True, slots=True)
class LimitsConfig:
    frame_max: int = _checked(131072, check=_frame_max)
    channel_max: int = _checked(2047, check=_non_negative)
    heartbeat: int = _checked(60, check=_non_negative)
    max_message_size: int = _checked(134217728, check=_positive)
    handshake_timeout: float = _checked(10.0, check=_positive)
    max_connections: int = _checked(0, check=_non_negative)
    max_connections_per_user: int = _checked(0, check=_non_negative)
    max_links_per_connection: int = _checked(1024, check=_non_negative)
    failed_logins_before_delay: int = _checked(5, check=_positive)
    failed_login_window: float = _checked(60.0, check=_positive)
    failed_login_max_delay: float = _checked(30.0, check=_non_negative)
    # refused logins of one address whose delayed answers are pending (gateway.auth.throttle)
    failed_login_max_pending: int = _checked(8, check=_positive)


def _fraction(v: float) -> str | None:
    return None if 0.0 < v <= 1.0 else f"{v} is not a fraction above 0.0 and at most 1.0"


def _sample_rate(v: float) -> str | None:
    return None if 0.0 <= v <= 1.0 else f"{v} is not a rate between 0.0 and 1.0"


@dataclass(frozen=True, slots=True)
class LedgerConfig:
    """The message-event ledger that ``amqp-gateway report`` (PySpark) reads."""

    enabled: bool = True
    directory: str = ""
    flush_interval: float = _checked(1.0, check=_positive)
    segment_max_bytes: int = _checked(67108864, check=_positive)
    segment_max_age: float = _checked(3600.0, check=_positive)
    retention_max_age: float = _checked(604800.0, check=_positive)
    retention_max_bytes: int = _checked(2147483648, check=_positive)
    sample_rate: float = _checked(1.0, check=_sample_rate)
    header_allowlist: tuple[str, ...] = ()
    fsync: bool = False
    writer_process: bool = True


def _one_of(*allowed: str) -> Check:
    def check(v: str) -> str | None:
        return None if v in allowed else f"{v!r} is not one of: {', '.join(allowed)}"
    return check


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """The durable store (``gateway/store/sqlite.py``); defaults keep RabbitMQ's promise."""

    enabled: bool = True
    path: str = ""
    sync_mode: str = _checked("full", check=_one_of("full", "normal"))
    commit_interval: float = _checked(0.0, check=lambda v: None if 0 <= v <= 1 else
                                      f"{v} is not between 0 and 1 second")
    commit_batch: int = _checked(4096, check=_positive)
    memory_budget: Optional[int] = _checked(None, check=_positive)
    disk_free_limit: int = _checked(52428800, check=_non_negative)
    disk_check_interval: float = _checked(1.0, check=_positive)
    integrity_check: str = _checked("quick", check=_one_of("quick", "full", "off"))


@dataclass(frozen=True, slots=True)
class LoggingConfig:
    level: str = _checked("INFO", check=_log_level)


@dataclass(frozen=True, slots=True)
class QueueAlertConfig:
    """Thresholds for the queues whose name ``pattern`` matches (``re.search``); an
    unset one keeps the default."""

    pattern: str = _checked(check=_regex)
    queue_depth: Optional[int] = _checked(None, check=lambda v: None if v is None else _non_negative(v))
    queue_age: Optional[float] = _checked(None, check=lambda v: None if v is None else _non_negative(v))


@dataclass(frozen=True, slots=True)
class AlertsConfig:
    """Threshold alerts per queue (``gateway.management.alerts``); 0 turns one off."""

    queue_depth: int = _checked(0, check=_non_negative)
    queue_age: float = _checked(0.0, check=_non_negative)
    queues: tuple[QueueAlertConfig, ...] = ()


@dataclass(frozen=True, slots=True)
class ManagementConfig:
    """The HTTP management API and dashboard (``gateway/management/http_api.py``): off by
    default, like RabbitMQ's management plugin, and on RabbitMQ's port; and the threshold
    alerts."""

    enabled: bool = False
    host: str = _checked("127.0.0.1", check=_host)
    port: int = _checked(15672, check=_port)
    alerts: AlertsConfig = AlertsConfig()


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    container_id: str = _checked("", check=lambda v: "a container id must not contain '@' "
                                 "(it would make node@container ambiguous)" if "@" in v else None)
    state_dir: str = "var"
    listeners: tuple[ListenerConfig, ...] = (ListenerConfig(),)
    metrics: MetricsConfig = MetricsConfig()
    management: ManagementConfig = ManagementConfig()
    vhosts: tuple[str, ...] = ("/",)
    users: tuple[UserConfig, ...] = ()
    users_file: Optional[str] = _checked(None, check=_existing_file)
    amqp10: Amqp10Config = Amqp10Config()
    limits: LimitsConfig = LimitsConfig()
    memory_high_watermark: int = _checked(1073741824, check=_positive)
    memory_low_watermark_ratio: float = _checked(0.9, check=_fraction)
    shutdown_timeout: float = _checked(10.0, check=_positive)
    ledger: LedgerConfig = LedgerConfig()
    store: StoreConfig = StoreConfig()
    logging: LoggingConfig = LoggingConfig()
    forwarding: ForwardingSettings = ForwardingSettings()
    management: ManagementConfig = ManagementConfig()
    source: str = ""

    def with_overrides(self, *, listen: list[tuple[str, int]] | None = None,
                       metrics: tuple[str, int] | None = None,
                       management: tuple[str, int] | None = None) -> "GatewayConfig":
        """Apply ``--listen``/``--metrics``/``--management``: each ``--listen`` replaces the listener list
        (the first configured listener's other settings are kept as the template)."""
        cfg = self
        if listen:
            template = self.listeners[0] if self.listeners else ListenerConfig()
            cfg = dataclasses.replace(cfg, listeners=tuple(
                dataclasses.replace(template, host=h, port=p, name=f"{h}:{p}") for h, p in listen))
        if metrics:
            cfg = dataclasses.replace(cfg, metrics=dataclasses.replace(
                cfg.metrics, enabled=True, host=metrics[0], port=metrics[1]))
        if management:
            cfg = dataclasses.replace(cfg, management=dataclasses.replace(
                cfg.management, enabled=True, host=management[0], port=management[1]))
        return cfg


def parse_host_port(text: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``[V6]:PORT`` -> ``(host, port)``; raises ``ValueError``."""
    m = re.fullmatch(r"\[([^\]]+)\]:(\d+)|([^:\[\]]+):(\d+)", text.strip())
    if not m:
        raise ValueError(f"{text!r} is not HOST:PORT")
    host = m.group(1) or m.group(3)
    port = int(m.group(2) or m.group(4))
    problem = _port(port) or _host(host)
    if problem:
        raise ValueError(problem)
    return host, port


def load_config(path: str) -> GatewayConfig:
    """Load and validate ``path``; raises ``ConfigError`` (also for an unreadable file)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise ConfigError("", 0, f"cannot read config file: {exc.strerror}", path) from None
    return load_config_text(text, source=path)


def load_config_text(text: str, source: str = "<string>") -> GatewayConfig:
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else 0
        raise ConfigError("", line, f"not valid YAML: {getattr(exc, 'problem', exc)}", source) from None
    if root is None:
        return dataclasses.replace(GatewayConfig(), source=source)
    walker = _Walker(source)
    cfg = walker.build_all(GatewayConfig, root)
    # where each user is defined: (source, key path of its name, line), for duplicates
    origins = [(source, f"users[{i}].name", walker.lines.get(f"users[{i}].name", 0))
               for i in range(len(cfg.users))]
    if cfg.users_file:
        try:
            extra, file_lines = _load_users_file(cfg.users_file)
        except ConfigError as exc:
            if exc.source == cfg.users_file and exc.line == 0:   # unreadable: name our key
                raise ConfigError("users_file", walker.lines.get("users_file", 0), exc.message,
                                  source) from None
            raise
        origins += [(cfg.users_file, f"users[{i}].name", file_lines.get(f"users[{i}].name", 0))
                    for i in range(len(extra))]
        cfg = dataclasses.replace(cfg, users=cfg.users + extra)
    first: dict[str, tuple[str, int]] = {}
    twice = []
    for user, (where, key_path, line) in zip(cfg.users, origins):
        if user.name in first:
            prev_source, prev_line = first[user.name]
            earlier = f"line {prev_line}" if prev_source == where else f"{prev_source}:{prev_line}"
            twice.append(ConfigError(key_path, line, f"user defined twice: {user.name} "
                                     f"(first defined at {earlier})", where))
            continue
        first[user.name] = (where, line)
    if twice:
        raise ConfigError.collected(twice)
    return dataclasses.replace(cfg, source=source)


@dataclass(frozen=True, slots=True)
class _UsersFile:
    users: tuple[UserConfig, ...] = ()


def load_users_file(path: str) -> tuple[UserConfig, ...]:
    """A separate YAML file with a ``users:`` list (same keys as in the main config), so
    user management can be delegated and reloaded on SIGHUP."""
    return _load_users_file(path)[0]


def _load_users_file(path: str) -> tuple[tuple[UserConfig, ...], Mapping[str, int]]:
    """``load_users_file`` plus the line of every key path in it."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise ConfigError("users_file", 0, f"cannot read users file: {exc.strerror}", path) from None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ConfigError("", mark.line + 1 if mark else 0, f"not valid YAML: {exc}", path) from None
    if root is None:
        return (), {}
    walker = _Walker(path)
    return walker.build_all(_UsersFile, root).users, walker.lines


def _path_parts(key_path: str) -> list[str | int]:
    """``listeners[0].tls_sni[1].cert_file`` -> ``["listeners", 0, "tls_sni", 1, "cert_file"]``."""
    parts: list[str | int] = []
    for m in re.finditer(r"([^.\[\]]+)|\[(\d+)\]", key_path):
        parts.append(m.group(1) if m.group(1) is not None else int(m.group(2)))
    return parts


def line_of(path: str, key_path: str) -> int:
    """The 1-based line of ``key_path`` in the YAML file ``path``: of the key itself, or
    of the deepest enclosing key the file has (a default setting has no line of its own);
    0 when the file cannot be read or has none of it. Used for problems found after
    loading (TLS files that do not load, unusable directories), so they name a line too."""
    try:
        with open(path, encoding="utf-8") as f:
            node = yaml.compose(f.read(), Loader=yaml.SafeLoader)
    except (OSError, yaml.YAMLError):
        return 0
    line = 0
    for part in _path_parts(key_path):
        if isinstance(part, int):
            if not isinstance(node, yaml.SequenceNode) or part >= len(node.value):
                break
            node = node.value[part]
            line = node.start_mark.line + 1
            continue
        if not isinstance(node, yaml.MappingNode):
            break
        for knode, vnode in node.value:
            if getattr(knode, "value", None) == part:
                line, node = knode.start_mark.line + 1, vnode
                break
        else:
            break
    return line


def directory_problem(path: str) -> str | None:
    """Why the gateway could not use ``path`` as a directory to write in, or None.

    Checked by ``check-config`` and before ``run`` starts anything, so a state or ledger
    directory under a regular file, or one this user cannot create or write, is a config
    error naming the key instead of a traceback at start. Nothing is created here."""
    target = os.path.abspath(path)
    probe = target
    while not os.path.lexists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if not os.path.isdir(probe):
        if probe == target:
            return f"{path!r} exists and is not a directory"
        return f"cannot create directory {path!r}: {probe!r} is not a directory"
    if not os.access(probe, os.W_OK | os.X_OK):
        if probe == target:
            return f"directory {path!r} is not writable (uid {os.getuid()})"
        return f"cannot create directory {path!r}: {probe!r} is not writable (uid {os.getuid()})"
    return None


_SCALAR_TAGS = {
    "tag:yaml.org,2002:str": str,
    "tag:yaml.org,2002:int": int,
    "tag:yaml.org,2002:float": float,
    "tag:yaml.org,2002:bool": bool,
    "tag:yaml.org,2002:null": type(None),
}
_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false",
               type(None): "null"}


class _Walker:
    """Builds a dataclass from a YAML node tree, reporting every problem in one pass.

    A problem is raised as a ``ConfigError`` (``raise self.fail(...)``) and caught at the
    nearest key, list item or mapping entry (``_noting``), which keeps it and goes on with
    the next one; a mapping with a problem inside is not built (nor cross-checked) and
    counts as a problem of its parent. ``build_all`` raises them all together."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.loader = yaml.SafeLoader("")
        self.lines: dict[str, int] = {}     # key path -> 1-based line, for later checks
        self.errors: list[ConfigError] = []

    def build_all(self, tp: Any, node: yaml.Node) -> Any:
        """``build`` from the root; raises one ``ConfigError`` holding every problem."""
        value = None
        with self._noting():
            value = self.build(tp, node, "")
        if self.errors:
            raise ConfigError.collected(self.errors)
        return value

    @contextlib.contextmanager
    def _noting(self):
        """Keep a problem raised inside (once: a nested one arrives again) and go on."""
        try:
            yield
        except ConfigError as exc:
            if not any(e is exc for e in self.errors):
                self.errors.append(exc)

    def fail(self, path: str, node: yaml.Node, message: str) -> ConfigError:
        return ConfigError(path, node.start_mark.line + 1, message, self.source)

    def scalar(self, node: yaml.Node, path: str) -> Any:
        if not isinstance(node, yaml.ScalarNode):
            kind = "a list" if isinstance(node, yaml.SequenceNode) else "a mapping"
            raise self.fail(path, node, f"expected a single value, got {kind}")
        return self.loader.construct_object(node, deep=True)

    def build(self, tp: Any, node: yaml.Node, path: str) -> Any:
        origin = typing.get_origin(tp)
        args = typing.get_args(tp)
        if origin in (typing.Union, types.UnionType):
            inner = [a for a in args if a is not type(None)]
            if isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null":
                return None
            if isinstance(node, yaml.ScalarNode) and node.value == "none" and inner == [str]:
                return None
            return self.build(inner[0], node, path)
        if dataclasses.is_dataclass(tp):
            return self.build_dataclass(tp, node, path)
        if origin in (tuple, list):
            if not isinstance(node, yaml.SequenceNode):
                raise self.fail(path, node, "expected a list")
            items = []
            errors_before = len(self.errors)
            for i, item in enumerate(node.value):
                self.lines[f"{path}[{i}]"] = item.start_mark.line + 1
                with self._noting():
                    items.append(self.build(args[0], item, f"{path}[{i}]"))
            self._raise_new_errors(errors_before)
            return tuple(items)
        if origin in (dict, collections.abc.Mapping) or tp is Mapping:
            if not isinstance(node, yaml.MappingNode):
                raise self.fail(path, node, "expected a mapping")
            out = {}
            errors_before = len(self.errors)
            for knode, vnode in node.value:
                with self._noting():
                    key = str(self.scalar(knode, path))
                    out[key] = self.build(args[1], vnode, f"{path}[{key!r}]")
            self._raise_new_errors(errors_before)
            return out
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            value = self.scalar(node, path)
            if value is False and "off" in [m.value for m in tp]:
                value = "off"  # YAML 1.1 reads a bare off/on as booleans
            elif value is True and "on" in [m.value for m in tp]:
                value = "on"
            try:
                return tp(value)
            except ValueError:
                allowed = ", ".join(m.value for m in tp)
                raise self.fail(path, node, f"{value!r} is not one of: {allowed}") from None
        value = self.scalar(node, path)
        actual = type(value)
        if tp is float and actual is int:
            value = float(value)
        elif actual is not tp:
            raise self.fail(path, node, f"expected {_TYPE_NAMES.get(tp, tp.__name__)}, got {value!r}")
        return value

    def build_dataclass(self, cls: type, node: yaml.Node, path: str) -> Any:
        if not isinstance(node, yaml.MappingNode):
            raise self.fail(path, node, f"expected a mapping of {cls.__name__} settings")
        hints = typing.get_type_hints(cls)
        fields_by_name = {f.name: f for f in dataclasses.fields(cls) if f.name != "source"}
        values: dict[str, Any] = {}
        given: set[Any] = set()
        errors_before = len(self.errors)
        for knode, vnode in node.value:
            with self._noting():
                self._build_key(values, given, fields_by_name, hints, knode, vnode, path)
        for name, f in fields_by_name.items():
            if name not in given and f.default is dataclasses.MISSING \
                    and f.default_factory is dataclasses.MISSING:
                sub = f"{path}.{name}" if path else name
                with self._noting():
                    raise self.fail(sub, node, f"required key {name!r} is missing")
        self._raise_new_errors(errors_before)
        obj = cls(**values)
        cross = getattr(self, f"_cross_{cls.__name__}", None)
        if cross is not None:
            cross(obj, node, path)
        return obj

    def _build_key(self, values: dict[str, Any], given: set[Any],
                   fields_by_name: Mapping[str, dataclasses.Field], hints: Mapping[str, Any],
                   knode: yaml.Node, vnode: yaml.Node, path: str) -> None:
        key = self.scalar(knode, path)
        sub = f"{path}.{key}" if path else str(key)
        f = fields_by_name.get(key) if isinstance(key, str) else None
        if f is None:
            known = ", ".join(sorted(fields_by_name))
            raise self.fail(sub, knode, f"unknown key {key!r} (known keys: {known})")
        if key in given:
            raise self.fail(sub, knode, "key given twice")
        given.add(key)
        self.lines[sub] = knode.start_mark.line + 1
        value = self.build(hints[key], vnode, sub)
        check = f.metadata.get("check")
        problem = check(value) if check and value is not None else None
        if problem:
            raise self.fail(sub, vnode, problem)
        values[key] = value

    def _raise_new_errors(self, errors_before: int) -> None:
        """A list or mapping with a problem inside is not built: its parent skips it."""
        if len(self.errors) > errors_before:
            raise self.errors[errors_before]

    def _key_node(self, node: yaml.MappingNode, key: str) -> yaml.Node:
        for knode, vnode in node.value:
            if getattr(knode, "value", None) == key:
                return knode
        return node

    def _cross_RemoteSettings(self, obj: RemoteSettings, node: yaml.MappingNode, path: str) -> None:
        for key, message in remote_problems(obj, _existing_file):
            raise self.fail(f"{path}.{key}", self._key_node(node, key), message)

    def _cross_ForwardingSettings(self, obj: ForwardingSettings, node: yaml.MappingNode,
                                  path: str) -> None:
        for key, sub, message in forwarding_problems(obj):
            raise self.fail(f"{path}.{sub}", self._key_node(node, key), message)

    def _cross_GatewayConfig(self, obj: "GatewayConfig", node: yaml.MappingNode, path: str) -> None:
        if obj.container_id and obj.forwarding.remote(obj.container_id) is not None:
            raise self.fail("forwarding.remotes", self._key_node(node, "forwarding"),
                            f"remote container '{obj.container_id}' is this gateway's own "
                            "container_id")

    def _cross_ListenerConfig(self, obj: "ListenerConfig", node: yaml.MappingNode, path: str) -> None:
        if obj.tls is not TlsMode.OFF:
            for key in ("tls_cert_file", "tls_key_file"):
                if getattr(obj, key) is None:
                    raise self.fail(f"{path}.{key}", self._key_node(node, "tls"),
                                    f"tls: {obj.tls.value} needs {key}")
        if obj.tls_verify_client != "none" and obj.tls_ca_file is None:
            raise self.fail(f"{path}.tls_ca_file", self._key_node(node, "tls_verify_client"),
                            "verifying client certificates needs tls_ca_file")
