"""The second stage of a group commit: syncing the write-ahead log, in threads of its own,
while the commit thread already runs the next transaction.

Theory of operation
-------------------
With ``store.sync: full`` a commit is not reported until its transaction is on disk. SQLite's
``PRAGMA synchronous=FULL`` syncs the WAL inside ``COMMIT``, so the commit thread could
start the next group only once the sync (6-8 ms on this machine's disk) was over. Instead
the commit thread's connection runs with ``synchronous=NORMAL`` (in WAL mode: no sync at
``COMMIT``; the log is still synced before every checkpoint copies it into the database,
and the database after) and hands each committed generation here. A syncer thread takes every
generation waiting, syncs the log file once (``os.fdatasync``), and only then reports them
(``report(generation, error, submitted)``, in the order they were committed): every frame
a committed transaction wrote is in the file before the sync starts, so one sync covers
all of them, and the commit thread builds and commits the next group meanwhile.

What it keeps: a generation is reported durable exactly when ``synchronous=FULL`` would
have reported it (its transaction is committed and the log holding it synced); a failed
transaction is reported in its place in the order. A failed sync is reported as a write
failure for the generations it was to cover (their rows may be in the file: a publisher
then sees a refusal for a message a restart restores, a duplicate at worst, never a loss).

Syncs overlap: ``SYNC_THREADS`` threads each take every generation waiting when they
are free, so a generation committed while a sync runs starts its own sync at once
instead of waiting for that one to end (measured on this machine's disk: two
``fdatasync`` calls at a time on one file each take about as long as one alone, so two
syncers nearly double the syncs a second; in a D1 run a committed generation waited
3.5 ms on average for the sync before it to end, against a 4.7 ms sync of its own). Each
sync covers what was committed before it started, and the results are reported in the
order the syncs took their generations (a sync that ends early waits for the one
before it), so reports stay in commit order (consecutive generations with one outcome
as a single report of the last: one wake of the event loop, not one per commit) and a failed sync fails exactly the
generations it took: never reported durable through a later sync, since after a failed
``fdatasync`` the kernel may have marked the unwritten pages clean.

The log file is found by name and opened once, at the first sync, and kept: SQLite deletes
the log only when the last connection to the database closes, and the store's write
connection stays open as long as this object lives, so the file keeps its inode. (It
used to be looked up again before each sync: a system call under the lock that the
commit thread's hand-over waits for, and one more wait for the interpreter lock per
sync on a busy event loop.)
"""
from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Callable, Optional

from gateway import timeline

from .errors import StoreWriteFailed, write_failed

__all__ = ["WalSync", "SYNC_THREADS"]

log = logging.getLogger(__name__)

#: ``report(generation, error, submitted times)``
Report = Callable[[int, Optional[StoreWriteFailed], list[float]], None]
#: (generation, error, submitted, needs a sync), as the commit thread hands them over
Handed = tuple[int, Optional[StoreWriteFailed], list[float], bool]

#: syncs that may run at once
SYNC_THREADS = 2


