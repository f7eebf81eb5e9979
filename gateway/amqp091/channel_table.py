"""``ChannelTable``: the open channels of one 0-9-1 connection and the frames they get.

Channels 1..channel-max open with channel.open (a higher number, or a frame for a channel
that is not open, is 504); each gets a handler from the connection's
``channel_handler_factory``. Frames for a channel go to its handler: methods directly,
content through the channel's ``ContentAssembler``. A ``ChannelException`` from the
assembler or the handler closes just that channel: channel.close is sent and every frame
on it but close/close-ok is dropped until close-ok. A client's channel.close is answered
with close-ok, after the channel's end-of-batch hook (confirms owed go first).

A basic.publish whose header and body arrived with it goes to the handler in one step
(:meth:`ChannelTable.whole_publish`): a message is three frames, and the frame-by-frame
steps were a fifth of its cost. The assembler checks the content either way.

The table keeps no reference to its connection: the connection holds the table, and a
cycle between them would be freed only by a full collection, so the connection passes
itself to the calls that answer on the wire.
"""
from __future__ import annotations

import enum
import logging
from typing import Any, Sequence

from gateway.amqp091 import methods as m
from gateway.amqp091.content import ContentAssembler
from gateway.amqp091.errors import ChannelException, ConnectionException
from gateway.amqp091.frames import BodyFrame, Frame, HeaderFrame, MethodFrame
from gateway.amqp091.handlers import (ChannelHandler, ChannelHandlerFactory, CloseInitiator,
                                      CloseReason, ConnectionContext)
from gateway.amqp091.spec import ClassId, Direction, ReplyCode
from gateway.connection_log import about_connection


__all__ = ["ChannelTable", "ChannelSlot", "ChannelState"]

log = logging.getLogger(__name__)


class ChannelState(enum.Enum):
    OPEN = "open"
    CLOSING = "closing"  # we sent channel.close; drop all but close/close-ok


# read on every publish (a member read through its enum class is a lookup)
_OPEN = ChannelState.OPEN


class ChannelSlot:
    """One open (or closing) channel: its handler and its content assembler."""

    __slots__ = ("id", "state", "handler", "assembler")

    def __init__(self, channel_id: int, handler: ChannelHandler, max_message_size: int) -> None:
        self.id = channel_id
        self.state = ChannelState.OPEN
        self.handler = handler
        self.assembler = ContentAssembler(max_message_size)


