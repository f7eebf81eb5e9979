"""The input side of a 0-9-1 server connection, as a mixin of ``ServerConnection``:
parsing the octets read into frames, running each batch of input with its end-of-batch
hooks (every error becomes a close), and holding input back while a publishing client is
blocked by the memory alarm, then replaying it.

What a frame does once parsed is ``ServerConnection._dispatch``'s (``connection.py``: the
connection-class state table or the channel table); the contract is ``connection.py``'s
docstring."""
from __future__ import annotations

import logging
from typing import Any, Callable, Sequence

from gateway.amqp091 import methods as m
from gateway.amqp091.connection_state import ConnectionState
from gateway.amqp091.errors import ConnectionException
from gateway.amqp091.frames import Frame, MethodFrame
from gateway.amqp091.spec import ReplyCode

__all__ = ["ConnectionInput"]

log = logging.getLogger(__name__)


class _HeldInput:
    """Input held back while a publishing client is blocked by the memory alarm: parsed
    frames (from the publish on), a framing error that followed them, and octets read
    afterwards (still unparsed, so frame-max applies when they are replayed)."""

    __slots__ = ("frames", "error", "data")

    def __init__(self, frames: list[Frame], error: ConnectionException | None) -> None:
        self.frames = frames
        self.error = error
        self.data = bytearray()


class ConnectionInput:
    """Input processing of ``ServerConnection``; it uses its ``_reader``, ``_held``,
    ``_batch_end``, ``_table``, ``_timers``, ``_dispatch`` and ``_fail``."""

    def _guarded(self, work: Callable[..., None], *args: Any) -> None:
        """Run ``work`` as one batch of input, then the end-of-batch hooks; every error
        becomes a close (an unexpected one 541 and a log entry)."""
        try:
            self._in_batch = True
            try:
                work(*args)
            finally:
                self._in_batch = False
            if self._batch_end:
                self._end_batch()
        except ConnectionException as exc:
            self._fail(exc)
        except Exception:  # a bug: close only this connection
            log.exception("internal error on 0-9-1 connection from %s", self.peer_host)
            self._fail(ConnectionException(ReplyCode.INTERNAL_ERROR, "internal error"))

    def _process(self, data: bytes) -> None:
        """Parse ``data`` and dispatch its frames in order; frames before a framing error
        are still dispatched, then the error is raised."""
        try:
            frames = self._reader.feed(data)
        except ConnectionException as exc:
            self._run(getattr(exc, "frames", ()), exc)
            return
        self._run(frames, None)

    def _run(self, frames: Sequence[Frame], error: ConnectionException | None) -> None:
        """Dispatch ``frames`` in order, then raise ``error`` (the framing error that ended
        them), unless a publish arrives while blocked: then it and the rest are held."""
        i, count = 0, len(frames)
        while i < count:
            frame = frames[i]
            if (type(frame) is MethodFrame and type(frame.method) is m.BasicPublish
                    and self._machine.state is ConnectionState.OPEN):
                if self.blocked:
                    # RabbitMQ stops reading a connection that publishes while the alarm is
                    # on: this publish and everything after it wait until connection.unblocked
                    self._held = _HeldInput(list(frames[i:]), error)
                    log.info("0-9-1 client %s published while blocked; input held until "
                             "unblocked", self.peer_host)
                    return
                taken = (self._table.whole_publish(self, frames, i)
                         if self._timers.refusal_at is None else 0)
                if taken:
                    i += taken
                    if self._machine.state is ConnectionState.CLOSED:
                        return
                    continue
            self._dispatch(frame)
            if self._machine.state is ConnectionState.CLOSED:
                return
            i += 1
        if error is not None:
            raise error

    def _may_release(self) -> bool:
        """Held input may be replayed once the alarm is over or we are closing (the
        client's close-ok must be read)."""
        return not self.blocked or self._machine.state is not ConnectionState.OPEN

    def _release_held(self) -> None:
        """Dispatch the input held back by the memory alarm, then the octets read after it;
        either may be held again if the alarm came back meanwhile."""
        held = self._held
        assert held is not None
        self._held = None
        self._rx_seen = True  # the heartbeat monitor restarts now
        self._run(held.frames, held.error)
        if self._machine.state is ConnectionState.CLOSED or not held.data:
            return
        if self._held is not None:
            self._held.data += held.data
        else:
            self._process(bytes(held.data))

    def _end_batch(self) -> None:
        hooks, self._batch_end = self._batch_end, {}
        for hook in hooks.values():
            hook()
