"""The ``backends:`` section of the config (edge mode), as the config walker builds it.

A backend is a broker (cluster) that proxied vhosts (``vhosts[].backend: NAME``) live in.
The key names are the interface (issue 44); ``config.example.yaml`` documents each with
its default. TLS keys are the ones forwarding remotes have, checked by the same rule
(``forward.settings.tls_problems``) and used by the same outbound TLS code.
"""
from __future__ import annotations

import string
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional

__all__ = ["AddressTemplates", "BackendSettings", "BACKEND_KINDS", "PROXIED_KINDS", "PASSTHROUGH", "ANONYMOUS",
           "backend_problems",
           "backends_problems", "split_node"]

#: ``kind`` of a backend
BACKEND_KINDS = ("amqp091", "amqp10")
#: the kinds a vhost may be proxied to in this build
PROXIED_KINDS = ("amqp091", "amqp10")
#: ``credentials: passthrough``: the client's own PLAIN user and password open the backend
PASSTHROUGH = "passthrough"
#: ``credentials: anonymous`` (amqp10 only): SASL ANONYMOUS, for a 1.0 broker that takes no
#: login (such as Qpid Proton's example broker); the gateway's own users and permissions apply
ANONYMOUS = "anonymous"


def split_node(node: str) -> tuple[str, int]:
    """``host:port`` or ``[v6]:port`` (port 5672 when left out) -> ``(host, port)``.
    Raises ``ValueError`` naming the problem."""
    text = node.strip()
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise ValueError(f"{node!r} is not host:port")
        port_text = rest[1:] if rest else "5672"
    else:
        host, sep, port_text = text.rpartition(":")
        if not sep:
            host, port_text = text, "5672"
    if not host:
        raise ValueError(f"{node!r} has no host")
    if not port_text.isdigit() or not 0 < int(port_text) <= 65535:
        raise ValueError(f"{node!r}: {port_text!r} is not a port (1-65535)")
    return host, int(port_text)


@dataclass(frozen=True, slots=True)
class AddressTemplates:
    """``address`` of an amqp10 backend: where a 0-9-1 client's operations go
    (``gateway.backend.addresses`` renders them)."""

    #: basic.consume(Q), and basic.publish to the default exchange with routing key Q
    queue: str = "{queue}"
    #: basic.publish(X, RK) to a named exchange: ``{exchange}`` and ``{key}``
    exchange: str = "{key}"
    #: per exchange name, a template in place of ``exchange`` (e.g. amq.topic: topic://{key})
    exchanges: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BackendSettings:
    """One ``backends[]`` entry."""

    name: str
    kind: str = "amqp091"                      # amqp091 | amqp10
    nodes: tuple[str, ...] = ()                # host:port, tried in order
    vhost: str = "/"                           # amqp091: the backend's vhost
    credentials: str = ""                      # "passthrough", "anonymous", or "" with user/password_file
    user: str = ""
    password_file: Optional[str] = None
    tls: bool = False
    tls_ca_file: Optional[str] = None
    tls_cert_file: Optional[str] = None
    tls_key_file: Optional[str] = None
    tls_server_name: str = ""                  # SNI and the name verified; "" = the node's host
    tls_verify: bool = True
    heartbeat: int = 60                        # seconds, asked of the backend (0: none)
    connect_timeout: float = 10.0              # seconds for TCP, TLS and the login, per node
    prefetch: int = 1000                       # ceiling of a consumer's prefetch (1.0 credit)
    credit: int = 1000                         # ceiling of unconfirmed publishes per link
    address: AddressTemplates = field(default_factory=AddressTemplates)  # amqp10 only

    @property
    def passthrough(self) -> bool:
        return self.credentials == PASSTHROUGH

    @property
    def anonymous(self) -> bool:
        return self.credentials == ANONYMOUS

    def addresses(self) -> list[tuple[str, int]]:
        """The nodes as ``(host, port)``, in order (checked when loaded)."""
        return [split_node(node) for node in self.nodes]


