"""The ``forwarding:`` section of the config, as the config walker builds it.

``RemoteSettings`` (one ``forwarding.remotes[]`` entry) lives with the outbound contract
(``outbound.py``); the rest is here: the section itself and the static routes
(``shovels``). The key names are the interface (issue 33); ``config.example.yaml``
documents each with its default.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from gateway.forward.outbound import RemoteSettings

__all__ = ["ForwardingSettings", "ShovelSettings", "KINDS", "BROKERS", "ADDRESS_TEMPLATES",
           "suggested_template", "SASL_MECHANISMS", "MECHANISMS_BY_KIND", "read_password",
           "PasswordFileError", "remote_problems", "forwarding_problems", "tls_problems"]

#: ``kind`` of a remote
KINDS = ("gateway", "amqp10", "amqp091")
_AMQP10_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "EXTERNAL", "ANONYMOUS")
#: the ``sasl_mechanism`` a remote of each kind can log in with: the 1.0 client (proton's
#: SASL, and ours for SCRAM) and the 0-9-1 client role (``amqp091/client.py`` takes its list
#: from here)
MECHANISMS_BY_KIND = {"gateway": _AMQP10_MECHANISMS, "amqp10": _AMQP10_MECHANISMS,
                      "amqp091": ("PLAIN", "AMQPLAIN", "EXTERNAL")}
#: every ``sasl_mechanism`` of a remote
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "EXTERNAL", "ANONYMOUS", "AMQPLAIN")

#: ``broker`` of a remote -> the address template of each ``kind`` it speaks. RabbitMQ
#: 3.x's 1.0 plugin knows the v1 forms (``/amq/queue/Q``: an existing queue) and closes
#: the session on RabbitMQ 4's ``/queues/Q``; RabbitMQ 4 knows ``/queues/Q``; ActiveMQ
#: Classic takes ``queue://Q``, Artemis the bare address; a gateway takes every form,
#: and ``kind: gateway`` (its ``amqp$transfer``) needs none. The 0-9-1 forms are the
#: client role's (``/queue/Q``: the default exchange, routing key Q).
ADDRESS_TEMPLATES: dict[str, dict[str, str]] = {
    "rabbitmq-3": {"amqp10": "/amq/queue/{node}", "amqp091": "/queue/{node}"},
    "rabbitmq-4": {"amqp10": "/queues/{node}", "amqp091": "/queue/{node}"},
    "activemq": {"amqp10": "queue://{node}"},
    "artemis": {"amqp10": "{node}"},
    "amqp-gateway": {"gateway": "", "amqp10": "/queues/{node}", "amqp091": "/queue/{node}"},
}
#: ``broker`` values
BROKERS = tuple(ADDRESS_TEMPLATES)
#: address prefixes a broker refuses (its attach is refused, the forwarder backs off)
_UNKNOWN_FORMS = {"rabbitmq-3": ("/queues/", "/exchanges/")}


def suggested_template(kind: str, broker: str = "") -> str:
    """The address template to write for ``kind`` at ``broker`` (every broker's when
    ``broker`` is not said), as check-config prints it."""
    if broker:
        return f'"{ADDRESS_TEMPLATES[broker][kind]}" for {broker}'
    return ", ".join(f'"{kinds[kind]}" ({name})' for name, kinds in ADDRESS_TEMPLATES.items()
                     if kinds.get(kind))


@dataclass(frozen=True, slots=True)
class ShovelSettings:
    """A static route: local queue ``queue`` is drained to node ``node`` of ``remote``."""

    name: str
    queue: str
    remote: str
    node: str


@dataclass(frozen=True, slots=True)
class ForwardingSettings:
    remotes: tuple[RemoteSettings, ...] = ()
    #: container through which unknown containers are reached; "" = refuse them
    default_remote: str = ""
    #: seconds a receiving gateway remembers forwarded ids
    dedupe_window: float = 600.0
    shovels: tuple[ShovelSettings, ...] = ()

    def remote(self, container: str) -> Optional[RemoteSettings]:
        for remote in self.remotes:
            if remote.container == container:
                return remote
        return None


class PasswordFileError(Exception):
    """A remote's ``password_file`` cannot be read (the text names the file)."""


def read_password(remote: Any) -> str:
    """The password of a remote (or a backend's service account): the first line of
    ``password_file`` ("" without one)."""
    if not remote.password_file:
        return ""
    whose = (f"remote '{remote.container}'" if hasattr(remote, "container")
             else f"backend '{remote.name}'")
    try:
        with open(remote.password_file, encoding="utf-8") as f:
            return f.readline().rstrip("\r\n")
    except OSError as exc:
        raise PasswordFileError(f"cannot read password_file {remote.password_file!r} of {whose}: "
                                f"{exc.strerror}") from None


