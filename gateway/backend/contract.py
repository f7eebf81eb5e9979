"""The contract between a client-facing engine and the backend connection it proxies to.

A 0-9-1 ``ServerConnection`` or a 1.0 engine whose client opened a proxied vhost asks its
``VhostProxy`` (made by the edge, which owns the sockets) for a backend connection; the
login it opens with comes from ``backend_login`` (passthrough: the client's own PLAIN
credentials; else the backend's service account). Failures reach the engine as
``BackendFailure``: ``kind`` says whether the backend refused the login, the vhost, or
could not be reached or was lost, and ``text`` is the backend's own reason, which the
client is told (0-9-1 reply codes and 1.0 conditions are the protocols' to choose).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Optional, Protocol

from gateway.backend.nodes import BackendNodes
from gateway.backend.settings import BackendSettings

__all__ = ["BackendLogin", "FailureKind", "BackendFailure", "VhostProxy", "backend_login",
           "lost_text"]


class FailureKind(enum.Enum):
    LOGIN_REFUSED = "login refused"      # the backend refused the credentials
    ACCESS_REFUSED = "access refused"    # the vhost (the backend's or the gateway's rule)
    UNREACHABLE = "unreachable"          # no node could be reached in time
    LOST = "lost"                        # an open backend connection went away


class BackendFailure(Exception):
    """What went wrong with a backend connection; ``text`` is for the client."""

    def __init__(self, kind: FailureKind, text: str) -> None:
        super().__init__(text)
        self.kind = kind
        self.text = text


@dataclass(frozen=True, slots=True)
class BackendLogin:
    """What a backend connection opens with (the backend's vhost, not the client's)."""

    user: str
    password: str = field(repr=False)
    vhost: str
    mechanism: str = "PLAIN"
    connection_name: str = ""


def backend_login(settings: BackendSettings, user: str, password: Optional[str], *,
                  service_password: str, connection_name: str) -> BackendLogin:
    """The login for a client ``user`` (with the ``password`` its SASL login kept, None
    for mechanisms that have none). Raises ``BackendFailure`` LOGIN_REFUSED when a
    passthrough backend gets no password to pass."""
    if settings.passthrough:
        if password is None:
            raise BackendFailure(FailureKind.LOGIN_REFUSED,
                                 f"backend '{settings.name}' takes the client's own user and "
                                 "password (credentials: passthrough): log in with PLAIN")
        return BackendLogin(user, password, settings.vhost, "PLAIN", connection_name)
    return BackendLogin(settings.user, service_password, settings.vhost, "PLAIN", connection_name)


def lost_text(backend: str, error: str) -> str:
    """The reason a client hears when its backend connection went away (the issue's text)."""
    return f"backend {backend} lost: {error}"


class VhostProxy(Protocol):
    """What the engines are given (by ``service.py``; the edge implements it)."""

    def backend_for(self, vhost: str) -> Optional[BackendNodes]:
        """The backend ``vhost`` is proxied to, or None for a local vhost."""

    def connect(self, backend: BackendNodes, login: BackendLogin, make_engine: Any,
                events: Any) -> Any:
        """Open a backend connection: each node in ``backend.order()`` until one opens;
        ``make_engine(node)`` builds the client engine for an attempt. ``events`` hears
        ``opened(engine, node)`` or ``failed(BackendFailure)``, then ``lost(error)``.
        Returns a handle with ``close(reason)``."""

    def connect_bridge(self, backend: BackendNodes, login: BackendLogin, events: Any) -> Any:
        """``connect`` with the engine that carries a 1.0 client's links (``BridgeEvents``)."""




class BridgeEvents(Protocol):
    """What a 1.0 connection hears from its backend bridge (a 0-9-1 backend carrying 1.0
    links; ``key`` is the link's own key, given when the channel was opened)."""

    def published(self, key: Any, token: Any, accepted: bool, error: Any) -> None:
        """The backend confirmed (``accepted``) or refused (nack, return, channel error:
        ``error`` is a broker ``BrokerError`` naming why)."""

    def delivered(self, key: Any, delivery_tag: int, redelivered: bool, message: Any) -> None:
        """A message for the consumer of ``key`` (a broker ``MessageContainer``)."""

    def channel_ready(self, key: Any) -> None:
        """The link's channel is open (publisher: in confirm mode; consumer: consuming)."""

    def channel_failed(self, key: Any, error: Any, in_doubt: tuple) -> None:
        """The backend closed the link's channel (``error``: a ``BrokerError``; ``in_doubt``:
        the tokens of publishes it never settled)."""

    def drained(self, key: Any) -> None:
        """The backend had its chance to fill the consumer's credit (a round trip)."""

    def flow(self, blocked: bool) -> None:
        """The backend stopped (connection.blocked) or resumed taking publishes."""

    def lost(self, error: str) -> None:
        """The open backend connection went away."""


class BridgeConnection(Protocol):
    """A backend connection that carries a 1.0 client's links (``amqp091.backend_bridge``)."""

    def open_publisher(self, key: Any) -> None: ...
    def open_consumer(self, key: Any, queue: str, prefetch: int) -> None: ...
    def publish(self, key: Any, token: Any, exchange: str, routing_key: str, message: Any) -> None: ...
    def set_prefetch(self, key: Any, prefetch: int) -> None: ...
    def drain(self, key: Any) -> None: ...
    def settle(self, key: Any, delivery_tag: int, disposition: Any) -> None: ...
    def close_channel(self, key: Any) -> None: ...
