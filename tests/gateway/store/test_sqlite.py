"""SqliteStore: generations, group commit, durability callbacks, cancellation, load,
failures and the checks at open (sans-I/O: the commit thread reports into a list that the
test runs, as the reactor would)."""
from __future__ import annotations

import ast
import os
import sqlite3
import threading
import time
from contextlib import contextmanager
from typing import Iterator

import pytest

from gateway.store import BindingRecord, ExchangeRecord, MessageRow, QueueRecord, StoreCodecs
from gateway.store.errors import StoreUnusable, StoreWriteFailed
from gateway.store.failed_ranges import HELD
from gateway.store.sqlite import SqliteStore
from gateway.store.sqlite_schema import SCHEMA_VERSION
from tests.support.store_loop import ManualLoop

CODECS = StoreCodecs(
    encode_table=lambda v: repr(v).encode(),
    decode_table=lambda b: ast.literal_eval(b.decode()),
    encode_annotations=lambda v: repr(v).encode(),
    decode_annotations=lambda b: ast.literal_eval(b.decode()),
)


@pytest.fixture
def path(tmp_path) -> str:
    return str(tmp_path / "store.db")


def open_store(path: str, loop: ManualLoop, **kw) -> SqliteStore:
    return SqliteStore(path, call_in_loop=loop.call_in_loop, codecs=CODECS, **kw)


def row(mid: int, body: bytes = b"body", **kw) -> MessageRow:
    fields = dict(message_id=mid, origin="amqp091", properties=b"\x90\x00", body=body,
                  exchange="x", routing_key="k", created_at=1.5, size=len(body), priority=None,
                  deaths=None)
    fields.update(kw)
    return MessageRow(**fields)


def commit(store: SqliteStore, loop: ManualLoop) -> None:
    """Flush and wait for the report (what the service's timer and reactor do)."""
    done: list = []
    store.after_commit(done.append)
    store.flush()
    loop.run_until(lambda: done)
    assert done == [None]


def test_entities_and_messages_survive_reopening(path, loop) -> None:
    store = open_store(path, loop)
    store.save_exchange(ExchangeRecord("/", "orders", "topic", arguments={"alternate-exchange": "ae"}))
    qid = store.save_queue(QueueRecord("/", "q", arguments={"x-max-length": 10}))
    store.save_binding(BindingRecord("/", "orders", "queue", "q", "a.#"))
    ref1 = store.add_message(qid, 1, None, 0, False, None, row(10, b"one"))
    ref2 = store.add_message(qid, 2, 99.5, 2, True, None, row(11, b"two", priority=7, deaths=[{"queue": "q"}]))
    commit(store, loop)
    store.update_message(qid, 1, ref1, 1, True, True, {"x-opt-a": 1})
    commit(store, loop)
    assert store.is_durable(ref1) and store.is_durable(ref2)
    store.close()

    again = open_store(path, loop)
    snap = again.load()
    assert snap.exchanges == (ExchangeRecord("/", "orders", "topic", arguments={"alternate-exchange": "ae"}),)
    assert [(q.name, q.arguments, q.key) for q in snap.queues] == [("q", {"x-max-length": 10}, qid)]
    assert snap.bindings == (BindingRecord("/", "orders", "queue", "q", "a.#"),)
    entries = snap.entries[("/", "q")]
    assert [(e.seq, e.message_id, e.expires_at, e.delivery_count, e.redelivered, e.acquired, e.size,
             e.priority) for e in entries] == [(1, 10, None, 1, True, True, 3, None),
                                               (2, 11, 99.5, 2, True, False, 3, 7)]
    read = again.read_messages(qid, [1, 2])
    assert read[1].row == row(10, b"one") and read[1].annotations == {"x-opt-a": 1}
    assert read[2].row.deaths == [{"queue": "q"}] and read[2].annotations is None
    assert again.messages_stored == 2 and again.bytes_stored == 6
    # the broker re-declares what it loaded: nothing is written
    count = again.write_count
    again.save_exchange(snap.exchanges[0])
    assert again.save_queue(snap.queues[0]) == qid
    again.save_binding(snap.bindings[0])
    assert again.write_count == count
    again.close()


