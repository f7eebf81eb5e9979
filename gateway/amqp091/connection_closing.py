"""``ConnectionClosing``: how a 0-9-1 server connection ends.

Theory of operation. A ``ConnectionException`` (ours or a handler's) ends the connection
(``fail``): with connection.close and the CLOSING state, where we wait ``close_timeout``
seconds for close-ok (``begin_close``), or silently, the socket just closed
(``terminate``): before the client sent connection.open (REQUIREMENTS 1.2), and for a
framing error with ``send_close=False``. While CLOSING, another failure closes at once.
Before the close goes out, what the channels owe from the current batch (publisher
confirms) is sent. Once CLOSED, the channels are told why and the close callbacks run,
once each (a callback added after that runs at once).

It owns that state (the callbacks, who a close of ours is by, the close timeout); the
connection's other collaborators (state machine, timers, channel table, input, handshake
and methods) are handed in, and the connection passes itself to each call, for its logger,
trail and output, so nothing here keeps a reference to the connection.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from gateway.amqp091 import methods as m
from gateway.amqp091.connection_state import HANDSHAKE_STATES, ConnectionState, ConnectionStateMachine, LocalEvent
from gateway.amqp091.errors import ConnectionException
from gateway.amqp091.handlers import CloseInitiator, CloseReason
from gateway.connection_log import CLOSED_BY_SERVER

__all__ = ["ConnectionClosing"]

log = logging.getLogger(__name__)


class ConnectionClosing:
    """A connection's ending; see the module docstring."""

    __slots__ = ("closed_by", "_callbacks", "_close_timeout", "_machine", "_timers", "_table", "_input",
                 "_handshake", "_methods")

    def __init__(self, close_timeout: float, machine: ConnectionStateMachine, timers: Any, table: Any,
                 connection_input: Any, handshake: Any, methods: Any) -> None:
        #: who a close of ours is by, for the close line (a gateway shutdown says so)
        self.closed_by = CLOSED_BY_SERVER
        self._callbacks: list[Callable[[], None]] = []
        self._close_timeout = close_timeout
        self._machine = machine
        self._timers = timers
        self._table = table
        self._input = connection_input
        self._handshake = handshake
        self._methods = methods

    def add_callback(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` once when the connection reaches CLOSED (after the channel
        handlers were told), e.g. to drop exclusive queues and memory-alarm listeners."""
        if self._machine.state is ConnectionState.CLOSED:
            callback()
        else:
            self._callbacks.append(callback)

    def fail(self, conn: Any, exc: ConnectionException) -> None:
        """``exc`` ends the connection: connection.close, or the silent close."""
        state = self._machine.state
        if state in (ConnectionState.CLOSED, ConnectionState.CLOSING):
            if state is ConnectionState.CLOSING:
                conn.logger.info("0-9-1 connection from %s: %s while closing", conn.peer_host, exc)
                self.terminate(conn, None)
            return
        silent = not exc.send_close or (state in HANDSHAKE_STATES and not self._methods.open_received)
        conn.logger.debug("0-9-1 connection from %s failed: %s", conn.peer_host, exc)
        conn.trail.closing(self.closed_by, int(exc.code), exc.text)
        if silent:
            self.terminate(conn, CloseReason(CloseInitiator.TRANSPORT, exc.code, exc.text))
        else:
            self.begin_close(conn, exc)

    def begin_close(self, conn: Any, exc: ConnectionException) -> None:
        """Send connection.close for ``exc`` and wait (``close_timeout``) for close-ok."""
        if self._machine.state is ConnectionState.OPEN and self._input.owes_batch_end:
            try:  # what the channels owe (confirms) goes out before the close
                self._input.end_batch()
            except Exception:  # closing anyway; never raise out of an error path
                log.exception("end-of-batch hook failed while closing 0-9-1 connection from %s",
                              conn.peer_host)
        conn.send_method(0, m.ConnectionClose(reply_code=int(exc.code), reply_text=exc.reply_text,
                                               class_id=exc.class_id, method_id=exc.method_id))
        self._table.close_all(CloseReason(CloseInitiator.LOCAL, int(exc.code), exc.text))
        self._machine.process(LocalEvent.CLOSE_SENT)
        self._timers.close_sent(conn.now, self._close_timeout)

    def terminate(self, conn: Any, reason: CloseReason | None) -> None:
        """The connection is CLOSED now: the channels are told ``reason`` (None: they were
        already), then the close callbacks run."""
        if reason is not None:
            self._table.close_all(reason)
        self._machine.process(LocalEvent.ENDED)
        self._timers.stop()
        self._input.drop()
        self._handshake.end()
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            try:
                callback()
            except Exception:
                log.exception("close callback failed on 0-9-1 connection from %s", conn.peer_host)
