"""Binding the gateway's ports, and the one line an operator reads when a port cannot be.

Why: the first run of a gateway often happens on a machine that already runs RabbitMQ
(the people who bridge to it), so 5672 is taken; Twisted's ``CannotListenError`` text
(``Couldn't listen on 127.0.0.1:5672: [Errno 98] Address already in use``) says neither
what is probably there nor how to move. Every port the gateway binds (AMQP listeners,
metrics, and later the management API) goes through ``listen_on`` with its ``PortRole``,
so each says the same things: the address, the likely cause, the flag and the config key
that change it.
"""
from __future__ import annotations

import errno
from dataclasses import dataclass
from typing import Optional

from twisted.internet import defer
from twisted.internet.error import CannotListenError

from gateway.connection_log import peer_name

__all__ = ["PortRole", "PortUnavailable", "AMQP_LISTENER", "METRICS_ENDPOINT",
           "MANAGEMENT_ENDPOINT", "listen_on"]


@dataclass(frozen=True, slots=True)
class PortRole:
    """What a port is for, who else usually holds it, and how an operator moves it."""

    #: what the gateway serves there ("AMQP", "metrics")
    serves: str
    #: what probably holds the port when it is in use
    usual_holder: str
    #: the ``run`` option that replaces the address ("--listen HOST:PORT"), if any
    flag: Optional[str]
    #: the argparse destination of that option, to know whether it was used
    option: Optional[str]


AMQP_LISTENER = PortRole(
    "AMQP", "another AMQP broker (RabbitMQ listens on 5672 and 5671, as do Qpid and Artemis) "
    "or a second amqp-gateway", "--listen HOST:PORT", "listen")
METRICS_ENDPOINT = PortRole(
    "metrics", "another Prometheus exporter (9419 is also rabbitmq_exporter's default) "
    "or a second amqp-gateway", "--metrics HOST:PORT", "metrics")
MANAGEMENT_ENDPOINT = PortRole(
    "the management API", "RabbitMQ's management plugin (15672) or a second amqp-gateway",
    "--management HOST:PORT", "management")

_CAUSES = {
    errno.EADDRINUSE: "the port is already in use, probably by {holder}",
    errno.EACCES: "permission denied: ports below 1024 need CAP_NET_BIND_SERVICE or root "
                  "(deploy/README.md has the systemd drop-in)",
    errno.EADDRNOTAVAIL: "no network interface of this host has the address {host}",
}


class PortUnavailable(Exception):
    """A port that could not be bound: ``role`` at ``host:port``, set by ``key_path``
    (``listeners[0].port``, ``metrics.port``); ``describe`` makes the operator's line."""

    def __init__(self, role: PortRole, host: str, port: int, error: Optional[BaseException],
                 key_path: str) -> None:
        self.role = role
        self.host = host
        self.port = port
        self.key_path = key_path
        os_error = getattr(error, "socketError", error)
        self.errno = getattr(os_error, "errno", None)
        self.reason = getattr(os_error, "strerror", None) or str(error)
        super().__init__(self.describe())

    def describe(self, source: str = "", line: int = 0, overridden: bool = False) -> str:
        """One line: the address, the likely cause and how to change it. ``overridden``:
        the address came from the role's command-line flag, so the flag is the remedy;
        else the flag or ``key_path`` (at ``source:line`` when known)."""
        address = peer_name(self.host, self.port)
        cause = _CAUSES.get(self.errno, "{reason}").format(
            holder=self.role.usual_holder, host=self.host, reason=self.reason)
        where = f"{source}:{line}" if source and line else source
        key = f"{self.key_path} ({where})" if where else self.key_path
        if overridden and self.role.flag:
            change = f"choose another with {self.role.flag}"
        elif self.role.flag:
            change = f"choose another with {self.role.flag} or {key}"
        else:
            change = f"choose another with {key}"
        return f"cannot listen for {self.role.serves} on {address}: {cause}; {change}"


@defer.inlineCallbacks
def listen_on(endpoint, factory, role: PortRole, host: str, port: int, key_path: str):
    """``endpoint.listen(factory)``; a bind failure becomes ``PortUnavailable``."""
    try:
        listening = yield endpoint.listen(factory)
    except CannotListenError as exc:
        raise PortUnavailable(role, host, port, exc, key_path) from None
    return listening
