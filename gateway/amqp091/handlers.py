"""The surface between the connection machine and the per-channel handlers.

``ServerConnection`` creates one handler per open channel through
``channel_handler_factory(context, channel_id)``. The handler receives every method of the
classes exchange, queue, basic, confirm and tx plus channel.flow/flow-ok through
``handle(method, content)`` (``content`` is set for content-carrying methods) and is told
once, through ``closed(reason)``, that its channel is gone. It answers through a
:class:`ChannelWriter` (``context.writer(channel_id)``). Raising ``ChannelException`` from
``handle`` closes the channel; raising ``ConnectionException`` closes the connection.
"""
from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Protocol

from gateway.amqp091.content import Content
from gateway.amqp091.methods import Method


__all__ = ["CloseInitiator", "CloseReason", "ChannelHandler", "ChannelHandlerFactory", "ChannelWriter",
           "ConnectionContext", "HeldReply"]


class CloseInitiator(enum.Enum):
    PEER = "peer"  # the client sent channel.close or connection.close
    LOCAL = "local"  # we closed it (an exception, or an operator action)
    TRANSPORT = "transport"  # socket EOF, heartbeat or handshake timeout, framing error


@dataclass(frozen=True, slots=True)
class CloseReason:
    """Why a channel ended. ``code`` is an int: a peer may send codes outside our table."""

    initiator: CloseInitiator
    code: int
    text: str


class ChannelHandler(Protocol):
    def handle(self, method: Method, content: Content | None) -> None: ...

    def closed(self, reason: CloseReason) -> None: ...

    def user_changed(self) -> None:
        """The connection's user record was read again (connection.update-secret): forget
        what was granted to the old one."""


class ChannelHandlerFactory(Protocol):
    def __call__(self, context: "ConnectionContext", channel_id: int) -> ChannelHandler: ...


class HeldReply:
    """The place of a reply that is not known yet in a channel's output (see
    :meth:`ChannelWriter.hold`)."""

    __slots__ = ("method", "given")

    def __init__(self) -> None:
        self.method: Method | None = None
        self.given = False


class ChannelWriter:
    """Sends frames on one channel. Frames for a channel that is no longer open (a late
    delivery after a close) are dropped, and the send methods return False.

    Held output: a synchronous method whose reply must wait (a durable declare waits for
    the store's commit) takes a place with :meth:`hold`; everything the channel sends
    after that (later replies, confirms, deliveries) waits behind it, in order, until
    :meth:`give` fills the place, so replies keep the order of the methods even though
    the channel goes on handling them meanwhile."""

    __slots__ = ("_conn", "channel_id", "_held")

    def __init__(self, conn: Any, channel_id: int) -> None:
        self._conn = conn
        self.channel_id = channel_id
        #: output waiting behind a reply not given yet: ``HeldReply`` or (send, args)
        self._held: deque[Any] | None = None

    @property
    def is_open(self) -> bool:
        return self._conn.channel_is_open(self.channel_id)

    def send_method(self, method: Method) -> bool:
        if not self._conn.channel_is_open(self.channel_id):
            return False
        if self._held is not None:
            self._held.append((self._conn.send_method, (method,)))
            return True
        self._conn.send_method(self.channel_id, method)
        return True

    def send_content(self, method: Method, properties_bytes: bytes, body: bytes) -> bool:
        """The method, the content header (raw ``properties_bytes``) and the body frames,
        split at the negotiated frame-max."""
        if not self._conn.channel_is_open(self.channel_id):
            return False
        if self._held is not None:
            self._held.append((self._conn.send_content, (method, properties_bytes, body)))
            return True
        self._conn.send_content(self.channel_id, method, properties_bytes, body)
        return True

    def send_deliver(self, consumer_tag: str, delivery_tag: int, redelivered: bool,
                     exchange: str, routing_key: str, properties_bytes: bytes,
                     body: bytes) -> bool:
        """``send_content`` of a basic.deliver with these fields (the per-delivery path:
        no method object is made)."""
        if self._held is not None:
            if not self._conn.channel_is_open(self.channel_id):
                return False
            self._held.append((self._conn.send_deliver, (consumer_tag, delivery_tag, redelivered,
                                                         exchange, routing_key, properties_bytes, body)))
            return True
        # the connection checks the channel is open (a call less per delivery)
        return self._conn.send_deliver(self.channel_id, consumer_tag, delivery_tag, redelivered,
                                       exchange, routing_key, properties_bytes, body)

    def hold(self) -> HeldReply:
        """Take the next place in the channel's output for a reply given later with
        :meth:`give`; what is sent meanwhile waits behind it."""
        place = HeldReply()
        if self._held is None:
            self._held = deque()
        self._held.append(place)
        return place

    def give(self, place: HeldReply, method: Method | None) -> None:
        """Fill ``place`` with ``method`` (None: no reply after all) and send what may go
        now: everything up to the next place not given yet."""
        place.method = method
        place.given = True
        held = self._held
        while held:
            item = held[0]
            if type(item) is HeldReply:
                if not item.given:
                    return
                held.popleft()
                if item.method is not None and self._conn.channel_is_open(self.channel_id):
                    self._conn.send_method(self.channel_id, item.method)
            else:
                held.popleft()
                if self._conn.channel_is_open(self.channel_id):
                    send, args = item
                    send(self.channel_id, *args)
        self._held = None

    def drop_held(self) -> None:
        """Forget the held output (the channel is gone)."""
        self._held = None

    def at_batch_end(self, hook: Callable[[], None]) -> None:
        """Run ``hook`` once the connection has handled the current batch of input (one
        ``receive_data``), or earlier just before this channel or the connection closes;
        at once when no input is being handled. One hook per channel (the latest wins).
        Why: replies that can be coalesced (publisher confirms) are sent once per batch."""
        self._conn.at_batch_end(self.channel_id, hook)

    def close(self, code: int, text: str, class_id: int = 0, method_id: int = 0) -> None:
        """Server-initiated channel.close outside ``handle`` (e.g. from a broker callback)."""
        self._conn.close_channel(self.channel_id, code, text, class_id, method_id)


class ConnectionContext:
    """The read-only facts of an open connection plus the few actions a handler may take."""

    __slots__ = ("_conn", "trail")

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        #: the connection's log trail: channels count its messages in and out
        self.trail = conn.trail

    @property
    def user(self) -> Any:
        return self._conn.user

    @property
    def vhost(self) -> Any:
        """The object ``broker.vhost(name)`` returned at connection.open."""
        return self._conn.vhost

    @property
    def vhost_name(self) -> str:
        return self._conn.vhost_name or ""

    @property
    def peer_host(self) -> str:
        return self._conn.peer_host

    @property
    def client_properties(self) -> dict[str, Any]:
        return self._conn.client_properties

    @property
    def frame_max(self) -> int:
        return self._conn.frame_max

    @property
    def now(self) -> float:
        """The latest time the connection was given (constructor or ``tick``), seconds."""
        return self._conn.now

    @property
    def connection(self) -> Any:
        return self._conn

    def writer(self, channel_id: int) -> ChannelWriter:
        return ChannelWriter(self._conn, channel_id)

    def block_publishers(self, reason: str) -> None:
        """connection.blocked (once) if the client advertised ``connection.blocked``."""
        self._conn.block_publishers(reason)

    def unblock_publishers(self) -> None:
        self._conn.unblock_publishers()

    def close_connection(self, code: int, text: str) -> None:
        self._conn.close(code, text)
