"""The contract between a client-facing engine and the backend connection it proxies to.

A 0-9-1 ``ServerConnection`` or a 1.0 engine whose client opened a proxied vhost asks its
``VhostProxy`` (made by the edge, which owns the sockets) for a backend connection; the
login it opens with comes from ``backend_login`` (passthrough: the client's own PLAIN
credentials; anonymous: SASL ANONYMOUS; else the backend's service account). Failures reach the engine as
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
           "lost_text", "LinkEvents", "LinkConnection", "CarriedEvents"]


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
    if settings.anonymous:
        return BackendLogin("", "", settings.vhost, "ANONYMOUS", connection_name)
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

    def connect_links(self, backend: BackendNodes, login: BackendLogin, events: Any) -> Any:
        """``connect`` with the 1.0 client engine of an amqp10 backend (``LinkEvents``)."""




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


class LinkEvents(Protocol):
    """What a 0-9-1 connection on an amqp10 backend hears from its 1.0 connection there
    (``key``: the link's, given when it was opened)."""

    def opened(self, engine: Any, node: Any) -> None:
        """The backend connection opened (the connector's)."""

    def failed(self, failure: BackendFailure) -> None:
        """No node opened a connection (the connector's)."""

    def link_ready(self, key: Any) -> None:
        """The backend attached the link (its address exists, or it made it)."""

    def link_failed(self, key: Any, error: str, in_doubt: tuple) -> None:
        """The backend refused or detached the link; ``in_doubt``: tokens of messages sent
        on it that it never settled."""

    def outcome(self, key: Any, token: Any, outcome: str, error: str) -> None:
        """The backend settled a message sent on ``key`` (``accepted``, ``rejected``,
        ``released``, ``modified``)."""

    def delivered(self, key: Any, delivery: Any, message: Any, redelivered: bool) -> None:
        """A message (a broker ``MessageContainer`` in 1.0 encoding) on receiver ``key``;
        ``delivery`` is what ``settle`` takes."""

    def lost(self, error: str) -> None:
        """The open backend connection went away."""


class LinkConnection(Protocol):
    """A 1.0 connection to an amqp10 backend carrying a 0-9-1 client's operations
    (``amqp10.backend_client``)."""

    def open_sender(self, key: Any, address: str) -> None: ...
    def open_receiver(self, key: Any, address: str, credit: int) -> None: ...
    def send(self, key: Any, token: Any, message: Any) -> None: ...
    def add_credit(self, key: Any, credit: int) -> None: ...
    def settle(self, key: Any, delivery: Any, outcome: str) -> None: ...
    def close_link(self, key: Any) -> None: ...


class CarriedEvents(Protocol):
    """What a 1.0 connection on an amqp10 backend hears of its links there, carried link
    for link (``amqp10.backend_client``; ``key``: the link's, given at ``carry_link``);
    ``opened``, ``failed``, ``lost``, ``link_ready`` and ``link_failed`` as ``LinkEvents``."""

    def carried_flow(self, key: Any) -> None:
        """The backend's flow on ``key``: new credit for a sender, a drain's end for a receiver."""

    def carried_outcome(self, key: Any, token: Any, delivery: Any) -> None:
        """The backend settled a payload sent on ``key``; ``delivery`` (proton's) holds its
        outcome, read at once (it is settled after)."""

    def carried_transfer(self, key: Any, delivery: Any, payload: bytes) -> None:
        """A message's bytes on receiver ``key``, as the backend sent them; ``delivery`` is
        what ``settle_carried`` takes, None when the backend sent it settled."""
