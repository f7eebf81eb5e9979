"""The parent of ``workers: N``: starts N worker processes, restarts one that dies, stops
them all on SIGTERM, and speaks to systemd for them.

Theory of operation. Each worker is ``amqp-gateway run`` with ``--worker-id`` (see
``edge.workers``), spawned with its standard input a pipe from us (its end of file tells
the worker we died) and our standard output and error (its log lines, marked with its
number, go where ours go). Its ``NOTIFY_SOCKET`` is a datagram socket of ours for that
worker, so its ordinary sd_notify calls reach us:

- ``READY=1`` from every worker (the first time) makes us ready: one ``READY=1`` to
  systemd from the main PID, which is ours (``Type=notify`` and ``NotifyAccess=main``
  hold as for a single gateway);
- ``WATCHDOG=1``: when systemd gives us a watchdog, each worker gets the same interval
  and pings us; a worker silent for a whole interval is hung, and we kill it (SIGKILL) to
  have it restarted, while our own pings to systemd say that the supervisor lives.

A worker that exits is restarted after a backoff (``forward.backoff``: 0.5 s doubling to
30 s, reset once a worker has lived ``STABLE_AFTER`` seconds), with a log line naming the
worker, its pid and how it ended. A worker that exits before it was ever ready fails the
start (its status is ours: 2 for a config or store problem, as a single gateway).

``stop`` (SIGTERM, SIGINT): STOPPING=1 to systemd, no more restarts, SIGTERM to each
worker (each drains its connections as a single gateway does, within
``shutdown_timeout``); it fires with 0 once all have exited 0, or kills the rest after
``shutdown_timeout`` plus ``STOP_GRACE`` and fires with 1.
"""
from __future__ import annotations

import logging
import os
import signal
import sys
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional, Sequence

from twisted.internet import defer, protocol, task

from gateway.edge.systemd import SystemdNotifier
from gateway.edge.workers import WorkerPlace
from gateway.forward.backoff import Backoff

log = logging.getLogger(__name__)

__all__ = ["Supervisor", "STABLE_AFTER", "STOP_GRACE", "describe_exit"]

#: a worker that lived this long before it died is restarted without the backoff so far
STABLE_AFTER = 10.0
#: seconds past ``shutdown_timeout`` that stopping workers get before SIGKILL
STOP_GRACE = 5.0
RESTART_INITIAL = 0.5
RESTART_MAXIMUM = 30.0


def describe_exit(exit_code: Optional[int], signum: Optional[int]) -> str:
    """How a process ended, as the log line says it."""
    if signum:
        try:
            return f"was killed by signal {signum} ({signal.Signals(signum).name})"
        except ValueError:
            return f"was killed by signal {signum}"
    return f"exited with status {exit_code}"


@dataclass
class _Worker:
    place: WorkerPlace
    backoff: Backoff
    process: Optional[object] = None      # the IProcessTransport while it runs
    pid: Optional[int] = None
    started_at: float = 0.0
    ready: bool = False
    last_ping: float = 0.0
    restarts: int = 0
    restart_call: Optional[object] = None
    #: fires when the running process ends
    ended: Optional[defer.Deferred] = field(default=None, repr=False)


class _WorkerProtocol(protocol.ProcessProtocol):
    def __init__(self, supervisor: "Supervisor", worker: _Worker) -> None:
        self.supervisor = supervisor
        self.worker = worker

    def processEnded(self, reason) -> None:  # noqa: N802 - Twisted API
        value = reason.value
        self.supervisor._ended(self.worker, getattr(value, "exitCode", None), getattr(value, "signal", None))


class _NotifyReceiver(protocol.DatagramProtocol):
    noisy = False

    def __init__(self, supervisor: "Supervisor", worker: _Worker) -> None:
        self.supervisor = supervisor
        self.worker = worker

    def datagramReceived(self, data: bytes, addr) -> None:  # noqa: N802 - Twisted API
        self.supervisor._notified(self.worker, data.decode("utf-8", "replace").splitlines())