def test_a_message_in_two_queues_is_one_row_until_both_remove_it(path, loop) -> None:
    store = open_store(path, loop)
    qa = store.save_queue(QueueRecord("/", "a"))
    qb = store.save_queue(QueueRecord("/", "b"))
    ra = store.add_message(qa, 1, None, 0, False, None, row(7, b"x" * 100))
    rb = store.add_message(qb, 1, None, 0, False, ra.body, None)
    assert ra.body is rb.body and ra.body.refs == 2
    commit(store, loop)
    db = sqlite3.connect(path)
    assert db.execute("SELECT count(*) FROM messages").fetchone() == (1,)
    assert db.execute("SELECT count(*) FROM queue_messages").fetchone() == (2,)
    store.remove_message(qa, 1, ra)
    commit(store, loop)
    assert db.execute("SELECT count(*) FROM messages").fetchone() == (1,)
    store.remove_message(qb, 1, rb)
    commit(store, loop)
    assert db.execute("SELECT count(*) FROM messages").fetchone() == (0,)
    assert db.execute("SELECT count(*) FROM queue_messages").fetchone() == (0,)
    assert store.messages_stored == 0 and store.bytes_stored == 0
    store.close()


def test_removed_before_commit_is_never_written(path, loop) -> None:
    store = open_store(path, loop)
    qid = store.save_queue(QueueRecord("/", "q"))
    commit(store, loop)
    ref = store.add_message(qid, 1, None, 0, False, None, row(1))
    store.update_message(qid, 1, ref, 0, False, True, None)  # delivered: changes the insert
    store.remove_message(qid, 1, ref)  # acked in the same generation
    ops_before = store.stats.operations
    commit(store, loop)
    assert store.stats.operations == ops_before  # both inserts cancelled: nothing written
    assert sqlite3.connect(path).execute("SELECT count(*) FROM messages").fetchone() == (0,)
    store.close()


def test_before_confirming_runs_once_before_the_callbacks_a_commit_allows(path, loop) -> None:
    """The service hands the ledger's records to their writer there, so that a confirm
    never goes out for a message whose received record is still only in memory."""
    store = open_store(path, loop)
    seen: list[str] = []
    store.before_confirming = lambda: seen.append("ledger")
    qid = store.save_queue(QueueRecord("/", "q"))
    store.add_message(qid, 1, None, 0, False, None, row(1))
    store.after_commit(lambda error: seen.append("confirm 1"))
    store.add_message(qid, 2, None, 0, False, None, row(2))
    store.after_commit(lambda error: seen.append("confirm 2"))
    commit(store, loop)  # its own callback comes after the two
    assert seen == ["ledger", "confirm 1", "confirm 2"]
    store.save_queue(QueueRecord("/", "q2"))
    store.flush()
    loop.run_until(lambda: store.is_committed(store.latest_generation))
    assert seen == ["ledger", "confirm 1", "confirm 2"]  # a commit that allows no callback
    store.close()


def holding(store: SqliteStore) -> tuple[threading.Event, threading.Event]:
    """Hold the store's commit thread inside its next transaction: (the event set once
    it is there, the event releasing it)."""
    running, release = threading.Event(), threading.Event()
    real_execute = store.commit_thread.execute

    def held(ops):
        running.set()
        release.wait(10)
        return real_execute(ops)

    store.commit_thread.execute = held
    return running, release


def writing_message_1(path: str, loop: ManualLoop) -> tuple[SqliteStore, int, object, threading.Event]:
    """A store with queue ``q`` whose commit thread is held inside the transaction that
    writes message 1: (store, queue key, message 1's reference, the event releasing it)."""
    store = open_store(path, loop)
    qid = store.save_queue(QueueRecord("/", "q"))
    commit(store, loop)
    running, release = holding(store)
    ref = store.add_message(qid, 1, None, 0, False, None, row(1))
    store.flush()
    if not running.wait(10):
        release.set()
        raise AssertionError("the commit thread did not start the transaction")
    return store, qid, ref, release


