"""Reading the config file (and its ``users_file``) into a ``GatewayConfig``, and finding the
line of a key path for problems found after loading.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Mapping

import yaml

from gateway.config.deprecated import apply_renamed_keys
from gateway.config.errors import ConfigError
from gateway.config.root import GatewayConfig
from gateway.config.schema_walker import SchemaWalker
from gateway.config.users import UserConfig


#: the environment variable naming the gateway's config file for the command-line tools
#: (``ctl``, ``ping``, ``status``) when no ``--config`` or ``--url`` is given
CONFIG_ENV = "AMQP_GATEWAY_CONFIG"


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
    walker = SchemaWalker(source)
    cfg = apply_renamed_keys(walker.build_all(GatewayConfig, root), walker.lines, source)
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
    walker = SchemaWalker(path)
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
