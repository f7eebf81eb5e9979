"""``SqliteStore``: the embedded durable store, SQLite in WAL mode (stdlib ``sqlite3``).

Theory of operation
-------------------
Everything here runs on the event loop's thread except the commit thread
(:mod:`gateway.store.commit_thread`). A write (a message added, delivered, requeued or
removed; an exchange, queue or binding saved or deleted) appends one operation to the
*open generation* and costs a few list operations. The service arranges for
:meth:`SqliteStore.flush` to run soon after the first write of a generation (``on_pending``
is called then; the service's timer waits ``store.commit_interval``), and ``flush`` also
runs at once when a generation reaches ``batch_max`` operations. ``flush`` hands the
generation to the commit thread and opens the next one. The commit thread commits every
generation waiting when it wakes in one transaction, so under load one sync covers the
writes of many connections.

Durability tickets: :meth:`after_commit` attaches a callback to the generation holding
the latest write; when the commit thread reports that generation (through the injected
``call_in_loop``), callbacks run in generation order with ``None``, or with the
:class:`StoreWriteFailed` of a failed transaction. The protocols send a publisher confirm,
a 1.0 ``accepted`` or a ``tx.commit-ok`` only from such a callback. ``after_commit(callback,
durable=False)`` asks less: the transaction is committed (a process crash keeps it: the log
is in the operating system's cache), maybe not yet synced. With ``sync: full`` the commit
thread reports that before the sync (``on_written``) when such a callback waits, with
the transactions that failed since its last such report, so ``_written_gen`` is a
generation up to which the loop knows each outcome (``_failed``, a
:class:`~gateway.store.failed_ranges.FailedRanges`, holds each failure once, from either
report); with ``sync: normal`` a commit is reported once, unsynced, and both kinds
of callback run from that report.

Cheap cases, as RabbitMQ does them: a message removed (acked, expired) while its insert
is still in the open generation, or in a generation handed over that the commit thread has
not taken yet (``CommitThread.cancel``, under its lock), is never written at all (both
operations are cancelled in place; the generation is still committed and reported before
its confirms go out), and a delivery or requeue of such an entry only changes the pending
insert.
A message in several durable queues gets one ``messages`` row (``stored_refs``).

Failures: a failed transaction leaves the file as it was (see the commit thread); the
store then holds ``write_error`` until the commit thread's recovery checks pass (a real
write of ``probe_bytes``, twice, and the ``reserve_bytes`` space reserve made again: not
merely one commit that happened to fit), and calls ``on_alarm`` with a reason (``None``
once writes work again) so the service blocks publishers meanwhile; a store opened on a
disk with less free space than its reserve starts that way. Which entries are on disk is
known per generation (:meth:`is_durable`), so the broker never drops from memory a body
that is not in the file.
"""
from __future__ import annotations

import logging
import os
from collections import deque
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional

from gateway import timeline

from .commit_thread import DEFAULT_PROBE_BYTES, CommitThread
from .errors import StoreUnusable, StoreWriteFailed
from .failed_ranges import FailedRanges
from .interface import MessageRow, StoreCodecs, StoreSnapshot
from .sqlite_definitions import DefinitionRows
from .sqlite_entities import EntityWrites
from .sqlite_forwarding import ForwardingTables
from .sqlite_reads import StoreReads
from .sqlite_schema import SYNC_MODES, lock_store, open_reader, open_store, remove_orphans
from .space_reserve import RESERVE_SUFFIX, SpaceReserve
from .statements import Op
from .stored_refs import StoredBody, StoreRef

__all__ = ["SqliteStore", "DEFAULT_BATCH_MAX", "DEFAULT_RESERVE_BYTES"]

log = logging.getLogger(__name__)

#: operations in one generation before it is handed over without waiting for the timer
DEFAULT_BATCH_MAX = 4096
#: bytes set aside beside the store for a full disk (``space_reserve``)
DEFAULT_RESERVE_BYTES = 16 << 20

_INSERT_MESSAGE, _INSERT_ENTRY, _UPDATE_ENTRY = Op.INSERT_MESSAGE, Op.INSERT_ENTRY, Op.UPDATE_ENTRY
_DELETE_ENTRY, _DELETE_MESSAGE = Op.DELETE_ENTRY, Op.DELETE_MESSAGE