def test_removed_after_hand_over_but_before_the_commit_thread_takes_it_is_never_written(path, loop) -> None:
    """A message acked while its generation waits for the commit thread (busy with the
    one before) is never written, nor deleted: both inserts are cancelled, and the
    generation is still committed and reported before its callbacks run (issue 45)."""
    store, qid, first, release = writing_message_1(path, loop)
    try:
        ref = store.add_message(qid, 2, None, 0, False, None, row(2))
        done: list = []
        store.after_commit(done.append)
        store.flush()  # this generation waits: the commit thread is busy
        handed = store.latest_generation
        ops_before = store.stats.operations
        store.remove_message(qid, 2, ref)  # acked before it was taken
        assert store.latest_generation == handed  # no deletion in a new generation
    finally:
        release.set()
    loop.run_until(lambda: done)
    assert done == [None]
    assert store.stats.operations - ops_before == 2  # message 1's rows only
    db = sqlite3.connect(path)
    assert db.execute("SELECT id FROM messages").fetchall() == [(1,)]
    assert db.execute("SELECT seq FROM queue_messages").fetchall() == [(1,)]
    assert store.is_durable(first) and store.messages_stored == 1
    store.close()


def test_an_update_not_taken_yet_of_a_removed_entry_becomes_its_deletion(path, loop) -> None:
    """An entry written before, delivered (its acquired flag updated) in a generation
    that waits for the commit thread and acked before the thread takes it: the update
    is not run but deletes the row in its place, in its generation (no update, and the
    deletion as soon as before); the message row goes in the next generation."""
    store = open_store(path, loop)
    qid = store.save_queue(QueueRecord("/", "q"))
    ref0 = store.add_message(qid, 0, None, 0, False, None, row(10))
    commit(store, loop)
    statements: list[str] = []
    store.commit_thread.connection.set_trace_callback(statements.append)
    running, release = holding(store)
    try:
        store.add_message(qid, 1, None, 0, False, None, row(11))
        store.flush()
        assert running.wait(10)  # the commit thread is busy with message 11
        store.update_message(qid, 0, ref0, 1, False, True, None)  # delivered
        done: list = []
        store.after_commit(done.append)
        store.flush()  # the update's generation waits
        handed = store.latest_generation
        store.remove_message(qid, 0, ref0)  # acked before the thread took it
        assert store.latest_generation == handed + 1  # the message row's deletion only
        store.after_commit(done.append)
        store.flush()
    finally:
        release.set()
    loop.run_until(lambda: len(done) == 2)
    assert done == [None, None]
    assert not [s for s in statements if s.startswith("UPDATE")]
    db = sqlite3.connect(path)
    assert db.execute("SELECT seq FROM queue_messages").fetchall() == [(1,)]
    assert db.execute("SELECT id FROM messages").fetchall() == [(11,)]
    store.close()


def test_removed_once_the_commit_thread_took_it_is_deleted(path, loop) -> None:
    """The commit thread already runs the generation: the removal is a deletion in the
    next one, and nothing is left behind."""
    store, qid, ref, release = writing_message_1(path, loop)
    try:
        handed = store.latest_generation
        store.remove_message(qid, 1, ref)
        assert store.latest_generation == handed + 1  # the deletions, in a generation of their own
    finally:
        release.set()
    commit(store, loop)
    db = sqlite3.connect(path)
    assert db.execute("SELECT count(*) FROM messages").fetchone() == (0,)
    assert db.execute("SELECT count(*) FROM queue_messages").fetchone() == (0,)
    store.close()


def test_group_commit_one_transaction_for_several_generations(path, loop) -> None:
    store = open_store(path, loop)
    qid = store.save_queue(QueueRecord("/", "q"))
    done: list = []
    gate = threading.Event()
    db = store.commit_thread.connection
    real_execute = store.commit_thread.execute

    def slow(ops):  # hold the first transaction until all generations are queued
        gate.wait(5)
        return real_execute(ops)

    store.commit_thread.execute = slow
    for i in range(1, 6):
        store.add_message(qid, i, None, 0, False, None, row(i))
        store.after_commit(done.append)
        store.flush()
    batches = store.stats.batches
    gate.set()
    loop.run_until(lambda: len(done) == 5)
    assert done == [None] * 5
    assert 1 <= store.stats.batches - batches <= 2  # the first, then the four waiting
    assert db is not None
    store.close()


