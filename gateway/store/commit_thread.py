"""The commit thread: runs batches of store writes in SQLite transactions, off the event loop.

Theory of operation
-------------------
The event loop's side (:class:`~gateway.store.sqlite.SqliteStore`) collects write
operations into *generations* and hands each one over with :meth:`CommitThread.submit`.
This thread takes every generation waiting when it wakes, runs them all in one
transaction and commits it, so one sync covers writes from every connection (group
commit: the busier the disk, the larger the batches). Then it reports through
``call_in_loop(on_done, generation, error)`` (the service passes the reactor's
``callFromThread``), and the event loop learns that everything up to ``generation`` is on
disk, or that it is not. With ``store.sync: full`` the sync is a second stage
(:mod:`gateway.store.wal_sync`): this thread commits without syncing and hands the
generation to ``WalSync``, whose syncer threads sync the write-ahead log and only then
report it, while this thread already runs the next group. The hand-over is where
"committed" is known: when the event loop waits for it (``wants_written(generation)``,
a forwarder's outbox rows: sent once committed, not once synced), this thread also reports
``call_in_loop(on_written, generation, failures)``: everything up to ``generation`` is
committed but the ``(first, last, error)`` generation ranges of ``failures``, the failed
transactions since the last such report (so the loop knows the outcome of every generation
up to the latest it was told of). One wake of the loop per commit group at most, and none
when nobody waits (the sync's report follows as before). Until this thread takes a
generation, the event loop may still cancel its inserts (:meth:`CommitThread.cancel`: a
message acked before it was written).

Operations are lists ``[kind, ...fields]`` (``statements.Op``); ``statements.Statements``
turns them into SQL. A cancelled operation has kind ``None``. After running an operation
the thread clears its list, so a cancelled or written operation no longer holds a message
body.

A failed transaction (disk full, read-only file system, I/O error) is rolled back, which
SQLite guarantees leaves the file as it was: nothing half-written. The generation is
reported with a :class:`StoreWriteFailed`; its message inserts are dropped (their
publishers are told the message was not stored) and every other operation (deletions,
updates, entity changes) is kept and retried first in the next transaction, or after
``retry_interval`` seconds if none comes, so a later success brings the file in line
with memory again.

The first failure starts a *failing* period (the service raises the store alarm, which
blocks publishers), and only a recovery check ends it (issue 41: a one-page probe used
to end it, publishers came back, their first batch failed again: 6 blocks and 5 unblocks
in a minute on a full disk). While failing:

- new message inserts (and outbox rows, forwarded ids) are refused without being tried:
  their generation is reported failed, the rest of the transaction (acknowledgements,
  deletions, entity changes) is committed. Room that deletions free is not eaten by the
  publishes still in flight;
- a commit that failed for lack of space deletes the space reserve (``space_reserve``),
  so the write-ahead log can grow and deletions commit on a full disk, after a restart
  too; the kept operations are retried at once;
- every ``retry_interval`` seconds a recovery check runs: a probe writes ``probe_bytes``
  of real pages (a row of ``messages`` with id ``PROBE_ID``, committed and checkpointed
  into the file, then deleted, which leaves its pages free in the file for the next
  messages), then the reserve is made again (the disk must have that room, and
  ``probe_bytes`` more, so that it is not taken back from the deletions at once). The
  period ends after ``RECOVERY_PASSES`` checks in a row pass (``on_recovered`` is
  reported); a period that starts again soon after one ended doubles the interval, up to
  ``MAX_RETRY_INTERVAL``.
"""
from __future__ import annotations

import logging
import os
import queue
import sqlite3
import threading
import time
from typing import Callable, Optional

from gateway import timeline

from .commit_stats import LATENCY_BUCKETS, CommitStats
from .errors import StoreWriteFailed, write_failed
from .space_reserve import SpaceReserve
from .statements import INSERTS, KEPT_ON_FAILURE, Codec, Op, Statements
from .wal_sync import WalSync