class Supervisor:
    """``count`` workers, each started as ``argv_for(place)`` with ``environ`` (plus its
    notify socket). ``started`` fires once every worker is ready (or fails with
    ``WorkerStartFailed``)."""

    def __init__(self, reactor, count: int, directory: str, argv_for: Callable[[WorkerPlace], Sequence[str]],
                 notifier: SystemdNotifier, shutdown_timeout: float,
                 environ: Optional[Mapping[str, str]] = None) -> None:
        self.reactor = reactor
        self.directory = directory
        self.argv_for = argv_for
        self.notifier = notifier
        self.shutdown_timeout = shutdown_timeout
        self.environ = dict(os.environ if environ is None else environ)
        self.workers = [_Worker(WorkerPlace(n, directory), Backoff(RESTART_INITIAL, RESTART_MAXIMUM))
                        for n in range(1, count + 1)]
        self.started = defer.Deferred()
        self.stopping = False
        self._notify_ports: list = []
        self._watch: Optional[task.LoopingCall] = None

    # -- start ------------------------------------------------------------------------
    def start(self) -> defer.Deferred:
        for w in self.workers:
            path = w.place.socket_path("notify")
            if os.path.exists(path):
                os.unlink(path)
            self._notify_ports.append(self.reactor.listenUNIXDatagram(path, _NotifyReceiver(self, w)))
            self._spawn(w)
        interval = self.notifier.watchdog_interval
        if interval:
            self._watch = task.LoopingCall(self._check_pings, interval)
            self._watch.clock = self.reactor
            self._watch.start(interval / 2, now=False)
        return self.started

    def _environ(self, w: _Worker) -> dict[str, str]:
        env = {k: v for k, v in self.environ.items()
               if k not in ("WATCHDOG_PID", "WATCHDOG_USEC", "LISTEN_FDS", "LISTEN_PID")}
        env["NOTIFY_SOCKET"] = w.place.socket_path("notify")
        if self.notifier.watchdog_interval:
            env["WATCHDOG_USEC"] = str(int(self.notifier.watchdog_interval * 1_000_000))
        return env

    def _spawn(self, w: _Worker) -> None:
        w.restart_call = None
        argv = list(self.argv_for(w.place))
        w.ready = False
        w.started_at = w.last_ping = self.reactor.seconds()
        w.ended = defer.Deferred()
        w.process = self.reactor.spawnProcess(_WorkerProtocol(self, w), argv[0], argv,
                                              env=self._environ(w), childFDs={0: "w", 1: 1, 2: 2})
        w.pid = w.process.pid
        log.info("worker %d started (pid %d)", w.place.number, w.pid)

    # -- what workers tell ------------------------------------------------------------
    def _notified(self, w: _Worker, states: list[str]) -> None:
        if w.process is None:
            return
        now = self.reactor.seconds()
        if "WATCHDOG=1" in states:
            w.last_ping = now
        if "READY=1" in states and not w.ready:
            w.ready = True
            w.last_ping = now
            log.info("worker %d (pid %s) ready", w.place.number, w.pid)
            if not self.started.called and all(x.ready for x in self.workers):
                self.started.callback([x.pid for x in self.workers])

    def _check_pings(self, interval: float) -> None:
        now = self.reactor.seconds()
        for w in self.workers:
            if w.process is not None and w.ready and not self.stopping and now - w.last_ping > interval:
                log.error("worker %d (pid %s) sent no watchdog ping for %.1fs: killing it to "
                          "restart it", w.place.number, w.pid, now - w.last_ping)
                self._signal(w, "KILL")

    # -- ends and restarts -----------------------------------------------------------
    def _ended(self, w: _Worker, exit_code: Optional[int], signum: Optional[int]) -> None:
        pid, was_ready, lived = w.pid, w.ready, self.reactor.seconds() - w.started_at
        w.process, w.pid, w.ready = None, None, False
        ended, w.ended = w.ended, None
        how = describe_exit(exit_code, signum)
        if self.stopping:
            log.info("worker %d (pid %s) %s", w.place.number, pid, how)
        elif not self.started.called and not was_ready:
            log.error("worker %d (pid %s) %s before it was ready; stopping the others",
                      w.place.number, pid, how)
            self.started.errback(WorkerStartFailed(w.place.number, exit_code or 1, how))
        else:
            if lived >= STABLE_AFTER:
                w.backoff.reset()
            delay = w.backoff.next_delay()
            w.restarts += 1
            log.warning("worker %d (pid %s) %s; restarting it in %.1fs", w.place.number, pid, how, delay)
            w.restart_call = self.reactor.callLater(delay, self._spawn, w)
        if ended is not None:
            ended.callback(exit_code if not signum else 128 + signum)

    def _signal(self, w: _Worker, name: str) -> None:
        try:
            w.process.signalProcess(name)  # type: ignore[union-attr]
        except Exception:  # noqa: BLE001 - it ended meanwhile
            pass

    def reload(self) -> None:
        """SIGHUP: each worker reloads (TLS material, users) as a single gateway does."""
        for w in self.workers:
            if w.process is not None:
                self._signal(w, "HUP")

    # -- stop -------------------------------------------------------------------------
    async def stop(self) -> int:
        """Stop every worker; 0 when all exited 0 within the timeout."""
        self.stopping = True
        if self._watch is not None and self._watch.running:
            self._watch.stop()
        for w in self.workers:
            if w.restart_call is not None and w.restart_call.active():
                w.restart_call.cancel()
            w.restart_call = None
        running = [w for w in self.workers if w.process is not None]
        endings = [w.ended for w in running]
        for w in running:
            self._signal(w, "TERM")
        done = defer.gatherResults(endings, consumeErrors=True)
        timeout = self.shutdown_timeout + STOP_GRACE
        status = 0
        try:
            results = await done.addTimeout(timeout, self.reactor)
            status = 0 if all(r == 0 for r in results) else 1
        except defer.TimeoutError:
            late = [w for w in running if w.process is not None]
            log.error("worker(s) %s still running %.1fs after SIGTERM; killing them",
                      ", ".join(str(w.place.number) for w in late), timeout)
            for w in late:
                self._signal(w, "KILL")
            await defer.gatherResults([w.ended for w in late if w.ended is not None], consumeErrors=True)
            status = 1
        for port in self._notify_ports:
            port.stopListening()
        return status

    def pids(self) -> dict[int, Optional[int]]:
        return {w.place.number: w.pid for w in self.workers}

    def restarts(self) -> dict[int, int]:
        return {w.place.number: w.restarts for w in self.workers}

    def running(self) -> list[WorkerPlace]:
        return [w.place for w in self.workers if w.process is not None]


class WorkerStartFailed(Exception):
    """A worker exited before it was ever ready; ``status`` is its exit status (1 if it
    was killed), which the supervisor exits with."""

    def __init__(self, number: int, status: int, how: str) -> None:
        self.number = number
        self.status = status
        super().__init__(f"worker {number} {how} before it was ready")


def worker_argv(run_args: Sequence[str], place: WorkerPlace, ports: Sequence[int]) -> list[str]:
    """The command line of worker ``place``: ``run_args`` (the parent's own ``run ...``)
    and where the worker lives."""
    return [sys.executable, "-m", "gateway.cli", *run_args, "--worker-id", str(place.number),
            "--worker-dir", place.directory, "--worker-ports", ",".join(str(p) for p in ports)]