def tls_problems(settings: Any, file_problem: Callable[[Optional[str]], Optional[str]]
                 ) -> list[tuple[str, str]]:
    """``(key, problem)`` of the outbound TLS keys (``password_file`` too) that forwarding
    remotes and edge-mode backends share; the one rule for both."""
    out: list[tuple[str, str]] = []
    for key in ("password_file", "tls_ca_file", "tls_cert_file", "tls_key_file"):
        problem = file_problem(getattr(settings, key))
        if problem:
            out.append((key, problem))
    if settings.tls_cert_file and not settings.tls_key_file:
        out.append(("tls_key_file", "tls_cert_file needs tls_key_file"))
    return out


def remote_problems(remote: RemoteSettings,
                    file_problem: Callable[[Optional[str]], Optional[str]]) -> list[tuple[str, str]]:
    """``(key, problem)`` of one remote's settings (``file_problem`` checks a file path)."""
    out: list[tuple[str, str]] = []
    if not remote.container or "@" in remote.container:
        out.append(("container", "a remote needs a container name without '@'"))
    if not remote.host:
        out.append(("host", "a remote needs a host"))
    if not 0 < remote.port <= 65535:
        out.append(("port", f"{remote.port} is not a valid port (1-65535)"))
    broker = remote.broker
    if broker and broker not in BROKERS:
        out.append(("broker", f"{broker!r} is not one of: {', '.join(BROKERS)}"))
        broker = ""
    if remote.kind not in KINDS:
        out.append(("kind", f"{remote.kind!r} is not one of: {', '.join(KINDS)}"))
    elif broker and remote.kind not in ADDRESS_TEMPLATES[broker]:
        spoken = ", ".join(ADDRESS_TEMPLATES[broker])
        out.append(("kind", f"{broker} is not reached with kind {remote.kind}; use kind {spoken}"))
    elif remote.kind != "gateway" and "{node}" not in remote.address:
        out.append(("address", f"kind {remote.kind} needs an address template with {{node}}: "
                               f"{suggested_template(remote.kind, broker)}"))
    elif remote.kind != "gateway" and remote.address.startswith(_UNKNOWN_FORMS.get(broker, ())):
        out.append(("address", f"{broker} does not know the address {remote.address!r} (it "
                               f"refuses the attach); use {suggested_template(remote.kind, broker)}"))
    allowed = MECHANISMS_BY_KIND.get(remote.kind, SASL_MECHANISMS)
    if remote.sasl_mechanism not in allowed:
        out.append(("sasl_mechanism", f"{remote.sasl_mechanism!r} is not one of: "
                                      f"{', '.join(allowed)} (for kind {remote.kind})"))
    out += tls_problems(remote, file_problem)
    if remote.credit <= 0:
        out.append(("credit", f"{remote.credit} is not a positive number of messages"))
    if remote.max_unsent < 0:
        out.append(("max_unsent", f"{remote.max_unsent} is not a number of messages (0 = no limit)"))
    if remote.reconnect_initial <= 0 or remote.reconnect_max < remote.reconnect_initial:
        out.append(("reconnect_max", "needs 0 < reconnect_initial <= reconnect_max"))
    return out


def forwarding_problems(settings: ForwardingSettings) -> list[tuple[str, str, str]]:
    """``(key, key path below forwarding, problem)`` across the section's entries."""
    out: list[tuple[str, str, str]] = []
    seen: set[str] = set()
    for i, remote in enumerate(settings.remotes):
        if remote.container in seen:
            out.append(("remotes", f"remotes[{i}].container",
                        f"remote container '{remote.container}' is listed twice"))
        seen.add(remote.container)
    if settings.default_remote and settings.default_remote not in seen:
        out.append(("default_remote", "default_remote",
                    f"'{settings.default_remote}' is not the container of a remote"))
    if settings.dedupe_window <= 0:
        out.append(("dedupe_window", "dedupe_window",
                    f"{settings.dedupe_window} is not a positive number of seconds"))
    names: set[str] = set()
    for i, shovel in enumerate(settings.shovels):
        if shovel.remote not in seen:
            out.append(("shovels", f"shovels[{i}].remote",
                        f"'{shovel.remote}' is not the container of a remote"))
        if shovel.name in names:
            out.append(("shovels", f"shovels[{i}].name", f"shovel '{shovel.name}' is listed twice"))
        names.add(shovel.name)
    return out