__all__ = ["CommitThread", "CommitStats", "LATENCY_BUCKETS", "PROBE_ID", "DEFAULT_PROBE_BYTES"]

log = logging.getLogger(__name__)


#: the longest wait between recovery checks of a store whose writes keep failing (seconds)
MAX_RETRY_INTERVAL = 30.0
#: recovery checks in a row that must pass before a failing period ends
RECOVERY_PASSES = 2
#: the ``messages`` row the recovery probe writes (real message ids are positive)
PROBE_ID = -1
#: bytes the recovery probe writes: a batch of messages, not one page
DEFAULT_PROBE_BYTES = 1 << 20

#: generations ``first..last`` whose transaction failed, and why
Failure = tuple[int, int, StoreWriteFailed]
#: failed transactions kept for the next ``on_written`` report; that many are reported
#: even when nobody waits (a long failing period does not grow the list without end)
_FAILURES_HELD = 64


class CommitThread:
    """See the module docstring. ``encode_table`` turns argument tables and x-death lists
    into bytes, ``encode_annotations`` 1.0 annotation maps (both may raise; the value is
    then stored as NULL and a warning logged). ``synced``: whether a commit syncs (for the
    ``syncs`` counter). ``on_recovered()`` is called (through ``call_in_loop``) when a
    failing period ends; ``reserve`` is the space reserve (None: none); ``failing`` starts
    the thread in a failing period (the store opened on a full disk). ``on_written`` and
    ``wants_written``: the "committed, not yet synced" report (module docstring), with the
    ``WalSync`` stage only (without it a commit is reported at once anyway)."""

    def __init__(self, db: sqlite3.Connection, *, call_in_loop: Callable[..., None],
                 on_done: Callable[[int, Optional[StoreWriteFailed]], None],
                 encode_table: Codec, encode_annotations: Codec, synced: bool = True,
                 retry_interval: float = 1.0, max_operations: int = 100_000,
                 on_recovered: Callable[[], None] = lambda: None,
                 reserve: Optional[SpaceReserve] = None,
                 probe_bytes: int = DEFAULT_PROBE_BYTES,
                 failing: Optional[StoreWriteFailed] = None,
                 wal_path: Optional[str] = None,
                 sync_file: Callable[[int], None] = os.fdatasync,
                 on_written: Optional[Callable[[int, list[Failure]], None]] = None,
                 wants_written: Callable[[int], bool] = lambda generation: False) -> None:
        self._db = db
        self._call_in_loop = call_in_loop
        self._on_done = on_done
        self._on_written = on_written
        self._wants_written = wants_written
        #: failed transactions not yet in an ``on_written`` report (at most ``_FAILURES_HELD``)
        self._failures: list[Failure] = []
        self._on_recovered = on_recovered
        self._synced = synced
        self._retry_interval = retry_interval
        self._max_operations = max_operations
        self._reserve = reserve
        self._probe_bytes = probe_bytes
        #: generations handed over (``None``: wake up, see ``stop``). A C queue: the event
        #: loop's ``submit`` is one call that wakes a waiting thread, where a
        #: ``Condition``'s notify ran a few Python calls under its lock, and the woken
        #: thread then waited for that lock (measured: 1.4 -> 0.7 us a submit)
        self._inbox: queue.SimpleQueue[Optional[tuple[int, list, float]]] = queue.SimpleQueue()
        #: generations taken from the inbox, not yet committed (this thread's only)
        self._waiting: list[tuple[int, list, float]] = []
        #: held while ``cancel`` looks at ``taken_gen`` and marks an operation, and while
        #: this thread moves ``taken_gen`` on: a cancel never marks a taken generation
        self._take_lock = threading.Lock()
        self._kept: list[list] = []
        #: the failure that started the failing period (None: writes work)
        self._failing: Optional[StoreWriteFailed] = failing
        self._passes = 0  # recovery checks passed in a row
        #: when kept operations are retried and the next recovery check runs
        self._next_attempt = time.monotonic() + retry_interval
        self._recovered_at: Optional[float] = None
        self._retry_base = retry_interval
        self._last_gen = 0
        #: the latest generation this thread has taken (its operations may be running);
        #: only grows, so an older one read without the lock is surely taken
        self.taken_gen = 0
        self._stopping = False
        self.stats = CommitStats()
        #: the statement runner each transaction calls, ``execute(operations) -> written``
        #: (the operations not cancelled). A seam for tests and operators' fault probes:
        #: a wrapper that raises fails the transaction (rolled back, as a disk error
        #: would be), one that waits makes a slow commit. It runs on this thread.
        self.execute: Callable[[list[list]], int] = Statements(db, encode_table, encode_annotations).run
        #: with ``wal_path`` (``store.sync: full``), commits sync nothing themselves: the
        #: ``WalSync`` thread syncs the log and reports, while this one runs the next group
        self._wal: Optional[WalSync] = None
        if wal_path is not None and synced:
            db.execute("PRAGMA synchronous=NORMAL")
            self._wal = WalSync(wal_path, self._report, self.stats, sync_file)
        # Started when first needed (a generation submitted, a failing period to check): a
        # gateway whose traffic never touches the store stays a process of one thread, and
        # glibc skips the atomic instructions of every mutex lock and unlock only in a
        # process that never had a second thread. Those are the interpreter lock's, taken
        # and dropped around every proton call (measured on W4 100 B: gateway CPU 13.6 ->
        # 12.6 us a message with the three idle store threads gone).
        self._thread = threading.Thread(target=self._run, name="store-commit", daemon=True)
        self._started = False
        if failing is not None:
            self._start()

    @property
    def connection(self) -> sqlite3.Connection:
        """The write connection, for tests and fault probes while the thread is idle (a
        trace callback, a page limit); never for writes of the event loop."""
        return self._db

    @property
    def wal_sync(self) -> Optional[WalSync]:
        """The sync stage (``store.sync: full``), or None."""
        return self._wal

    # ------------------------------------------------------------------ event-loop side
    def submit(self, generation: int, operations: list[list]) -> None:
        """Queue a generation (the caller no longer touches these operation lists)."""
        if not self._started:
            self._start()
        self._inbox.put((generation, operations, time.monotonic()))

    def _start(self) -> None:
        self._started = True
        self._thread.start()

    def cancel(self, generation: int, op: list, kind: Op, becomes: Optional[Op] = None) -> bool:
        """Cancel ``op``, an operation of ``kind`` in the submitted ``generation``, if this
        thread has not taken that generation yet (False: it may be running or written,
        the caller undoes it with a later operation); with ``becomes``, it is made an
        operation of that kind on the same row instead (its fields after the kind are
        the row's key first). The generation is still committed and reported in its
        turn."""
        with self._take_lock:
            if generation <= self.taken_gen or not op or op[0] is not kind:
                return False
            op[0] = becomes
            return True

    def stop(self, timeout: float = 10.0) -> bool:
        """Commit what was submitted, then end the thread; False if it did not end in time."""
        self._stopping = True
        if not self._started:  # nothing was submitted, nothing is kept
            return self._wal is None or self._wal.stop(timeout)
        self._inbox.put(None)
        self._thread.join(timeout)
        if self._thread.is_alive():
            return False
        return self._wal is None or self._wal.stop(timeout)

    def close(self) -> None:
        """Close the write connection (after :meth:`stop`)."""
        self._db.close()

    # ------------------------------------------------------------------ the thread
    def _run(self) -> None:
        inbox = self._inbox
        while True:
            if not self._waiting and not self._stopping:
                if not self._kept and self._failing is None:
                    self._received(inbox.get())
                else:  # retry what a failed transaction kept, check for recovery, when due
                    delay = self._next_attempt - time.monotonic()
                    if delay > 0:
                        try:
                            self._received(inbox.get(timeout=delay))
                        except queue.Empty:
                            pass
            # read before the inbox is emptied: what was submitted before ``stop`` is in it
            stop_asked = self._stopping
            while not inbox.empty():
                self._received(inbox.get_nowait())
            taken = self._take_waiting()
            stopping = stop_asked and not self._waiting
            due = time.monotonic() >= self._next_attempt
            if taken or (self._kept and (due or stopping)):
                self._commit(taken)
            if self._failing is not None and not stopping and time.monotonic() >= self._next_attempt:
                self._check_recovery()
            if stopping and not taken:
                return

    def _received(self, item: Optional[tuple[int, list, float]]) -> None:
        if item is not None:
            self._waiting.append(item)

    def _take_waiting(self) -> list[tuple[int, list, float]]:
        """Waiting generations up to ``max_operations`` operations (at least one)."""
        waiting = self._waiting
        count = 0
        n = 0
        while n < len(waiting):
            count += len(waiting[n][1])
            n += 1
            if count >= self._max_operations:
                break
        taken, self._waiting = waiting[:n], waiting[n:]
        if taken:
            with self._take_lock:
                self.taken_gen = taken[-1][0]
        return taken

    def _commit(self, taken: list[tuple[int, list, float]]) -> None:
        operations = self._kept
        for _, ops, _ in taken:
            operations = operations + ops if operations else ops
        generation = taken[-1][0] if taken else self._last_gen
        refused = self._refuse_inserts(operations) if self._failing is not None else 0
        marks = timeline.recorder
        if marks is not None:
            marks.mark("commit-start", len(operations))
        error = self._transaction(operations)
        submitted: list[float] = []
        if error is None:
            self._kept = []
            self.stats.batch(self._synced and self._wal is None)
            submitted = [at for _, _, at in taken]
            for op in operations:
                op.clear()  # the event loop may still hold the list; not its body
            if refused:
                failing = self._failing
                assert failing is not None
                error = StoreWriteFailed(f"{failing}; new messages are refused until store writes "
                                         f"work again", full=failing.full)
        else:
            self._kept = [op for op in operations if op and op[0] in KEPT_ON_FAILURE]
            self._failed(error, len(operations))
        self._last_gen = generation
        if marks is not None:
            marks.mark("commit-done", len(operations))
        self._done(generation, error, submitted, bool(operations), taken[0][0] if taken else 0)

    def _done(self, generation: int, error: Optional[StoreWriteFailed], submitted: list[float],
              wrote: bool, first: int = 0) -> None:
        """Generations ``first..generation`` are committed (or failed; ``first`` 0: no new
        one, kept operations only): reported now, or, with the ``WalSync`` stage, once the
        log sync after them is done (in commit order either way), and reported committed
        now if the loop waits for that (see the module docstring)."""
        wal = self._wal
        if wal is not None:
            if first and self._on_written is not None:
                failures = self._failures
                if error is not None:
                    failures.append((first, generation, error))
                if self._wants_written(generation) or len(failures) >= _FAILURES_HELD:
                    self._failures = []
                    self._call_in_loop(self._on_written, generation, failures)
            wal.put(generation, error, submitted, error is None and wrote)
        else:
            self._report(generation, error, submitted)

    def _report(self, generation: int, error: Optional[StoreWriteFailed],
                submitted: list[float]) -> None:
        """Everything up to ``generation`` is on disk (or failed): tell the event loop
        (from this thread, or from the ``WalSync`` thread once the log is synced)."""
        done = time.monotonic()
        for at in submitted:
            self.stats.observe(done - at)
        self._call_in_loop(self._on_done, generation, error)

    def _refuse_inserts(self, operations: list[list]) -> int:
        """While writes fail: drop the live inserts of ``operations`` (their generation is
        reported failed); returns how many."""
        refused = 0
        for op in operations:
            if op and op[0] in INSERTS:
                op.clear()
                refused += 1
        if refused:
            log.debug("store writes fail: %d insert(s) refused", refused)
        return refused

    def _transaction(self, operations: list[list], probe: bool = False) -> Optional[StoreWriteFailed]:
        """Run ``operations`` in one transaction, with ``probe`` also the probe (see
        ``_check_recovery``); the error if it failed (rolled back)."""
        db = self._db
        try:
            started = time.monotonic()
            db.execute("BEGIN IMMEDIATE")
            written = self.execute(operations)
            if probe:
                db.execute("INSERT OR REPLACE INTO messages (id, origin, body, exchange, routing_key, "
                           "created_at, size) VALUES (?, 'probe', zeroblob(?), '', '', 0, 0)",
                           (PROBE_ID, self._probe_bytes))
            executed = time.monotonic()
            db.execute("COMMIT")
            if probe:
                # the log's pages must reach the file too (the file grows there), then
                # the row goes and leaves its pages free for the next messages
                db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                db.execute("DELETE FROM messages WHERE id = ?", (PROBE_ID,))
        except Exception as exc:  # noqa: BLE001 - sqlite3.Error, OSError, or a bug: never kill the thread
            if not isinstance(exc, (sqlite3.Error, OSError)):
                log.exception("store transaction failed unexpectedly")
            try:
                if db.in_transaction:
                    db.execute("ROLLBACK")
            except sqlite3.Error:
                log.exception("store rollback failed")
            return write_failed(exc)
        if self._wal is None:
            self.stats.transaction(written, executed - started, time.monotonic() - executed)
        else:  # the sync is the WalSync thread's (and its time)
            self.stats.transaction(written, time.monotonic() - started, 0.0)
        return None

    def _failed(self, error: StoreWriteFailed, operations: int) -> None:
        """A transaction failed: start (or go on with) the failing period."""
        now = time.monotonic()
        self.stats.failed(error)
        self._passes = 0
        first = self._failing is None
        if first:
            self._failing = error
            recent = self._recovered_at is not None and now - self._recovered_at < 2 * self._retry_interval
            self._retry_interval = (min(self._retry_interval * 2, MAX_RETRY_INTERVAL) if recent
                                    else self._retry_base)
            log.error("store write failed, %d operation(s) rolled back (%d kept for a retry); new "
                      "messages are refused until writes work again: %s", operations, len(self._kept), error)
        else:
            log.debug("store write failed again, %d operation(s) rolled back (%d kept): %s",
                      operations, len(self._kept), error)
        self._next_attempt = now + self._retry_interval
        if error.full and self._reserve is not None and self._reserve.release():
            log.warning("store: no space left; released the %d bytes set aside in %s so that "
                        "acknowledgements and deletions can still be committed", self._reserve.size,
                        self._reserve.path)
            self._next_attempt = now  # retry the kept operations in the space just freed

    def _check_recovery(self) -> None:
        """One recovery check (see the module docstring): the probe (with any kept
        operations), then the space reserve; ends the failing period after
        ``RECOVERY_PASSES`` passes in a row."""
        self._next_attempt = time.monotonic() + self._retry_interval
        operations = self._kept
        error = self._transaction(operations, probe=True)
        if error is not None:
            self._passes = 0
            self._kept = [op for op in operations if op and op[0] in KEPT_ON_FAILURE]
            log.debug("store recovery check failed: %s", error)
            return
        self._kept = []
        if operations:  # kept operations went with the probe: report their generation
            self._done(self._last_gen, None, [], True)
        reserve = self._reserve
        if reserve is not None and not reserve.make(margin=self._probe_bytes):
            self._passes = 0
            log.debug("store recovery check: no room for the %d-byte space reserve", reserve.size)
            return
        self._passes += 1
        if self._passes >= RECOVERY_PASSES:
            self._failing = None
            self._passes = 0
            self._recovered_at = time.monotonic()
            self._call_in_loop(self._on_recovered)