@contextmanager
def held_syncs(path: str, loop: ManualLoop) -> Iterator[tuple[SqliteStore, int, threading.Event]]:
    """A store with queue ``q`` committed, whose log syncs then wait until the yielded
    event is set (10 s at most); the store is closed at the end."""
    store = open_store(path, loop)
    qid = store.save_queue(QueueRecord("/", "q"))
    commit(store, loop)
    wal = store.wal_sync
    gate = threading.Event()
    real_sync = wal.sync_file
    wal.sync_file = lambda fd: (gate.wait(10), real_sync(fd))
    try:
        yield store, qid, gate
    finally:
        gate.set()
        store.close()


def written_waited(store: SqliteStore, qid: int, seq: int) -> tuple[object, list, list]:
    """Message ``seq`` written and handed over, with a committed and a durable callback
    waiting for it: (its reference, the committed callback's outcomes, the durable one's)."""
    committed: list = []
    synced: list = []
    ref = store.add_message(qid, seq, None, 0, False, None, row(seq))
    store.after_commit(committed.append, durable=False)
    store.after_commit(synced.append)
    store.flush()
    return ref, committed, synced


def test_the_next_group_commits_while_the_log_of_the_last_one_syncs(path, loop) -> None:
    """``sync: full``: the sync of the write-ahead log runs in a second stage (issue 45).
    While it is held up, the commit thread commits the next group (its rows are visible
    to another connection), nothing is reported before its sync, and once the sync
    ends both generations are reported, in order."""
    with held_syncs(path, loop) as (store, qid, gate):
        wal = store.wal_sync
        first: list = []
        store.add_message(qid, 1, None, 0, False, None, row(1))
        store.after_commit(first.append)
        store.flush()
        reader = sqlite3.connect(path)
        try:
            deadline = time.monotonic() + 10
            while not wal.syncing and time.monotonic() < deadline:
                time.sleep(0.002)
            assert wal.syncing
            second: list = []
            store.add_message(qid, 2, None, 0, False, None, row(2))
            store.after_commit(second.append)
            store.flush()
            ids: list = []
            while ids != [1, 2] and time.monotonic() < deadline:  # committed, not synced yet
                ids = [r[0] for r in reader.execute("SELECT id FROM messages ORDER BY id")]
            assert ids == [1, 2] and wal.syncing
            with loop.lock:  # reports queued for the loop: none
                assert loop.calls == []
            assert first == [] and second == []
            gate.set()
            loop.run_until(lambda: first and second)
            assert first == [None] and second == [None]
            assert store.stats.syncs >= 2
        finally:
            reader.close()


@contextmanager
def failing_writes(store: SqliteStore, message: str) -> Iterator[dict]:
    """The store's transactions fail with ``message`` (after running their statements)
    while the yielded switch's ``"on"`` is true."""
    thread = store.commit_thread
    real_execute = thread.execute
    switch = {"on": True}

    def execute(ops):
        written = real_execute(ops)
        if switch["on"]:
            raise sqlite3.OperationalError(message)
        return written

    thread.execute = execute
    try:
        yield switch
    finally:
        thread.execute = real_execute


def test_a_committed_callback_runs_before_the_sync_and_a_durable_one_after(path, loop) -> None:
    """``after_commit(durable=False)`` (a forwarder's outbox rows, issue 45): with ``sync:
    full`` it runs once the transaction is COMMITted, while its log sync is still held;
    the durable callback of the same write only once the sync is over. The report of the
    commit is one call into the loop, and the sync's another."""
    with held_syncs(path, loop) as (store, qid, gate):
        _, committed, synced = written_waited(store, qid, 1)
        loop.wait_for_reports(1)
        loop.run_until(lambda: committed)
        assert committed == [None] and synced == [] and store.wal_sync.syncing
        late: list = []
        store.after_commit(late.append, durable=False)  # nothing new: known committed
        assert late == [None]
        with loop.lock:
            assert loop.calls == []  # the sync's report is still to come
        gate.set()
        loop.run_until(lambda: synced)
        assert synced == [None] and committed == [None]