class SqliteStore:
    """See the module docstring. Raises :class:`StoreUnusable` from the constructor.

    ``call_in_loop(fn, *args)`` runs ``fn`` on the event loop's thread (the reactor's
    ``callFromThread``); ``sync`` is ``full`` or ``normal`` (``PRAGMA synchronous``);
    ``check`` is ``quick``, ``full`` or ``off`` (the integrity check at open);
    ``reserve_bytes`` the space reserve (0: none; the service's default is
    ``DEFAULT_RESERVE_BYTES``), ``probe_bytes`` what a recovery check writes and
    ``retry_interval`` the seconds between retries and checks while writes fail.
    """

    persistent = True

    def __init__(self, path: str, *, call_in_loop: Callable[..., None], codecs: StoreCodecs,
                 sync: str = "full", check: str = "quick",
                 batch_max: int = DEFAULT_BATCH_MAX, reserve_bytes: int = 0,
                 probe_bytes: int = DEFAULT_PROBE_BYTES, retry_interval: float = 1.0) -> None:
        if sync not in SYNC_MODES:
            raise ValueError(f"unknown sync mode {sync!r}")
        self.path = path
        self.sync = sync
        self._batch_max = batch_max
        self._lock_fd = lock_store(path)
        self.reserve = SpaceReserve(path + RESERVE_SUFFIX, reserve_bytes)
        # on a (nearly) full disk the reserve makes room to open the file and commit
        # deletions; the store then starts with writes failing (see below)
        short = bool(reserve_bytes) and self.reserve.short()
        if short and self.reserve.release():
            log.warning("store %s: less than %d bytes free on its disk: released the space reserve %s",
                        path, reserve_bytes, self.reserve.path)
        try:
            db = open_store(path, sync=sync, check=check)
            #: rows removed at open: entries of queues gone and messages no entry refers
            #: to (``remove_orphans``: what a crash mid-deletion leaves)
            self.removed_orphans = remove_orphans(db, path, self.reserve)
            self._reader = open_reader(path)
        except BaseException:
            os.close(self._lock_fd)
            raise
        self.write_count = 0
        self._gen = 1
        #: the generation holding the latest write (an attribute, not a property: read
        #: for every durable 1.0 transfer and 0-9-1 confirm run)
        self.latest_generation = 0
        self._ops: list[list] = []
        #: depth of ``one_commit`` blocks (no batch_max hand-over inside them)
        self._one_commit = 0
        self._done_gen = 0
        self._failed = FailedRanges()
        #: its ranges and lookup, bound once: read for every confirm run and page-out
        self._failed_ranges = self._failed.ranges
        self._failure_of = self._failed.error_of
        self._waiters: deque[tuple[int, Callable[[Optional[Exception]], None]]] = deque()
        #: ``after_commit(durable=False)`` callbacks, and the generation up to which every
        #: outcome is known from ``_written`` (with ``sync: full`` only)
        self._written_waiters: deque[tuple[int, Callable[[Optional[Exception]], None]]] = deque()
        self._written_gen = 0
        #: the failure that raised the alarm, until writes work again
        self.write_error: Optional[StoreWriteFailed] = None
        #: called with no arguments when a generation gets its first write (the service
        #: schedules ``flush``); ``on_commit()`` after each commit report; ``on_alarm(reason
        #: or None)`` when writes start or stop failing
        self.on_pending: Optional[Callable[[], None]] = None
        self.on_commit: Optional[Callable[[], None]] = None
        self.on_alarm: Optional[Callable[[Optional[str]], None]] = None
        #: called with no arguments before a commit report runs its callbacks (the
        #: confirms and settlements it allows): the service hands the ledger's records to
        #: its writer process there, so that what was acknowledged is recorded
        self.before_confirming: Optional[Callable[[], None]] = None
        #: the durable exchanges, queues and bindings; their ``Store`` operations are its
        #: methods, bound here (as the definitions' and the forwarding tables' below)
        self._entities = entities = EntityWrites(self._append, lambda: self._gen)
        self.save_exchange, self.delete_exchange = entities.save_exchange, entities.delete_exchange
        self.save_queue, self.delete_queue = entities.save_queue, entities.delete_queue
        self.save_binding, self.delete_binding = entities.save_binding, entities.delete_binding
        #: messages (rows) and their body bytes held by the store
        self.messages_stored = 0
        self.bytes_stored = 0
        #: the outbox and the forwarded ids (``sqlite_forwarding``); their ``Store``
        #: operations are its methods, bound here
        self.forwarding = ForwardingTables(self._append, lambda: self._gen, self._reader, codecs)
        forwarding = self.forwarding
        self.add_outbox, self.update_outbox = forwarding.add_outbox, forwarding.update_outbox
        self.remove_outbox, self.load_outbox = forwarding.remove_outbox, forwarding.load_outbox
        self.read_outbox, self.remove_outbox_many = forwarding.read_outbox, forwarding.remove_outbox_many
        self.remember_forwarded = forwarding.remember_forwarded
        self.forget_forwarded = forwarding.forget_forwarded
        self.load_forwarded = forwarding.load_forwarded
        definitions = DefinitionRows(self._append, self._reader, path)
        self.save_definition, self.delete_definition = definitions.save, definitions.delete
        self.load_definitions = definitions.load
        #: the snapshot at start and the page-in reads; ``read_messages`` is its method
        self._reads = StoreReads(self._reader, codecs)
        self.read_messages = self._reads.read_messages
        self._closed = False
        if short or (reserve_bytes and not self.reserve.make()):
            self.write_error = StoreWriteFailed(
                f"store write failed: less than {reserve_bytes} bytes free on the disk of {path} "
                f"(the space reserve, store.disk_reserve): new messages are refused until space is freed",
                full=True)
            log.warning("%s", self.write_error)
        self._thread = CommitThread(db, call_in_loop=call_in_loop, on_done=self._committed,
                                    encode_table=codecs.encode_table,
                                    encode_annotations=codecs.encode_annotations,
                                    synced=sync == "full", on_recovered=self._recovered,
                                    reserve=self.reserve if reserve_bytes else None,
                                    probe_bytes=probe_bytes, retry_interval=retry_interval,
                                    failing=self.write_error, wal_path=path + "-wal",
                                    on_written=self._written, wants_written=self._wants_written)
        #: whether a commit is reported before its sync (``after_commit(durable=False)``)
        self._reports_written = self._thread.wal_sync is not None

    @property
    def outbox_rows(self) -> int:
        """Outbox rows in the store (``ForwardingTables.outbox_rows``)."""
        return self.forwarding.outbox_rows

    @property
    def commit_thread(self) -> CommitThread:
        """The commit thread; its ``execute`` (the statement runner) and ``connection``
        are the seams of tests' and operators' fault probes (a failed or slow commit)."""
        return self._thread

    @property
    def failed_ranges(self) -> tuple[tuple[int, int], ...]:
        """The ``(first, last)`` generation ranges known to have failed (for tests and
        diagnostics; see ``FailedRanges``)."""
        return tuple((low, high) for low, high, _ in self._failed.ranges)

    @property
    def wal_sync(self) -> Any:
        """The commit thread's sync stage (``WalSync``, ``sync: full``), or None; tests
        slow its ``sync_file`` down."""
        return self._thread.wal_sync

    @property
    def stats(self) -> Any:
        """The commit thread's counters (``gateway.store.commit_thread.CommitStats``)."""
        return self._thread.stats

    def file_size(self) -> int:
        """Bytes on disk: the database file and its write-ahead log."""
        total = 0
        for suffix in ("", "-wal"):
            try:
                total += os.path.getsize(self.path + suffix)
            except OSError:
                pass
        return total

    # ------------------------------------------------------------------ generations
    def _append(self, *new: list) -> None:
        """Add operations to the open generation (a message's two rows in one call: this
        runs for every durable publish and ack)."""
        ops = self._ops
        first = not ops
        ops += new
        self.write_count += len(new)
        if first:
            self.latest_generation = self._gen
            if self.on_pending is not None:
                self.on_pending()
        elif len(ops) >= self._batch_max and not self._one_commit:
            self.flush()

    @property
    def open_writes(self) -> int:
        """Writes in the open generation, not handed to the commit thread yet: ``batch_max``
        hands them over, except inside ``one_commit``."""
        return len(self._ops)

    @contextmanager
    def one_commit(self) -> Iterator[None]:
        """Writes made within it are not split by ``batch_max`` (see ``Store.one_commit``):
        the generation is handed over at its end if it grew past the limit."""
        self._one_commit += 1
        try:
            yield
        finally:
            self._one_commit -= 1
            if not self._one_commit and len(self._ops) >= self._batch_max:
                self.flush()

    def flush(self, now: float = 0.0) -> None:
        """Hand the open generation to the commit thread (nothing to do when empty)."""
        if not self._ops or self._closed:
            return
        ops, self._ops = self._ops, []
        gen = self._gen
        self._gen = gen + 1
        self._thread.submit(gen, ops)
        marks = timeline.recorder
        if marks is not None:
            marks.mark("submit", len(ops))

    def after_commit(self, callback: Callable[[Optional[Exception]], None], durable: bool = True) -> None:
        """Run ``callback(error)`` once every write made so far is committed and synced
        (``None``; ``durable=False``: committed) or its transaction failed (the
        ``StoreWriteFailed``; with ``durable``, also a failed sync)."""
        gen = self.latest_generation
        if gen <= self._done_gen or (not durable and gen <= self._written_gen):
            callback(self._failure_of(gen))
            return
        if durable or not self._reports_written:
            self._waiters.append((gen, callback))
        else:
            self._written_waiters.append((gen, callback))

    def _wants_written(self, generation: int) -> bool:
        """Whether a ``durable=False`` callback waits for ``generation`` or an older one
        (asked by the commit thread: a deque's item is read atomically)."""
        try:
            return self._written_waiters[0][0] <= generation
        except IndexError:
            return False

    def _written(self, gen: int, failures: list[tuple[int, int, StoreWriteFailed]]) -> None:
        """The commit thread's report that generations up to ``gen`` are committed, not
        yet synced, but the ranges of ``failures`` (on the event loop's thread, before
        their ``_committed``)."""
        marks = timeline.recorder
        if marks is not None:
            marks.mark("written", gen)
        if failures:
            floor = self._floor()
            for low, high, error in failures:
                self._failed.record(low, high, error, floor)
        if gen > self._written_gen:
            self._written_gen = gen
        self._run(self._written_waiters, gen)

    def _run(self, waiters: deque, gen: int) -> None:
        """Run the callbacks of ``waiters`` (in generation order) up to generation ``gen``,
        each with its generation's outcome."""
        while waiters and waiters[0][0] <= gen:
            waiter_gen, callback = waiters.popleft()
            try:
                callback(self._failure_of(waiter_gen))
            except Exception:  # noqa: BLE001 - one protocol's bug must not stop the rest
                log.exception("store commit callback failed")

    def is_committed(self, generation: int) -> bool:
        return generation <= self._done_gen and (not self._failed_ranges
                                                 or self._failure_of(generation) is None)

    def _floor(self) -> int:
        """The lowest generation whose outcome a callback may still be given."""
        floor = self.latest_generation
        for waiters in (self._waiters, self._written_waiters):
            if waiters and waiters[0][0] < floor:
                floor = waiters[0][0]
        return floor

    def _committed(self, gen: int, error: Optional[StoreWriteFailed]) -> None:
        """The commit thread's report (on the event loop's thread)."""
        marks = timeline.recorder
        if marks is not None:
            marks.mark("reported", gen)
        if error is not None:
            if gen > self._done_gen:
                self._failed.record(self._done_gen + 1, gen, error, self._floor())
            first = self.write_error is None
            self.write_error = error
            if first and self.on_alarm is not None:
                self.on_alarm(str(error))
        else:
            self._entities.committed(gen)
        if gen > self._done_gen:
            self._done_gen = gen
        if self._written_waiters:  # not reported before the sync (nobody waited then)
            self._run(self._written_waiters, gen)
        waiters = self._waiters
        if waiters and waiters[0][0] <= gen and self.before_confirming is not None:
            self.before_confirming()
        self._run(waiters, gen)
        if self.on_commit is not None:
            self.on_commit()

    def _recovered(self) -> None:
        """The commit thread's report that a failing period ended (see its docstring)."""
        if self.write_error is None:
            return
        log.warning("store writes work again")
        self.write_error = None
        if self.on_alarm is not None:
            self.on_alarm(None)

    def is_durable(self, ref: StoreRef) -> bool:
        """True once the entry's insert, its latest update and its message row are all
        in committed, successful transactions."""
        done = self._done_gen
        body = ref.body
        if ref.gen > done or body.gen > done:
            return False
        return not self._failed_ranges or not self._failed.any_of(ref.first_gen, ref.gen, body.gen)

    def paged_out(self, ref: StoreRef) -> None:
        """The entry's writes are on disk (``is_durable``): its statement lists, kept for
        a later update in the same generation, are no longer needed."""
        ref.op = ref.body.op = None

    # ------------------------------------------------------------------ messages
    def add_message(self, queue_key: int, seq: int, expires_at: Optional[float],
                    delivery_count: int, redelivered: bool, body: Optional[StoredBody],
                    row: Optional[MessageRow]) -> StoreRef:
        gen = self._gen
        new_body: Optional[list] = None
        if body is None:
            assert row is not None
            new_body = [_INSERT_MESSAGE, *row]
            body = StoredBody(row.message_id, row.size, gen, new_body)
            self.messages_stored += 1
            self.bytes_stored += row.size
        body.refs += 1
        op = [_INSERT_ENTRY, queue_key, seq, body.message_id, expires_at, delivery_count,
              int(redelivered), 0, None]
        ref = StoreRef(body, gen, op, False)
        if new_body is None:
            self._append(op)
        else:
            self._append(new_body, op)
        return ref

    def update_message(self, queue_key: int, seq: int, ref: StoreRef, delivery_count: int,
                       redelivered: bool, acquired: bool, annotations: Optional[dict]) -> None:
        """Record the entry's delivery state (and its 1.0 ``modified`` annotations)."""
        ref.acquired = acquired
        op = ref.op
        if ref.gen == self._gen and op:
            if op[0] is _INSERT_ENTRY:
                op[5:9] = delivery_count, int(redelivered), int(acquired), annotations
                return
            if op[0] is _UPDATE_ENTRY:
                op[3:7] = delivery_count, int(redelivered), int(acquired), annotations
                return
        op = [_UPDATE_ENTRY, queue_key, seq, delivery_count, int(redelivered), int(acquired),
              annotations]
        ref.op = op
        ref.gen = self._gen
        self._append(op)

    def remove_message(self, queue_key: int, seq: int, ref: StoreRef) -> None:
        gen = self._gen
        op = ref.op
        delete_entry: Optional[list] = None
        if not (op and self._cancel(ref.gen, op, _INSERT_ENTRY)):  # else never written
            converted = False
            if op and op[0] is _UPDATE_ENTRY:
                # an update of the row not written yet (the delivery of an entry written
                # before) becomes its deletion, in the update's generation: one row
                # operation, not two (the deletion is durable no later than before)
                if ref.gen == gen:
                    op[0] = _DELETE_ENTRY
                    converted = True
                else:
                    thread = self._thread
                    converted = ref.gen > thread.taken_gen and thread.cancel(
                        ref.gen, op, _UPDATE_ENTRY, _DELETE_ENTRY)
            if not converted:
                delete_entry = [_DELETE_ENTRY, queue_key, seq]
                ref.gen = gen
        ref.op = None
        body = ref.body
        body.refs -= 1
        delete_body: Optional[list] = None
        if body.refs == 0:
            self.messages_stored -= 1
            self.bytes_stored -= body.size
            if not (body.op and self._cancel(body.gen, body.op, _INSERT_MESSAGE)):
                delete_body = [_DELETE_MESSAGE, body.message_id]
            body.op = None
        if delete_entry is not None:
            if delete_body is not None:
                self._append(delete_entry, delete_body)
            else:
                self._append(delete_entry)
        elif delete_body is not None:
            self._append(delete_body)

    def _cancel(self, gen: int, op: list, kind: Op) -> bool:
        """Cancel the insert ``op`` (of ``kind``, made in generation ``gen``) of a row
        removed before it was written: in the open generation, or in one handed over that
        the commit thread has not taken yet (RabbitMQ skips the write of a message acked
        before it is written too). The generation's commit still comes before any confirm
        of the publishes in it; True if cancelled."""
        if gen == self._gen:
            if op[0] is not kind:
                return False
            op[0] = None
            return True
        thread = self._thread
        return gen > thread.taken_gen and thread.cancel(gen, op, kind)

    # ------------------------------------------------------------------ start and stop
    def load(self) -> StoreSnapshot:
        """Everything durable, committed. Remembers what it loaded, so the broker's
        re-declarations at restore write nothing. Raises :class:`StoreUnusable` on a read
        error or a value that cannot be decoded (a damaged file)."""
        try:
            snapshot, self.messages_stored, self.bytes_stored = self._reads.snapshot(self._entities)
            return snapshot
        except StoreUnusable:
            raise
        except Exception as exc:  # noqa: BLE001 - sqlite3 or codec errors: name the file
            raise StoreUnusable(self.path, f"cannot read it: {type(exc).__name__}: {exc}") from None

    def close(self, timeout: float = 10.0) -> None:
        """Commit what is buffered, stop the commit thread, close the file (idempotent).
        Callbacks still waiting are dropped: the connections they answer are gone."""
        if self._closed:
            return
        self.flush()
        self._closed = True
        if not self._thread.stop(timeout):
            log.error("store commit thread did not finish within %.1fs", timeout)
        self._waiters.clear()
        self._written_waiters.clear()
        try:
            self._reader.close()
            self._thread.close()
        finally:
            os.close(self._lock_fd)