class WalSync:
    """See the module docstring. ``stats``: the commit thread's ``CommitStats`` (the
    syncers count the syncs and their time there); ``sync_file(fd)`` is ``os.fdatasync``
    (tests inject a slower one, here or by setting the attribute)."""

    def __init__(self, wal_path: str, report: Report, stats: Any,
                 sync_file: Callable[[int], None] = os.fdatasync, threads: int = SYNC_THREADS) -> None:
        self.path = wal_path
        self._report = report
        self._stats = stats
        self.sync_file = sync_file
        self._cond = threading.Condition()
        #: handed over, not yet taken by a syncer, in commit order
        self._waiting: list[Handed] = []
        self._stopping = False
        self._fd: Optional[int] = None
        #: tickets: the order in which syncers took their generations, and the next to report
        self._next_ticket = 0
        self._next_report = 0
        #: ticket -> (what that syncer took, its sync's error), for syncs that ended early
        self._finished: dict[int, tuple[list[Handed], Optional[StoreWriteFailed]]] = {}
        self._running = 0
        #: started with the first generation put (see ``CommitThread``: a process that
        #: never had a second thread locks its mutexes without atomic instructions)
        self._threads = [threading.Thread(target=self._run, name=f"store-sync-{n}", daemon=True)
                         for n in range(threads)]
        self._started = False

    @property
    def syncing(self) -> bool:
        """Whether a sync is running now (for tests)."""
        return self._running > 0

    @property
    def running(self) -> int:
        """How many syncs are running now (for tests: a sync that ended has handed its
        generations over in the same step that stopped counting it)."""
        return self._running

    @property
    def handover_lock(self) -> threading.Condition:
        """The lock a syncer takes every generation waiting under: generations put while
        it is held are taken by one syncer together, as when commits come faster than
        syncs end (a test holds it to make that happen at will)."""
        return self._cond

    def put(self, generation: int, error: Optional[StoreWriteFailed], submitted: list[float],
            needs_sync: bool) -> None:
        """A generation the commit thread is done with: committed (``needs_sync``), or
        failed, or committed with nothing written (no sync needed). Called from the commit
        thread only."""
        if not self._started:
            self._started = True
            for thread in self._threads:
                thread.start()
        with self._cond:
            self._waiting.append((generation, error, submitted, needs_sync))
            self._cond.notify()

    def stop(self, timeout: float) -> bool:
        """Sync and report what was put, then end; False if that took longer."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        deadline = time.monotonic() + timeout
        for thread in self._threads if self._started else ():
            thread.join(max(0.0, deadline - time.monotonic()))
        if any(thread.is_alive() for thread in self._threads):
            return False
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        return True

    def _run(self) -> None:
        cond = self._cond
        while True:
            with cond:
                while not self._waiting and not self._stopping:
                    cond.wait()
                if not self._waiting:
                    return
                taken, self._waiting = self._waiting, []
                ticket = self._next_ticket
                self._next_ticket += 1
                fd: Optional[int] = None
                error: Optional[StoreWriteFailed] = None
                if any(needs for *_, needs in taken):
                    try:
                        fd = self._opened()
                    except OSError as exc:
                        error = self._sync_failed(exc)
                    else:
                        self._running += 1
            if fd is not None:
                error = self._sync(fd)
            with cond:
                if fd is not None:
                    self._running -= 1
                self._finished[ticket] = (taken, error)
                self._report_finished()

    def _report_finished(self) -> None:
        """Report the finished syncs' generations in ticket order (under the lock), a run
        of generations with the same outcome as one report of its last: a report says
        "everything up to this generation", and each one is a wake of the event loop."""
        finished = self._finished
        run: Optional[tuple[int, Optional[StoreWriteFailed], list[float]]] = None
        while self._next_report in finished:
            taken, error = finished.pop(self._next_report)
            self._next_report += 1
            for generation, failed, submitted, needs in taken:
                outcome = failed or (error if needs else None)
                if run is not None and run[1] is not outcome:
                    self._report(*run)
                    run = None
                run = (generation, outcome, run[2] + submitted if run is not None else submitted)
        if run is not None:
            marks = timeline.recorder
            if marks is not None:
                marks.mark("synced", len(run[2]))
            self._report(*run)

    def _sync(self, fd: int) -> Optional[StoreWriteFailed]:
        marks = timeline.recorder
        if marks is not None:
            marks.mark("sync-start")
        started = time.monotonic()
        try:
            self.sync_file(fd)
        except OSError as exc:
            return self._sync_failed(exc)
        seconds = time.monotonic() - started
        if marks is not None:
            marks.mark("sync-end")
        with self._cond:
            self._stats.synced(seconds)
        return None

    def _sync_failed(self, exc: OSError) -> StoreWriteFailed:
        log.error("store: syncing the write-ahead log %s failed: %s", self.path, exc)
        return write_failed(exc)

    def _opened(self) -> int:
        """The log's descriptor (under the lock), opened at the first sync."""
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDONLY)
        return self._fd