def test_a_failed_commit_fails_its_committed_callbacks_at_once(path, loop) -> None:
    """A transaction that failed is reported before its sync stage too when a committed
    callback waits for it (a forwarder then sends nothing of it), and a committed callback
    registered afterwards for it gets the failure."""
    with held_syncs(path, loop) as (store, qid, _):
        committed: list = []
        with failing_writes(store, "disk I/O error"):
            store.add_message(qid, 1, None, 0, False, None, row(1))
            store.after_commit(committed.append, durable=False)
            store.flush()
            loop.run_until(lambda: committed)
        assert isinstance(committed[0], StoreWriteFailed)
        again: list = []
        store.after_commit(again.append, durable=False)
        assert again == committed


def test_committed_callbacks_get_each_generation_s_own_outcome(path, loop) -> None:
    """A failed generation nobody waited for when it was committed, then a good one: a
    committed callback of each gets its own generation's outcome, whichever report (the
    commit's or the sync's) comes first."""
    with held_syncs(path, loop) as (store, qid, _):
        with failing_writes(store, "disk I/O error") as failing:
            store.add_message(qid, 1, None, 0, False, None, row(1))
            store.flush()
            loop.wait_for_reports(1)  # the failure, through the sync stage (nothing to sync)
            first: list = []
            store.after_commit(first.append, durable=False)  # for the failed generation
            failing["on"] = False
            second: list = []
            store.save_queue(QueueRecord("/", "q2"))  # (new messages are refused until recovery)
            store.after_commit(second.append, durable=False)
            store.flush()
            loop.wait_for_reports(2)
            loop.run_until(lambda: first and second)
        assert isinstance(first[0], StoreWriteFailed) and second == [None]


def test_a_failure_both_reports_carry_is_held_once(path, loop) -> None:
    """With ``sync: full`` a failed transaction a committed callback waits for comes
    in the commit's report and again in the sync's: the store holds it once (one
    home), and both callbacks get that one failure."""
    store = open_store(path, loop)
    qid = store.save_queue(QueueRecord("/", "q"))
    commit(store, loop)
    with failing_writes(store, "disk I/O error"):
        _, committed, synced = written_waited(store, qid, 1)
        loop.run_until(lambda: committed and synced)
    failed = store.latest_generation
    assert store.failed_ranges == ((failed, failed),)
    assert isinstance(committed[0], StoreWriteFailed) and synced == committed
    store.close()


def test_the_failed_ranges_stay_few_in_a_long_failing_period(path, loop) -> None:
    """Hundreds of failed generations, each waited for and reported: the ranges nobody
    can ask about any more are merged, so the list stays short, and an entry whose
    insert failed long ago is still not on disk (its body never leaves memory)."""
    store = open_store(path, loop)
    qid = store.save_queue(QueueRecord("/", "q"))
    commit(store, loop)
    refs = []
    with failing_writes(store, "disk I/O error"):
        for seq in range(1, 301):
            ref, committed, synced = written_waited(store, qid, seq)
            refs.append(ref)
            loop.run_until(lambda: committed and synced)
            assert isinstance(committed[0], StoreWriteFailed) and synced == committed
    assert len(store.failed_ranges) <= HELD + 1
    assert not any(store.is_durable(ref) for ref in refs)
    late: list = []
    store.after_commit(late.append)  # nothing new: the latest generation's own failure
    assert isinstance(late[0], StoreWriteFailed)
    store.close()


def test_with_sync_normal_a_committed_callback_runs_with_the_one_report(path, loop) -> None:
    """No sync stage: a commit is reported once, and both kinds of callback run from it."""
    store = open_store(path, loop, sync="normal")
    assert store.wal_sync is None
    qid = store.save_queue(QueueRecord("/", "q"))
    done: list = []
    store.add_message(qid, 1, None, 0, False, None, row(1))
    store.after_commit(lambda error: done.append(("committed", error)), durable=False)
    store.after_commit(lambda error: done.append(("durable", error)))
    store.flush()
    loop.wait_for_reports(1)
    with loop.lock:
        assert len(loop.calls) == 1
    loop.run_until(lambda: len(done) == 2)
    assert done == [("committed", None), ("durable", None)]
    store.close()


