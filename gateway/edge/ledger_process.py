"""The ledger under Twisted: ship the records a slice at a time, to the writer
process (spawned, fed, stopped and restarted here) or to a ``LedgerWriter`` in this
process.

``LedgerShipping`` takes the ``Ledger``'s records every ``SHIP_INTERVAL`` (and on the
next turn when the ledger wakes it: forwarding's records) and encodes them (msgpack
frames for the writer process, which makes the JSON Lines: ``Ledger.take_frame``; JSON
Lines for a writer in this process) ``SLICE`` at a time (a backlog half of it at a time:
``BACKLOG_SHIFT``), one slice per turn of the
reactor (the next slice waits for the next turn, behind whatever I/O is ready): no turn
does much, so deliveries are not
held up behind the ledger (at 5,000 msgs/s a tenth of a second's records took the loop
a quarter of a millisecond to marshal at once, the ledger-on p99's excess).

``LedgerProcess`` writes the frames to the child's stdin without ever blocking the
reactor and relays what the child logs. Twisted buffers a write the pipe cannot take at
once and pauses us (we are the pipe's push producer) until the child has read it; frames
that arrive meanwhile wait here, up to ``max_pending_bytes``, beyond which the oldest
are dropped and counted (a writer that cannot keep up must not grow the gateway's memory
without bound). A child that dies is restarted after ``restart_delay`` (it recovers the
segment it left open); what it had been sent and not acknowledged as written (the child
acknowledges the lines it wrote after each flush, on its stdout) is lost: ``on_gap(count,
since, now)`` is called with that count and the time of the last acknowledgement (the
service records a ``gap``, counts it and raises an alert). A new child, or one that
missed frames, is sent the open contexts first. A frame's header counts its records,
which are the lines the child acknowledges. ``stop`` sends the rest, closes the pipe,
and waits for the child to write it and exit.
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
import sys
import time
from collections import deque
from typing import Any, Callable, Optional

from twisted.internet import defer, protocol, task
from twisted.internet.interfaces import IPushProducer
from zope.interface import implementer

import gateway
from gateway.ledger import Ledger
from gateway.ledger.encoding import frame_count

__all__ = ["BACKLOG_SHIFT", "SHIP_INTERVAL", "SLICE", "LedgerProcess", "LedgerShipping"]

log = logging.getLogger(__name__)

DEFAULT_MAX_PENDING_BYTES = 256 * 1024 * 1024
#: capacity asked for the pipe to the child (Linux caps it at /proc/sys/fs/pipe-max-size)
PIPE_CAPACITY = 1 << 20
RESTART_DELAY = 1.0
#: seconds between shipments
SHIP_INTERVAL = 0.02
#: records encoded in one turn of the reactor (about 35 us of msgspec)
SLICE = 256
#: a backlog (more than ``2 * SLICE`` records pending: a load the turns of one shipment
#: cannot keep up with) is shipped ``1 / 2 ** BACKLOG_SHIFT`` of it a turn. Why a half and
#: not an eighth: an unpaced 1.0 -> 1.0 run (W4 100 B, ~5,000 records every 20 ms) took
#: about 22 turns a shipment with an eighth and 6 with a half; the gateway's CPU per message
#: was 0.3-0.4 us lower (12.40 -> 12.02 us, medians of 6 alternating rounds at load 3-5) and
#: its pipe writes per message 0.0104 -> 0.0048. A paced load (the F rows: 5,000 msgs/s,
#: some 300 records a shipment) ships SLICE and the rest, as before.
BACKLOG_SHIFT = 1
_SOURCE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(gateway.__file__)))


class LedgerShipping:
    """Every ``interval`` seconds, ``ledger``'s records to ``sink`` (bytes of whole
    lines), ``slice`` records a reactor turn."""

    def __init__(self, reactor: Any, ledger: Ledger, sink: Callable[[bytes], None], *,
                 interval: float = SHIP_INTERVAL, slice: int = SLICE,
                 take: Optional[Callable[[int], bytes]] = None) -> None:
        self.reactor = reactor
        self.ledger = ledger
        self.sink = sink
        #: the ledger's records, encoded for ``sink``: JSON Lines unless told otherwise
        self.take = ledger.take_lines if take is None else take
        self.slice = slice
        self._loop = task.LoopingCall(self.ship)
        self._loop.clock = reactor
        self._interval = interval
        self._next: Optional[Any] = None

    @property
    def running(self) -> bool:
        return self._loop.running

    def start(self) -> None:
        self._loop.start(self._interval, now=False)
        self.ledger.wake = self.ship_soon

    def stop(self) -> None:
        """Stop the timer and ship everything left at once (the gateway is stopping)."""
        self.ledger.wake = None
        if self._loop.running:
            self._loop.stop()
        if self._next is not None and self._next.active():
            self._next.cancel()
        while self.ledger.pending:
            self.ship_slice()

    def ship(self) -> None:
        """One slice now, the rest on the next turns."""
        if self._next is not None and self._next.active():
            return  # slices of the last shipment are still going
        self._next = None
        try:
            self.ship_slice()
        except Exception:  # noqa: BLE001 - a timer must never stop the reactor
            log.exception("ledger shipment failed")
        if self.ledger.pending:
            self._next = self.reactor.callLater(0, self.ship)

    def ship_soon(self) -> None:
        """The ledger's ``wake``: ship on the next turn, not an interval later, records
        that must reach the writer before what they record is settled (a forwarded
        message's, so that a gateway killed just after does not leave the other
        gateway's ledger alone with it: a false loss in the reconciliation)."""
        if self._loop.running and (self._next is None or not self._next.active()):
            self._next = self.reactor.callLater(0, self.ship)

    def ship_all(self) -> None:
        """Everything recorded so far, now: called before the store's confirms and
        settlements go out, so that what the gateway acknowledged is in the writer's hands
        when it could be killed (a received record shipped on a later turn died with the
        gateway, and the reconciliation called a message that arrived lost)."""
        if not self._loop.running:
            return
        try:
            while self.ledger.pending:
                self.ship_slice()
        except Exception:  # noqa: BLE001 - the confirms must go out whatever the ledger does
            log.exception("ledger shipment failed")

    def ship_slice(self) -> None:
        data = self.take(max(self.slice, self.ledger.pending >> BACKLOG_SHIFT))
        if data:
            self.sink(data)


@implementer(IPushProducer)
class LedgerProcess(protocol.ProcessProtocol):
    """``settings`` are ``LedgerWriter``'s keyword arguments plus ``directory`` and
    ``flush_interval`` (the child's: 0 writes every line at once)."""

    def __init__(self, reactor: Any, ledger: Ledger, settings: dict[str, Any], *,
                 max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
                 restart_delay: float = RESTART_DELAY,
                 on_gap: Optional[Callable[[int, float, float], None]] = None) -> None:
        self.reactor = reactor
        self.ledger = ledger
        self.settings = dict(settings, acknowledge=True)
        self.on_gap = on_gap
        self.max_pending_bytes = max_pending_bytes
        self.restart_delay = restart_delay
        self.shipping = LedgerShipping(reactor, ledger, self.send, take=ledger.take_frame)
        self._pending: deque[bytes] = deque()
        self._pending_bytes = 0
        #: the child lacks the open contexts (new, or lines were dropped): send them first
        self._replay = True
        self._paused = False
        self._running = False
        self._stopping: Optional[defer.Deferred] = None
        self._ended: Optional[defer.Deferred] = None
        self._restart = None
        #: bytes the pipe to the child holds (after ``widen_pipe``), 0 before it started
        self.pipe_capacity = 0
        self._stderr = b""
        self._stdout = b""
        self.chunks_dropped = 0
        self.restarts = 0
        #: lines handed to the current child, and those it acknowledged as written
        self._sent = self._written = 0
        #: when the current child last acknowledged (or started)
        self._written_at = 0.0
        #: children that died with lines unwritten, and those lines
        self.gaps = self.records_lost = 0
        #: lines handed to any child since start
        self.records_sent = 0

    # -- what it holds (read only: for the operator's and the tests' view) -----------
    @property
    def running(self) -> bool:
        """A child is connected and may be written to (from its start to its end)."""
        return self._running

    @property
    def lines_sent(self) -> int:
        """Lines handed to the current child: with ``lines_written``, what its death now
        would lose (the gap recorded)."""
        return self._sent

    @property
    def lines_written(self) -> int:
        """Lines the current child acknowledged as written."""
        return self._written

    @property
    def pending_bytes(self) -> int:
        """Bytes of frames waiting for the child: at most ``max_pending_bytes`` (or one
        frame larger), the oldest dropped beyond."""
        return self._pending_bytes

    @property
    def pending_frames(self) -> int:
        """Frames waiting for the child."""
        return len(self._pending)

    @property
    def replay_due(self) -> bool:
        """The child is sent the open contexts (and shapes) before the next frame: it is
        new, or frames were dropped, and rows of a shape it never saw would not read."""
        return self._replay

    # -- life cycle -----------------------------------------------------------------
    def start(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_SOURCE_ROOT, env.get("PYTHONPATH")) if p)
        argv = [sys.executable, "-m", "gateway.ledger.writer_process", json.dumps(self.settings)]
        self._ended = defer.Deferred()
        self._paused = False
        self._replay = True  # a new child knows only what it is sent from now on
        self._sent = self._written = 0
        self._written_at = self.reactor.seconds()
        self.reactor.spawnProcess(self, sys.executable, argv, env=env,
                                  childFDs={0: "w", 1: "r", 2: "r"})
        if not self.shipping.running:
            self.shipping.start()

    def connectionMade(self) -> None:
        self._running = True
        self.pipe_capacity = widen_pipe(self.transport.pipes[0].fileno(), PIPE_CAPACITY)
        self.transport.registerProducer(self, True)
        log.info("ledger writer process %s started (%s)", self.transport.pid,
                 self.settings.get("directory"))
        self._drain()

    def stop(self, timeout: float) -> defer.Deferred:
        """The rest of the lines, then end of input; fires when the child exited (or was
        killed after ``timeout`` seconds)."""
        if self._stopping is None:
            self._stopping = defer.ensureDeferred(self._stop(timeout))
        return self._stopping

    async def _stop(self, timeout: float) -> None:
        if self._restart is not None and self._restart.active():
            self._restart.cancel()
            self._restart = None
            self.start()  # the last lines still have to be written
        self.shipping.stop()
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

    # -- lines ----------------------------------------------------------------------
    def send(self, data: bytes) -> None:
        """Queue ``data`` (``Ledger.take_frame``: a frame, after one of the shapes it
        declares) for the child."""
        self._pending.append(data)
        self._pending_bytes += len(data)
        while self._pending_bytes > self.max_pending_bytes and len(self._pending) > 1:
            dropped = self._pending.popleft()
            self._pending_bytes -= len(dropped)
            self.chunks_dropped += 1
            self._replay = True
            log.error("ledger writer process cannot keep up: %d pending bytes; dropped %d "
                      "bytes of records (%d chunks dropped so far)", self._pending_bytes,
                      len(dropped), self.chunks_dropped)
        if self._running and not self._paused:
            self._drain()

    def _drain(self) -> None:
        while self._pending and self._running and not self._paused:
            if self._replay:
                self._replay = False
                self._write(self.ledger.context_frame())
                continue
            data = self._pending.popleft()
            self._pending_bytes -= len(data)
            self._write(data)  # may pause us at once

    def _write(self, data: bytes) -> None:
        lines = frame_count(data)
        self._sent += lines
        self.records_sent += lines
        self.transport.write(data)

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
        """The child's acknowledgements: lines written so far, one count a line."""
        self._stdout += data
        *lines, self._stdout = self._stdout.split(b"\n")
        for line in reversed(lines):
            if line.strip().isdigit():
                self._written = int(line)
                self._written_at = self.reactor.seconds()
                break

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
        lost = max(0, self._sent - self._written)
        log.error("ledger writer process exited unexpectedly (status %s); restarting in %.1fs; "
                  "%d record(s) it had not acknowledged as written since %s are lost", code,
                  self.restart_delay, lost, _utc(self._written_at))
        self.gaps += 1
        self.records_lost += lost
        if self.on_gap is not None:
            self.on_gap(lost, self._written_at, self.reactor.seconds())
        if ended is not None:
            ended.callback(None)
        self._restart = self.reactor.callLater(self.restart_delay, self._restarted)

    def _restarted(self) -> None:
        self._restart = None
        self.start()


def _utc(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{int(seconds % 1 * 1000):03d}Z"


def widen_pipe(fd: int, capacity: int) -> int:
    """Ask for ``capacity`` bytes of pipe buffer; returns what the pipe has.

    Why: at full load a second's lines are megabytes, and through Linux's default 64 KiB
    pipe they took many writes, each waking the child. Best effort: another kernel, or a
    lower pipe-max-size, leaves the pipe as it is.
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
