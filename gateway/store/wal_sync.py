"""The second stage of a group commit: syncing the write-ahead log, in a thread of its own,
while the commit thread already runs the next transaction.

Theory of operation
-------------------
With ``store.sync: full`` a commit is not reported until its transaction is on disk. SQLite's
``PRAGMA synchronous=FULL`` syncs the WAL inside ``COMMIT``, so the commit thread could
start the next group only once the sync (6-8 ms on this machine's disk) was over. Instead
the commit thread's connection runs with ``synchronous=NORMAL`` (in WAL mode: no sync at
``COMMIT``; the log is still synced before every checkpoint copies it into the database,
and the database after) and hands each committed generation here. This thread takes every
generation waiting, syncs the log file once (``os.fdatasync``), and only then reports them
(``report(generation, error, submitted)``, in the order they were committed): every frame
a committed transaction wrote is in the file before the sync starts, so one sync covers
all of them, and the commit thread builds and commits the next group meanwhile.

What it keeps: a generation is reported durable exactly when ``synchronous=FULL`` would
have reported it (its transaction is committed and the log holding it synced); a failed
transaction is reported in its place in the order. A failed sync is reported as a write
failure for the generations it was to cover (their rows may be in the file: a publisher
then sees a refusal for a message a restart restores, a duplicate at worst, never a loss).

The log file is found by name and opened once; its inode is checked at each sync, so a
log SQLite deleted and made again (when the last connection closed) is opened again
rather than syncing the old one.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Callable, Optional

from .errors import StoreWriteFailed, write_failed

__all__ = ["WalSync"]

log = logging.getLogger(__name__)

#: ``report(generation, error, submitted times)``
Report = Callable[[int, Optional[StoreWriteFailed], list[float]], None]


class WalSync:
    """See the module docstring. ``stats``: the commit thread's ``CommitStats`` (this
    thread counts the syncs and their time there); ``sync_file(fd)`` is ``os.fdatasync``
    (tests inject a slower one)."""

    def __init__(self, wal_path: str, report: Report, stats: Any,
                 sync_file: Callable[[int], None] = os.fdatasync) -> None:
        self.path = wal_path
        self._report = report
        self._stats = stats
        self._sync_file = sync_file
        self._cond = threading.Condition()
        #: (generation, error, submitted, needs a sync), in commit order
        self._waiting: list[tuple[int, Optional[StoreWriteFailed], list[float], bool]] = []
        self._stopping = False
        self._fd: Optional[int] = None
        self._inode: Optional[int] = None
        #: whether a sync is running now (for tests and the timeline)
        self.syncing = False
        self._thread = threading.Thread(target=self._run, name="store-sync", daemon=True)
        self._thread.start()

    def put(self, generation: int, error: Optional[StoreWriteFailed], submitted: list[float],
            needs_sync: bool) -> None:
        """A generation the commit thread is done with: committed (``needs_sync``), or
        failed, or committed with nothing written (no sync needed)."""
        with self._cond:
            self._waiting.append((generation, error, submitted, needs_sync))
            self._cond.notify()

    def stop(self, timeout: float) -> bool:
        """Sync and report what was put, then end; False if that took longer."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._waiting and not self._stopping:
                    self._cond.wait()
                taken, self._waiting = self._waiting, []
                if not taken and self._stopping:
                    break
            error = self._sync() if any(needs for *_, needs in taken) else None
            for generation, failed, submitted, needs in taken:
                self._report(generation, failed or (error if needs else None), submitted)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _sync(self) -> Optional[StoreWriteFailed]:
        started = time.monotonic()
        self.syncing = True
        try:
            self._sync_file(self._opened())
        except OSError as exc:
            log.error("store: syncing the write-ahead log %s failed: %s", self.path, exc)
            return write_failed(exc)
        finally:
            self.syncing = False
        self._stats.synced(time.monotonic() - started)
        return None

    def _opened(self) -> int:
        """The log's descriptor, opened again when the file by that name is another one."""
        inode = os.stat(self.path).st_ino
        if self._fd is None or inode != self._inode:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            self._fd = os.open(self.path, os.O_RDONLY)
            self._inode = os.fstat(self._fd).st_ino
        return self._fd