def backend_problems(backend: BackendSettings,
                     file_problem: Callable[[Optional[str]], Optional[str]],
                     tls_problems: Callable[..., list[tuple[str, str]]]) -> list[tuple[str, str]]:
    """``(key, problem)`` of one backend's settings; ``file_problem`` checks a file path,
    ``tls_problems`` is forwarding's check of the TLS keys."""
    out: list[tuple[str, str]] = []
    if not backend.name:
        out.append(("name", "a backend needs a name"))
    if backend.kind not in BACKEND_KINDS:
        out.append(("kind", f"{backend.kind!r} is not one of: {', '.join(BACKEND_KINDS)}"))
    if not backend.nodes:
        out.append(("nodes", "a backend needs at least one node (host:port)"))
    for node in backend.nodes:
        try:
            split_node(node)
        except ValueError as exc:
            out.append(("nodes", str(exc)))
    if backend.credentials not in ("", PASSTHROUGH, ANONYMOUS):
        out.append(("credentials", f"{backend.credentials!r} is not 'passthrough' or 'anonymous' "
                                   "(a service account is given by user and password_file instead)"))
    elif backend.credentials and (backend.user or backend.password_file):
        out.append(("credentials", f"credentials: {backend.credentials} "
                                   + ("uses the client's own user and password" if backend.passthrough
                                      else "logs in with no user") + "; leave out user and password_file"))
    elif backend.anonymous and backend.kind != "amqp10":
        out.append(("credentials", "credentials: anonymous (SASL ANONYMOUS) is for kind amqp10 "
                                   "backends; a 0-9-1 backend needs passthrough or a service account"))
    elif not backend.credentials and not backend.user:
        out.append(("credentials", "a backend needs credentials: passthrough (or anonymous), or "
                                   "user and password_file (a service account)"))
    out += tls_problems(backend, file_problem)
    out += _address_problems(backend.address)
    for key in ("heartbeat", "prefetch", "credit"):
        if getattr(backend, key) < 0 or (key != "heartbeat" and getattr(backend, key) == 0):
            out.append((key, f"{getattr(backend, key)} is not a positive number"))
    if backend.connect_timeout <= 0:
        out.append(("connect_timeout", f"{backend.connect_timeout} is not a positive number of seconds"))
    return out


#: the fields each template may name
_TEMPLATE_FIELDS = {"queue": {"queue"}, "exchange": {"exchange", "key"}}


def _address_problems(address: AddressTemplates) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    templates = [("address.queue", "queue", address.queue), ("address.exchange", "exchange", address.exchange)]
    templates += [(f"address.exchanges.{name}", "exchange", t) for name, t in address.exchanges.items()]
    for key, kind, template in templates:
        allowed = _TEMPLATE_FIELDS[kind]
        try:
            names = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
        except ValueError as exc:
            out.append((key, f"{template!r} is not a template: {exc}"))
            continue
        if not template or names - allowed:
            out.append((key, f"{template!r} may name only {', '.join('{%s}' % n for n in sorted(allowed))}"))
        elif kind == "queue" and "queue" not in names:
            out.append((key, f"{template!r} must contain {{queue}}"))
    return out


def backends_problems(backends: tuple[BackendSettings, ...], vhosts: tuple,
                      ) -> list[tuple[str, str]]:
    """``(key path, problem)`` across backends and the vhosts that name them: names
    unique, every ``vhosts[].backend`` a backend, and of a kind this build proxies."""
    out: list[tuple[str, str]] = []
    by_name: dict[str, BackendSettings] = {}
    for i, backend in enumerate(backends):
        if backend.name in by_name:
            out.append((f"backends[{i}].name", f"backend '{backend.name}' is listed twice"))
        by_name.setdefault(backend.name, backend)
    for i, vhost in enumerate(vhosts):
        name = getattr(vhost, "backend", "")
        if not name:
            continue
        backend = by_name.get(name)
        if backend is None:
            known = ", ".join(sorted(by_name)) or "none is configured"
            out.append((f"vhosts[{i}].backend", f"'{name}' is not the name of a backend ({known})"))
        elif backend.kind not in PROXIED_KINDS:
            out.append((f"vhosts[{i}].backend",
                        f"vhost '{vhost.name}': proxying to a backend of kind {backend.kind} "
                        f"('{name}') is not yet supported (supported: {', '.join(PROXIED_KINDS)})"))
    return out
