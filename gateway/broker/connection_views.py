"""What a protocol connection shows an operator: neutral views both engines fill.

Management (``gateway.management``) reads these and never a protocol's internals, and
the protocols never import management (DESIGN.md): the views sit in the broker layer,
which both sides may import. Names are the neutral ones; management maps them to
RabbitMQ's field names in one place (``gateway.management.views``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Protocol

__all__ = ["AMQP091_PROTOCOL", "AMQP10_PROTOCOL", "ChannelView", "ConnectionView", "LinkView",
           "ManagedConnection", "backend_label", "connection_name", "plain"]

#: ``ConnectionView.protocol`` values, as RabbitMQ's management API spells them
AMQP091_PROTOCOL = "AMQP 0-9-1"
AMQP10_PROTOCOL = "AMQP 1.0"


@dataclass(frozen=True)
class ChannelView:
    """A 0-9-1 channel or a 1.0 session."""

    number: int
    consumers: int = 0
    unacknowledged: int = 0
    prefetch_count: int = 0
    mode: str = ""  # "confirm", "tx" or "" (0-9-1 only)


@dataclass(frozen=True)
class LinkView:
    """A 1.0 link, or a 0-9-1 consumer seen as one. ``role`` is the gateway's side:
    ``sender`` delivers to the client, ``receiver`` takes the client's messages."""

    name: str
    role: str
    address: Optional[str]
    channel: int = 0
    queue: Optional[str] = None
    credit: int = 0
    unsettled: int = 0
    exclusive: bool = False
    ack_required: bool = True


@dataclass(frozen=True)
class ConnectionView:
    """One open, authenticated connection."""

    name: str
    protocol: str
    user: str
    vhost: str
    peer_host: str
    peer_port: int
    connected_at: float
    ssl: bool = False
    client_properties: dict = field(default_factory=dict)
    channels: tuple[ChannelView, ...] = ()
    links: tuple[LinkView, ...] = ()
    #: edge mode: the backend and node a proxied connection is carried to ("NAME host:port")
    backend: str = ""


def backend_label(session: Any) -> str:
    """``ConnectionView.backend`` of a proxied connection's backend session (edge mode):
    the backend's name and the node it opened on, "" for a local connection."""
    if session is None:
        return ""
    node = getattr(session, "node", None)
    return f"{session.name} {node.address}" if node is not None else f"{session.name} (connecting)"


def connection_name(peer: str, connection_id: Any) -> str:
    """A connection's name in management: its peer address and the edge's id, e.g.
    ``127.0.0.1:50432 #7`` (unique while the process lives; RabbitMQ's names also start
    with the peer address)."""
    return f"{peer} #{connection_id}"


class ManagedConnection(Protocol):
    """What an engine offers management: a view, and a close by an operator."""

    def view(self) -> ConnectionView: ...

    def shutdown(self, reason: str) -> None: ...

    def output_ready(self) -> None: ...


def plain(value: Any) -> Any:
    """``value`` as JSON-friendly Python (bytes as text, nested maps and lists too), for
    views of arguments and client properties."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, dict):
        return {str(plain(k)): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    return str(value)