def test_callbacks_wait_for_their_generation(path, loop) -> None:
    store = open_store(path, loop)
    qid = store.save_queue(QueueRecord("/", "q"))
    first: list = []
    store.add_message(qid, 1, None, 0, False, None, row(1))
    store.after_commit(first.append)
    store.flush()
    second: list = []
    store.add_message(qid, 2, None, 0, False, None, row(2))
    store.after_commit(second.append)
    loop.run_until(lambda: first)
    assert first == [None] and second == []  # its generation is still open
    store.flush()
    loop.run_until(lambda: second)
    store.close()


def test_on_pending_is_called_once_per_generation_and_batch_max_flushes(path, loop) -> None:
    store = open_store(path, loop, batch_max=3)
    calls: list = []
    store.on_pending = lambda: calls.append(1)
    qid = store.save_queue(QueueRecord("/", "q"))
    store.add_message(qid, 1, None, 0, False, None, row(1))  # 3 operations: handed over
    assert calls == [1] and store.open_writes == 0
    store.add_message(qid, 2, None, 0, False, None, row(2))
    assert calls == [1, 1] and store.open_writes == 2
    store.close()


def test_one_commit_keeps_a_transaction_s_writes_in_one_generation(path, loop) -> None:
    """However many writes a transaction's commit makes, batch_max does not split them
    over two commits (a crash between them would leave half of it); the generation is
    handed over at the end of the block."""
    store = open_store(path, loop, batch_max=3)
    qid = store.save_queue(QueueRecord("/", "q"))
    store.flush()
    with store.one_commit():
        store.add_message(qid, 1, None, 0, False, None, row(1))
        first = store.latest_generation
        for seq in range(2, 6):
            store.add_message(qid, seq, None, 0, False, None, row(seq))
        assert store.latest_generation == first and store.open_writes > 3
    assert store.open_writes == 0  # handed over as one
    done: list = []
    store.after_commit(done.append)
    loop.run_until(lambda: done)
    assert done == [None]
    store.close()


def test_failed_write_reports_error_keeps_deletions_and_recovers(path, loop) -> None:
    store = open_store(path, loop)
    alarms: list = []
    store.on_alarm = alarms.append
    qid = store.save_queue(QueueRecord("/", "q"))
    kept = store.add_message(qid, 1, None, 0, False, None, row(1))
    commit(store, loop)
    with failing_writes(store, "database or disk is full") as failing:
        lost = store.add_message(qid, 2, None, 0, False, None, row(2))
        store.remove_message(qid, 1, kept)
        errors: list = []
        store.after_commit(errors.append)
        store.flush()
        loop.run_until(lambda: errors)
        assert isinstance(errors[0], StoreWriteFailed) and errors[0].full
        assert "database or disk is full" in str(errors[0])
        assert alarms == [str(errors[0])] and store.write_error is errors[0]
        assert not store.is_durable(lost)
        db = sqlite3.connect(path)
        assert db.execute("SELECT count(*) FROM queue_messages").fetchone() == (1,)  # rolled back
        failing["on"] = False
        ok: list = []
        store.after_commit(ok.append)  # nothing new: the failed generation answers at once
        assert isinstance(ok[0], StoreWriteFailed)
        # the failure ends only after the recovery checks: until then inserts are refused
        refused = store.add_message(qid, 3, None, 0, False, None, row(3))
        answers: list = []
        store.after_commit(answers.append)
        store.flush()
        loop.run_until(lambda: answers)
        assert "new messages are refused until store writes work again" in str(answers[0])
        assert not store.is_durable(refused)
        loop.run_until(lambda: store.write_error is None, timeout=10)
        assert alarms[-1] is None
        fresh = store.add_message(qid, 4, None, 0, False, None, row(4))
        commit(store, loop)
        # the deletion was kept and retried; the failed and the refused inserts stay lost
        assert db.execute("SELECT seq FROM queue_messages ORDER BY seq").fetchall() == [(4,)]
        assert store.is_durable(fresh) and not store.is_durable(lost)
    store.close()


