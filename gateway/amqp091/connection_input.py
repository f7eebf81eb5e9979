"""``ConnectionInput``: the input side of a 0-9-1 server connection, a collaborator of
``ServerConnection`` that owns its state: the frame reader, the batch in progress with
its end-of-batch hooks (by channel), and the input held back while a publishing client
is blocked by the memory alarm, or paused by a destination's back-pressure (the frames
after a publish that reached a paused ``flow.PublishFlow``).

It parses the octets read into frames, runs each batch of input (every error becomes a
close, through the connection's ``fail``), and holds a publish that arrives while the
connection is blocked, with everything after it, until it may be replayed. What a frame
does once parsed is the connection's ``dispatch`` (the connection-class state table or
the channel table); the contract is ``connection.py``'s docstring.

It keeps no reference to its connection, which holds it (a cycle would wait for a full
collection): the connection passes itself to the calls that need it. It holds the
connection's state machine, channel table and timers, none of which refers back.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Sequence

from gateway.amqp091 import methods as m
from gateway.amqp091.channel_table import ChannelTable
from gateway.amqp091.connection_state import ConnectionState, ConnectionStateMachine
from gateway.amqp091.connection_timers import ConnectionTimers
from gateway.amqp091.errors import ConnectionException
from gateway.amqp091.frames import Frame, FrameReader, MethodFrame
from gateway.amqp091.spec import FRAME_MIN_SIZE, ReplyCode

__all__ = ["ConnectionInput", "HeldInput"]

log = logging.getLogger(__name__)

# read per frame (a member read through its enum class is a lookup)
_OPEN, _CLOSED = ConnectionState.OPEN, ConnectionState.CLOSED


class HeldInput:
    """Input held back while a publishing client is blocked by the memory alarm: parsed
    frames (from the publish on), a framing error that followed them, and octets read
    afterwards (still unparsed, so frame-max applies when they are replayed)."""

    __slots__ = ("frames", "error", "data")

    def __init__(self, frames: list[Frame], error: ConnectionException | None) -> None:
        self.frames = frames
        self.error = error
        self.data = bytearray()


class ConnectionInput:
    """See the module docstring. ``conn`` in each call is the ``ServerConnection`` that
    holds this object: read for ``blocked`` and ``peer_host``, told through ``dispatch``
    and ``fail``."""

    __slots__ = ("reader", "held", "_batch_end", "_in_batch", "_machine", "_table", "_timers")

    def __init__(self, machine: ConnectionStateMachine, table: ChannelTable,
                 timers: ConnectionTimers) -> None:
        #: frames from octets; its frame-max is the negotiated one after tune-ok
        self.reader = FrameReader(FRAME_MIN_SIZE)
        #: input held by the memory alarm (None: reading)
        self.held: HeldInput | None = None
        # end-of-batch hooks by channel (e.g. coalesced publisher confirms), run once the
        # current batch is done, or earlier before that channel or the connection closes
        self._batch_end: dict[int, Callable[[], None]] = {}
        self._in_batch = False
        self._machine = machine
        self._table = table
        self._timers = timers

    def guarded(self, conn: Any, work: Callable[..., None], *args: Any) -> None:
        """Run ``work`` as one batch of input, then the end-of-batch hooks; every error
        becomes a close (an unexpected one 541 and a log entry)."""
        try:
            self._in_batch = True
            try:
                work(*args)
            finally:
                self._in_batch = False
            if self._batch_end:
                self.end_batch()
        except ConnectionException as exc:
            conn.fail(exc)
        except Exception:  # a bug: close only this connection
            log.exception("internal error on 0-9-1 connection from %s", conn.peer_host)
            conn.fail(ConnectionException(ReplyCode.INTERNAL_ERROR, "internal error"))

    def process(self, conn: Any, data: bytes) -> None:
        """Parse ``data`` and dispatch its frames in order; frames before a framing error
        are still dispatched, then the error is raised."""
        try:
            frames = self.reader.feed(data)
        except ConnectionException as exc:
            self._run(conn, getattr(exc, "frames", ()), exc)
            return
        self._run(conn, frames, None)

    def hold_more(self, data: bytes) -> None:
        """Octets read while input is held (or released but not replayed yet): they wait
        behind it, in stream order."""
        assert self.held is not None
        self.held.data += data

    def may_release(self, conn: Any) -> bool:
        """Held input may be replayed once the alarm is over or we are closing (the
        client's close-ok must be read)."""
        return not (conn.blocked or conn.flow_paused) or self._machine.state is not _OPEN

    def release_held(self, conn: Any) -> None:
        """Dispatch the input held back by the memory alarm, then the octets read after it;
        either may be held again if the alarm came back meanwhile."""
        held = self.held
        assert held is not None
        self.held = None
        self._run(conn, held.frames, held.error)
        if self._machine.state is _CLOSED or not held.data:
            return
        if self.held is not None:
            self.held.data += held.data
        else:
            self.process(conn, bytes(held.data))

    def at_batch_end(self, channel_id: int, hook: Callable[[], None]) -> None:
        """Run ``hook`` once the current batch of input is handled, or before
        ``channel_id`` or the connection closes; at once outside a batch. One per channel."""
        if self._in_batch:
            self._batch_end[channel_id] = hook
        else:
            hook()

    def flush_channel(self, channel_id: int) -> None:
        """Run ``channel_id``'s end-of-batch hook now (before that channel's close)."""
        hook = self._batch_end.pop(channel_id, None)
        if hook is not None:
            hook()

    @property
    def owes_batch_end(self) -> bool:
        """Some channel's end-of-batch hook is waiting."""
        return bool(self._batch_end)

    def end_batch(self) -> None:
        """Run the waiting end-of-batch hooks now."""
        hooks, self._batch_end = self._batch_end, {}
        for hook in hooks.values():
            hook()

    def drop(self) -> None:
        """The connection ended: forget held input and waiting hooks."""
        self.held = None
        self._batch_end.clear()

    def _run(self, conn: Any, frames: Sequence[Frame], error: ConnectionException | None) -> None:
        """Dispatch ``frames`` in order, then raise ``error`` (the framing error that ended
        them), unless a publish arrives while blocked: then it and the rest are held."""
        machine, i, count = self._machine, 0, len(frames)
        while i < count:
            if conn.flow_paused and machine.state is _OPEN:
                # a publish reached a destination that pushes back: the rest waits
                self.held = HeldInput(list(frames[i:]), error)
                return
            frame = frames[i]
            if (type(frame) is MethodFrame and type(frame.method) is m.BasicPublish
                    and machine.state is _OPEN):
                if conn.blocked:
                    # RabbitMQ stops reading a connection that publishes while the alarm is
                    # on: this publish and everything after it wait until connection.unblocked
                    self.held = HeldInput(list(frames[i:]), error)
                    log.info("0-9-1 client %s published while blocked; input held until "
                             "unblocked", conn.peer_host)
                    return
                taken = (self._table.whole_publish(conn, frames, i)
                         if self._timers.refusal_at is None else 0)
                if taken:
                    i += taken
                    if machine.state is _CLOSED:
                        return
                    continue
            conn.dispatch(frame)
            if machine.state is _CLOSED:
                return
            i += 1
        if error is not None:
            raise error
