"""The ledger writer process under Twisted: spawn it, feed it batches, stop it, restart it.

``LedgerFeed`` (sans-I/O) turns the buffered events into a frame every ``SHIP_INTERVAL``
(the child writes them once per flush interval: see ``ledger.writer_process``); this
class writes the frames to the child's stdin without ever blocking the reactor and
relays what the child logs. Twisted buffers a write the pipe cannot take at once and
pauses us (we are the pipe's push producer) until the child has read it; frames that
arrive meanwhile wait here, up to ``max_pending_bytes``, beyond which the oldest are
dropped and counted (a writer that cannot keep up must not grow the gateway's memory
without bound).

A child that dies is restarted after ``restart_delay`` (it recovers the segment it left
open); what it had read but not yet written is lost and logged. ``stop`` sends the last
batch, closes the pipe, and waits for the child to write it and exit.
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
import sys
from collections import deque
from typing import Any, Optional

from twisted.internet import defer, protocol
from twisted.internet.interfaces import IPushProducer
from zope.interface import implementer

import gateway
from gateway.ledger.feed import LedgerFeed

__all__ = ["SHIP_INTERVAL", "LedgerProcess"]

log = logging.getLogger(__name__)

DEFAULT_MAX_PENDING_BYTES = 256 * 1024 * 1024
#: capacity asked for the pipe to the child (Linux caps it at /proc/sys/fs/pipe-max-size)
PIPE_CAPACITY = 1 << 20
RESTART_DELAY = 1.0
#: seconds between frames (at most; the flush interval when shorter). Small frames are
#: cheapest for the event loop: the rows are still in the CPU's caches when marshalled,
#: and a frame needs no megabytes of fresh memory (W3 100B on 2 cores, frames every
#: 0.1 s against every 1 s: gateway system time per message 0.55 against 0.96 us).
SHIP_INTERVAL = 0.1
_SOURCE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(gateway.__file__)))


@implementer(IPushProducer)
class LedgerProcess(protocol.ProcessProtocol):
    """``settings`` are ``LedgerWriter``'s keyword arguments plus ``directory`` and
    ``flush_interval`` (the child's: 0 writes every frame at once)."""

    def __init__(self, reactor: Any, feed: LedgerFeed, settings: dict[str, Any], *,
                 max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
                 restart_delay: float = RESTART_DELAY) -> None:
        self.reactor = reactor
        self.feed = feed
        self.settings = settings
        self.max_pending_bytes = max_pending_bytes
        self.restart_delay = restart_delay
        self._pending: deque[bytes] = deque()
        self._pending_bytes = 0
        self._paused = False
        self._running = False
        self._stopping: Optional[defer.Deferred] = None
        self._ended: Optional[defer.Deferred] = None
        self._restart = None
        #: bytes the pipe to the child holds (after ``_widen_pipe``), 0 before it started
        self.pipe_capacity = 0
        self._stderr = b""
        self.frames_dropped = 0
        self.restarts = 0

    # -- life cycle -----------------------------------------------------------------
    def start(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_SOURCE_ROOT, env.get("PYTHONPATH")) if p)
        argv = [sys.executable, "-m", "gateway.ledger.writer_process", json.dumps(self.settings)]
        self._ended = defer.Deferred()
        self._paused = False
        self.feed.forget_taken()  # a new child knows only what it is sent from now on
        self.reactor.spawnProcess(self, sys.executable, argv, env=env,
                                  childFDs={0: "w", 1: "r", 2: "r"})

    def connectionMade(self) -> None:
        self._running = True
        self.pipe_capacity = _widen_pipe(self.transport.pipes[0].fileno(), PIPE_CAPACITY)
        self.transport.registerProducer(self, True)
        log.info("ledger writer process %s started (%s)", self.transport.pid,
                 self.settings.get("directory"))
        self._drain()

    def flush(self) -> None:
        """Ship what the hot path buffered since the last flush (the flush timer's job)."""
        self._queue(self.feed.take_frame(self.reactor.seconds()))

    def stop(self, timeout: float) -> defer.Deferred:
        """The last batch, then end of input; fires when the child exited (or was killed
        after ``timeout`` seconds)."""
        if self._stopping is not None:
            return self._stopping
        self._stopping = defer.ensureDeferred(self._stop(timeout))
        return self._stopping

    async def _stop(self, timeout: float) -> None:
        if self._restart is not None and self._restart.active():
            self._restart.cancel()
            self._restart = None
            self.start()  # the last batch still has to be written
        self.flush()
        ended = self._ended
        if ended is None:
            return
        if self._running and not self._paused:
            self._drain()
        self._close_when_drained()
        timer = self.reactor.callLater(timeout, self._kill)
        try:
            await ended
        finally:
            if timer.active():
                timer.cancel()

    def _close_when_drained(self) -> None:
        if not self._running:
            return
        if self._pending:
            self.reactor.callLater(0.05, self._close_when_drained)
            return
        self.transport.closeStdin()  # Twisted writes what it buffered, then closes

    def _kill(self) -> None:
        if self._running:
            log.error("ledger writer process did not finish within the shutdown timeout; killing it")
            try:
                self.transport.signalProcess("KILL")
            except Exception:  # noqa: BLE001 - already gone
                pass

    # -- frames ---------------------------------------------------------------------
    def _queue(self, frame: bytes) -> None:
        self._pending.append(frame)
        self._pending_bytes += len(frame)
        while self._pending_bytes > self.max_pending_bytes and len(self._pending) > 1:
            dropped = self._pending.popleft()
            self._pending_bytes -= len(dropped)
            self.frames_dropped += 1
            self.feed.forget_taken()
            log.error("ledger writer process cannot keep up: %d pending bytes; dropped a batch "
                      "of %d bytes (%d dropped so far)", self._pending_bytes, len(dropped),
                      self.frames_dropped)
        if self._running and not self._paused:
            self._drain()

    def _drain(self) -> None:
        while self._pending and self._running and not self._paused:
            frame = self._pending.popleft()
            self._pending_bytes -= len(frame)
            self.transport.write(frame)  # may pause us at once

    # IPushProducer: the stdin pipe's buffer is full / has room again
    def pauseProducing(self) -> None:
        self._paused = True

    def resumeProducing(self) -> None:
        self._paused = False
        self._drain()

    def stopProducing(self) -> None:
        self._running = False

    # -- the child's output and exit ---------------------------------------------------
    def errReceived(self, data: bytes) -> None:
        self._stderr += data
        *lines, self._stderr = self._stderr.split(b"\n")
        for line in lines:
            if line.strip():
                log.warning("ledger writer: %s", line.decode("utf-8", "replace"))

    def outReceived(self, data: bytes) -> None:
        pass

    def processEnded(self, reason: Any) -> None:
        self._running = False
        code = getattr(reason.value, "exitCode", None)
        ended, self._ended = self._ended, None
        if self._stopping is not None:
            if code not in (0, None):
                log.error("ledger writer process exited with status %s", code)
            if ended is not None:
                ended.callback(None)
            return
        self.restarts += 1
        log.error("ledger writer process exited unexpectedly (status %s); restarting in %.1fs; "
                  "events it had not yet written are lost", code, self.restart_delay)
        if ended is not None:
            ended.callback(None)
        self._restart = self.reactor.callLater(self.restart_delay, self._restarted)

    def _restarted(self) -> None:
        self._restart = None
        self.start()


def _widen_pipe(fd: int, capacity: int) -> int:
    """Ask for ``capacity`` bytes of pipe buffer; returns what the pipe has.

    Why: a second's batch is megabytes, and through Linux's default 64 KiB pipe it took a
    hundred writes, each waking the child, which measurably cost the event loop (about
    0.6 us per message at 45k msgs/s, 3% of a message's cost). Best effort: another
    kernel, or a lower pipe-max-size, leaves the pipe as it is.
    """
    setter = getattr(fcntl, "F_SETPIPE_SZ", None)
    getter = getattr(fcntl, "F_GETPIPE_SZ", None)
    if setter is None or getter is None:
        return 0
    try:
        fcntl.fcntl(fd, setter, capacity)
    except OSError:
        try:
            with open("/proc/sys/fs/pipe-max-size") as f:
                fcntl.fcntl(fd, setter, min(capacity, int(f.read())))
        except (OSError, ValueError):
            pass
    try:
        return fcntl.fcntl(fd, getter)
    except OSError:
        return 0