class ChannelTable:
    """The channels of a connection by number (``slots``, one dict for the table's life);
    see the module docstring."""

    __slots__ = ("slots", "_factory", "_max_message_size")

    def __init__(self, factory: ChannelHandlerFactory, max_message_size: int) -> None:
        self.slots: dict[int, ChannelSlot] = {}
        self._factory = factory
        self._max_message_size = max_message_size

    def use_factory(self, factory: ChannelHandlerFactory) -> None:
        """Channels opened from now on get their handler from ``factory`` (edge mode on
        an amqp10 backend: before any channel opened)."""
        self._factory = factory

    def frame(self, conn: Any, channel_id: int, frame: Frame) -> None:
        """One frame for channel ``channel_id`` of the open connection ``conn``. Raises
        ``ConnectionException`` for what closes the connection (504, 503, 505 ...)."""
        method = frame.method if type(frame) is MethodFrame else None
        if method is not None:
            if method.CLASS_ID == ClassId.CONNECTION:
                raise ConnectionException(ReplyCode.COMMAND_INVALID,
                                          f"{method.NAME} must use channel 0, not {channel_id}",
                                          method.CLASS_ID, method.METHOD_ID)
        ch = self.slots.get(channel_id)
        if ch is None:
            if type(method) is m.ChannelOpen:
                self._open(conn, channel_id)
                return
            what = method.NAME if method is not None else "content frame"
            raise ConnectionException(ReplyCode.CHANNEL_ERROR,
                                      f"expecting 'channel.open' on channel {channel_id}, got {what}",
                                      *(_ids(method)))
        if ch.state is ChannelState.CLOSING:
            if type(method) is m.ChannelCloseOk:
                del self.slots[channel_id]
            elif type(method) is m.ChannelClose:  # simultaneous close: answer, keep waiting
                conn.send_method(channel_id, m.ChannelCloseOk())
            return
        if method is not None and method.SPEC.direction is Direction.SERVER:
            raise ConnectionException(ReplyCode.COMMAND_INVALID, f"{method.NAME} may only be sent by the server",
                                      method.CLASS_ID, method.METHOD_ID)
        if method is not None and not method.CONTENT and not ch.assembler.busy:
            self._method(conn, ch, method)
            return
        try:
            done = ch.assembler.accept(frame)
            if done is not None:
                ch.handler.handle(done[0], done[1])
        except ChannelException as exc:
            self.close(conn, ch, exc.code, exc.reply_text, exc.class_id, exc.method_id)

    def whole_publish(self, conn: Any, frames: Sequence[Frame], i: int) -> int:
        """Hand ``frames[i]`` (a basic.publish) with its header and body straight to the
        channel's handler when all of them are in ``frames``; returns how many frames that
        took (0: take them one by one through :meth:`frame`).

        The content is checked by the channel's assembler as frame by frame
        (``ContentAssembler.content_of``); what is left to the frame-by-frame path is what
        needs its state: another channel's frame in between, a channel that is not open or
        has content under way, a body in several frames or of the wrong size.
        """
        if i + 1 >= len(frames):
            return 0
        method_frame, header = frames[i], frames[i + 1]
        channel = method_frame.channel
        if type(header) is not HeaderFrame or header.channel != channel or channel == 0:
            return 0
        ch = self.slots.get(channel)
        if ch is None or ch.state is not _OPEN or ch.assembler.busy:
            return 0
        size = header.body_size
        if size:
            if i + 2 >= len(frames):
                return 0
            body_frame = frames[i + 2]
            if (type(body_frame) is not BodyFrame or body_frame.channel != channel
                    or len(body_frame.payload) != size):
                return 0
            body, taken = body_frame.payload, 3
        else:
            body, taken = b"", 2
        method = method_frame.method
        try:
            ch.handler.handle(method, ch.assembler.content_of(method, header, body))
        except ChannelException as exc:
            self.close(conn, ch, exc.code, exc.reply_text, exc.class_id, exc.method_id)
        return taken

    def close(self, conn: Any, ch: ChannelSlot, code: int, text: str,
              class_id: int, method_id: int) -> None:
        """Close the open channel ``ch`` from our side: channel.close, then its handler is
        told; nothing if it is already closing."""
        if ch.state is not ChannelState.OPEN:
            return
        conn.flush_channel(ch.id)  # e.g. confirms of publishes before the failing method
        ch.state = ChannelState.CLOSING
        ch.assembler = ContentAssembler(self._max_message_size)
        log.info("closing channel %d of %s: %s %s", ch.id, conn.peer_host, code, text,
                 extra=about_connection(conn.trail.connection_id))
        conn.send_method(ch.id, m.ChannelClose(reply_code=int(code), reply_text=text,
                                               class_id=class_id, method_id=method_id))
        _notify_closed(ch, CloseReason(CloseInitiator.LOCAL, int(code), text))

    def close_all(self, reason: CloseReason) -> None:
        """The connection is going: forget every channel, then tell the open ones'
        handlers. (``slots`` stays the same dict: the connection reads it too.)"""
        slots = list(self.slots.values())
        self.slots.clear()
        for ch in slots:
            if ch.state is ChannelState.OPEN:
                _notify_closed(ch, reason)

    def _method(self, conn: Any, ch: ChannelSlot, method: m.Method) -> None:
        kind = type(method)
        if kind is m.ChannelOpen:
            raise ConnectionException(ReplyCode.CHANNEL_ERROR, f"channel {ch.id} is already open",
                                      method.CLASS_ID, method.METHOD_ID)
        if kind is m.ChannelClose:
            conn.flush_channel(ch.id)
            del self.slots[ch.id]
            _notify_closed(ch, CloseReason(CloseInitiator.PEER, method.reply_code, method.reply_text))
            conn.send_method(ch.id, m.ChannelCloseOk())
            return
        if kind is m.ChannelCloseOk:
            raise ConnectionException(ReplyCode.COMMAND_INVALID,
                                      f"channel.close-ok on channel {ch.id}, which is not closing",
                                      method.CLASS_ID, method.METHOD_ID)
        if kind is m.AccessRequest:
            conn.send_method(ch.id, m.AccessRequestOk(ticket=1))
            return
        try:
            ch.handler.handle(method, None)
        except ChannelException as exc:
            self.close(conn, ch, exc.code, exc.reply_text, exc.class_id, exc.method_id)

    def _open(self, conn: Any, channel_id: int) -> None:
        limit = conn.tune.effective_channel_max
        if channel_id > limit:
            raise ConnectionException(ReplyCode.CHANNEL_ERROR,
                                      f"channel {channel_id} is above the negotiated channel-max {limit}",
                                      ClassId.CHANNEL, m.ChannelOpen.METHOD_ID)
        # a context per channel, not one kept by the connection: the connection and a
        # context of its own would be a reference cycle, which the gateway collects rarely;
        # the channels are dropped at close, and the connection is then freed by reference
        # counting
        handler = self._factory(ConnectionContext(conn), channel_id)
        self.slots[channel_id] = ChannelSlot(channel_id, handler, self._max_message_size)
        conn.send_method(channel_id, m.ChannelOpenOk())


def _notify_closed(ch: ChannelSlot, reason: CloseReason) -> None:
    try:
        ch.handler.closed(reason)
    except Exception:
        log.exception("channel handler failed while closing channel %d", ch.id)


def _ids(method: m.Method | None) -> tuple[int, int]:
    return (method.CLASS_ID, method.METHOD_ID) if method is not None else (0, 0)