def test_retry_without_new_writes(path, loop) -> None:
    store = open_store(path, loop, retry_interval=0.05)
    qid = store.save_queue(QueueRecord("/", "q"))
    ref = store.add_message(qid, 1, None, 0, False, None, row(1))
    commit(store, loop)
    thread = store.commit_thread
    real_execute = thread.execute
    attempts: list = []

    def execute(ops):
        attempts.append(len(ops))
        written = real_execute(ops)
        if len(attempts) == 1:
            raise sqlite3.OperationalError("disk I/O error")
        return written

    thread.execute = execute
    alarms: list = []
    store.on_alarm = alarms.append
    store.remove_message(qid, 1, ref)
    store.flush()
    loop.run_until(lambda: alarms == [alarms[0], None] if alarms else False)
    assert "disk I/O error" in alarms[0] and not isinstance(alarms[0], bool)
    assert sqlite3.connect(path).execute("SELECT count(*) FROM messages").fetchone() == (0,)
    store.close()


def test_delete_queue_removes_entries_and_bindings(path, loop) -> None:
    store = open_store(path, loop)
    qid = store.save_queue(QueueRecord("/", "q"))
    store.save_exchange(ExchangeRecord("/", "x", "direct"))
    store.save_binding(BindingRecord("/", "x", "queue", "q", "k"))
    ref = store.add_message(qid, 1, None, 0, False, None, row(1))
    commit(store, loop)
    store.delete_queue("/", "q")
    store.remove_message(qid, 1, ref)  # what the queue's teardown does
    commit(store, loop)
    store.close()
    again = open_store(path, loop)
    snap = again.load()
    assert snap.queues == () and snap.bindings == () and snap.entries == {}
    assert [e.name for e in snap.exchanges] == ["x"]
    again.close()


def test_orphans_are_removed_at_open(path, loop) -> None:
    store = open_store(path, loop)
    qid = store.save_queue(QueueRecord("/", "q"))
    store.add_message(qid, 1, None, 0, False, None, row(1))
    commit(store, loop)
    store.close()
    db = sqlite3.connect(path)
    db.execute("DELETE FROM queues")
    db.commit()
    db.close()
    again = open_store(path, loop)
    assert again.removed_orphans == 2 and again.load().entries == {}
    again.close()


def test_a_file_that_is_not_a_database_is_refused(path, loop) -> None:
    with open(path, "wb") as f:
        f.write(b"this is not a database" * 100)
    with pytest.raises(StoreUnusable) as caught:
        open_store(path, loop)
    assert path in str(caught.value) and "not a database" in str(caught.value)
    assert "move the file aside" in str(caught.value)


def test_an_unknown_schema_version_is_refused(path, loop) -> None:
    open_store(path, loop).close()
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(StoreUnusable, match=f"schema version is {SCHEMA_VERSION + 1}"):
        open_store(path, loop)


def test_a_foreign_database_is_refused(path, loop) -> None:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE other(x)")
    db.close()
    with pytest.raises(StoreUnusable, match="not a gateway store"):
        open_store(path, loop)


def test_damaged_pages_are_refused(path, loop) -> None:
    store = open_store(path, loop)
    qid = store.save_queue(QueueRecord("/", "q"))
    for i in range(1, 200):
        store.add_message(qid, i, None, 0, False, None, row(i, os.urandom(3000)))
    commit(store, loop)
    store.close()
    sqlite3.connect(path).execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    with open(path, "r+b") as f:  # scribble over an interior b-tree page
        f.seek(4096 * 3)
        f.write(b"\xff" * 4096)
    with pytest.raises(StoreUnusable, match="quick_check|malformed|not a database"):
        open_store(path, loop)


def test_a_second_process_on_the_same_store_is_refused(path, loop) -> None:
    store = open_store(path, loop)
    with pytest.raises(StoreUnusable, match="lock file"):
        open_store(path, loop)
    store.close()
    open_store(path, loop).close()  # released on close
