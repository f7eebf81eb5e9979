"""Drives either protocol engine from a Twisted transport.

Both engines (0-9-1 ``ServerConnection``, 1.0 engine) expose one surface:
``receive_data(bytes)``, ``receive_eof()``, ``data_to_send() -> bytes``,
``tick(now) -> float | None`` (absolute next deadline), ``closed``, ``wants_input``, and
optionally ``shutdown(reason)`` (graceful close for SIGTERM) and an ``on_output``
attribute: the engine calls it when output appears outside ``receive_data`` (a delivery
caused by another connection's publish), and the driver then flushes on the next reactor
turn. One driver therefore serves both protocols and batches writes: the engine's output
is drained once per read, never once per event. An engine closed by its handshake
deadline says so in ``timed_out`` (a ``HandshakeTimeout``); the driver logs it once,
through the shared rate limit (``timeout_log``).
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Optional, Protocol

from twisted.internet.interfaces import IDelayedCall, IReactorTime, ITransport

from gateway.connection_log import RateLimitedLog, log_handshake_timeout, peer_name
from gateway.edge.tls import end_connection

log = logging.getLogger(__name__)

__all__ = ["Engine", "EngineDriver", "CLOSE_LINGER"]

#: seconds the socket stays open after a protocol close for the peer to close it first
CLOSE_LINGER = 3.0


class Engine(Protocol):
    closed: bool
    wants_input: bool
    #: optional: read once ``closed`` is True (see the module docstring)
    linger_on_close: bool

    def receive_data(self, data: bytes) -> None: ...
    def receive_eof(self) -> None: ...
    def data_to_send(self) -> bytes: ...
    def tick(self, now: float) -> Optional[float]: ...


class EngineDriver:
    """Feeds socket bytes to an engine, writes its output, schedules its timers."""

    def __init__(self, engine: Engine, transport: ITransport, reactor: IReactorTime,
                 on_finished: Callable[["EngineDriver"], None] | None = None,
                 timeout_log: RateLimitedLog | None = None,
                 close_linger: float = CLOSE_LINGER) -> None:
        self.engine = engine
        self._close_linger = close_linger
        self._timeout_log = timeout_log
        self.transport: Optional[ITransport] = transport   # None once the connection is lost
        self.reactor = reactor
        self._on_finished = on_finished
        self._timer: IDelayedCall | None = None
        self._timer_at: float | None = None
        self._flush_pending = False
        self._paused = False
        self._lost = False
        self._closing = False
        #: the engine is done; waiting for the peer's EOF (or the linger deadline)
        self._lingering = False
        self._eof = False
        if hasattr(engine, "on_output"):
            engine.on_output = self.request_flush  # type: ignore[attr-defined]

    # -- input -------------------------------------------------------------------
    def start(self, initial: bytes = b"") -> None:
        """Flush what the engine says first (0-9-1 connection.start) and feed leftovers."""
        if initial:
            self.data_received(initial)
        else:
            self.flush()

    def data_received(self, data: bytes) -> None:
        if self._lost or self._lingering:
            return  # after a protocol close: read and discarded
        # bring the engine's clock up to date first: what it does with this input
        # (message TTLs, timestamps, expiry) must not use the time of the last flush
        self._guard(self.engine.tick, self.reactor.seconds())
        self._guard(self.engine.receive_data, data)
        self.flush()

    def eof_received(self) -> None:
        self._eof = True
        if self._lingering:
            self._end()
            return
        self._guard(self.engine.receive_eof)
        self.flush()

    def connection_lost(self) -> None:
        if self._lost:
            return
        self._lost = True
        self._cancel_timer()
        if not self.engine.closed:
            self._guard(self.engine.receive_eof)
        if self._on_finished:
            self._on_finished(self)
        # The engine points back at this driver (on_output), and a TLS wrapper at the
        # protocol holding it: cycles, which the gateway collects rarely. A lost connection
        # is freed by reference counting alone once these links are gone.
        if hasattr(self.engine, "on_output"):
            self.engine.on_output = None  # type: ignore[attr-defined]
        self.transport = None

    def shutdown(self, reason: str) -> None:
        """Ask the engine for a proper protocol close (SIGTERM drain)."""
        if self._lost:
            return
        if self._lingering:
            self._end()  # the protocol close is done: the drain need not wait for the peer
            return
        stop = getattr(self.engine, "shutdown", None)
        if stop is not None:
            self._guard(stop, reason)
            self.flush()
        else:
            end_connection(self.transport)

    def _guard(self, fn: Callable[..., Any], *args: Any) -> None:
        # An engine raises only after queueing its close frame; anything else is a bug
        # that must cost this connection, never the reactor.
        try:
            fn(*args)
        except Exception as exc:  # noqa: BLE001 - the reactor must survive
            if not getattr(self.engine, "closed", False):
                log.exception("engine failed on %s; closing the connection", self._peer())
            else:
                log.info("connection %s closed: %s", self._peer(), exc)
            self._closing = True

    def _peer(self) -> str:
        # the engine's peer is the client's address, a PROXY header's where there was one
        host = getattr(self.engine, "peer_host", None)
        if host is not None:
            return peer_name(host, getattr(self.engine, "peer_port", 0))
        try:
            p = self.transport.getPeer()
            return peer_name(p.host, p.port)
        except Exception:  # noqa: BLE001
            return "?"

    # -- output ------------------------------------------------------------------
    def request_flush(self) -> None:
        if not self._flush_pending and not self._lost:
            self._flush_pending = True
            self.reactor.callLater(0, self.flush)

    def flush(self) -> None:
        """Run the engine's timers, write its output, then close, pause or re-arm."""
        self._flush_pending = False
        if self._lost or self._lingering:
            return
        now = self.reactor.seconds()
        deadline: float | None = None
        try:
            deadline = self.engine.tick(now)
            out = self.engine.data_to_send()
        except Exception:  # noqa: BLE001
            log.exception("engine failed on %s; closing the connection", self._peer())
            out, self._closing = b"", True
        if out:
            self.transport.write(out)
        if self.engine.closed or self._closing:
            self._cancel_timer()
            self._log_timeout(now)
            if (not self._closing and not self._eof and self._close_linger > 0
                    and getattr(self.engine, "linger_on_close", False)):
                self._linger()
            else:
                end_connection(self.transport)
            return
        self._apply_backpressure()
        self._arm_timer(deadline, now)

    def _linger(self) -> None:
        """Keep reading (and discarding) until the peer closes or ``close_linger`` passes."""
        self._lingering = True
        if self._paused:
            self._paused = False
            self.transport.resumeProducing()
        self._timer_at = None
        self._timer = self.reactor.callLater(self._close_linger, self._end)

    def _end(self) -> None:
        self._cancel_timer()
        if not self._lost:
            end_connection(self.transport)

    def _log_timeout(self, now: float) -> None:
        timed_out = getattr(self.engine, "timed_out", None)
        if timed_out is not None and self._timeout_log is not None:
            self._timeout_log, limit = None, self._timeout_log  # once per connection
            log_handshake_timeout(limit, log, timed_out, self._peer(), now)

    def _apply_backpressure(self) -> None:
        wants = self.engine.wants_input
        if not wants and not self._paused:
            self._paused = True
            self.transport.pauseProducing()
        elif wants and self._paused:
            self._paused = False
            self.transport.resumeProducing()

    # -- timers ------------------------------------------------------------------
    def _arm_timer(self, deadline: float | None, now: float) -> None:
        if deadline is None or deadline <= 0:
            self._cancel_timer()
            return
        if self._timer is not None and self._timer.active() and self._timer_at == deadline:
            return
        self._cancel_timer()
        self._timer_at = deadline
        self._timer = self.reactor.callLater(max(0.0, deadline - now), self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = None
        self.flush()

    def _cancel_timer(self) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        self._timer_at = None
