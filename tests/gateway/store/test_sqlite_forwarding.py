"""The forwarding tables of SqliteStore: outbox rows and forwarded ids survive reopening,
share generations with message writes, and a row removed before its commit is never
written; a version 1 file gets the tables when opened."""
from __future__ import annotations

import sqlite3
import threading

from gateway.store.interface import ForwardedRun, OutboxRow
from gateway.store.sqlite_schema import SCHEMA_VERSION
from tests.gateway.store.test_sqlite import commit, open_store, path, row  # noqa: F401 - path: a fixture


def outbox_row(entry_id: int, body: bytes = b"body", attempts: int = 0) -> OutboxRow:
    return OutboxRow(entry_id, "org-b", "orders", row(entry_id, body),
                     {"x-opt-forward-origin": "org-a"}, attempts)


def test_outbox_rows_survive_reopening_in_order(path, loop) -> None:
    store = open_store(path, loop)
    for i in (3, 1, 2):
        store.add_outbox(outbox_row(i, b"m%d" % i))
    commit(store, loop)
    store.update_outbox(2, 5)
    store.remove_outbox(3)
    commit(store, loop)
    store.close()
    again = open_store(path, loop)
    rows = again.load_outbox()
    assert [(r.entry_id, r.message.body, r.attempts) for r in rows] == [(1, b"m1", 0), (2, b"m2", 5)]
    assert rows[0].annotations == {"x-opt-forward-origin": "org-a"} and rows[0].node == "orders"
    assert rows[0].message.origin == "amqp091" and again.outbox_rows == 2
    again.close()


def test_a_row_removed_before_its_commit_is_never_written(path, loop) -> None:
    store = open_store(path, loop)
    store.add_outbox(outbox_row(7))
    store.update_outbox(7, 1)
    store.remove_outbox(7)
    commit(store, loop)
    assert store.stats.operations == 0
    store.close()
    assert open_store(path, loop).load_outbox() == []


def test_forwarded_ids_survive_and_are_forgotten_by_age(path, loop) -> None:
    store = open_store(path, loop)
    store.remember_forwarded("org-a", 10, 100.0)
    commit(store, loop)  # (in one commit, 10 and 11 would share a row seen at 200.0)
    store.remember_forwarded("org-a", 11, 200.0)
    commit(store, loop)
    store.forget_forwarded(150.0)
    commit(store, loop)
    store.close()
    assert open_store(path, loop).load_forwarded() == [ForwardedRun("org-a", 11, 11, 200.0)]


def test_ids_that_follow_each_other_in_a_commit_share_a_row(path, loop) -> None:
    """A sender's stream (ids one after the other, per origin) costs the commit one
    forwarded-id row per run, not one per message; every run is restored as its row holds
    it, seen at the time of its latest."""
    store = open_store(path, loop)
    for gateway_id, seen_at in ((10, 1.0), (11, 2.0), (12, 3.0), (20, 4.0), (21, 5.0)):
        store.remember_forwarded("org-a", gateway_id, seen_at)
    store.remember_forwarded("org-b", 22, 6.0)      # another origin: a row of its own,
    store.remember_forwarded("org-a", 22, 7.0)      # and org-a's run starts again
    commit(store, loop)
    store.remember_forwarded("org-a", 23, 8.0)      # the next commit: a row of its own
    commit(store, loop)
    store.close()
    db = sqlite3.connect(path)
    assert sorted(db.execute("SELECT origin, gateway_id, last_id, seen_at FROM forwarded_ids")) == [
        ("org-a", 10, 12, 3.0), ("org-a", 20, 21, 5.0), ("org-a", 22, 22, 7.0), ("org-a", 23, 23, 8.0),
        ("org-b", 22, 22, 6.0)]
    db.close()
    assert sorted(open_store(path, loop).load_forwarded()) == [
        ForwardedRun("org-a", 10, 12, 3.0), ForwardedRun("org-a", 20, 21, 5.0), ForwardedRun("org-a", 22, 22, 7.0),
        ForwardedRun("org-a", 23, 23, 8.0), ForwardedRun("org-b", 22, 22, 6.0)]


def test_a_version_3_store_keeps_its_forwarded_ids(path, loop) -> None:
    """Version 3 wrote one id a row; opened now, the file gets ``last_id`` and its ids
    are all still known (a row without ``last_id`` is its own id alone)."""
    open_store(path, loop).close()
    db = sqlite3.connect(path)
    db.executescript("DROP TABLE forwarded_ids; CREATE TABLE forwarded_ids(origin TEXT NOT NULL, "
                     "gateway_id INTEGER NOT NULL, seen_at REAL NOT NULL, "
                     "PRIMARY KEY (origin, gateway_id)) WITHOUT ROWID; "
                     "INSERT INTO forwarded_ids VALUES ('org-a', 5, 1.0), ('org-a', 6, 2.0); "
                     "PRAGMA user_version=3;")
    db.close()
    store = open_store(path, loop)
    store.remember_forwarded("org-a", 7, 3.0)
    commit(store, loop)
    store.close()
    assert sorted(open_store(path, loop).load_forwarded()) == [
        ForwardedRun("org-a", 5, 5, 1.0), ForwardedRun("org-a", 6, 6, 2.0), ForwardedRun("org-a", 7, 7, 3.0)]
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 4
    db.close()


def test_a_version_1_store_gets_the_forwarding_tables(path, loop) -> None:
    open_store(path, loop).close()
    db = sqlite3.connect(path)
    db.executescript("DROP TABLE outbox; DROP TABLE forwarded_ids; DROP TABLE definitions; "
                     "PRAGMA user_version=1;")
    db.close()
    store = open_store(path, loop)
    store.add_outbox(outbox_row(1))
    commit(store, loop)
    store.close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert db.execute("SELECT count(*) FROM outbox").fetchone()[0] == 1
    db.close()


def test_outbox_rows_of_several_generations_go_as_few_multi_row_statements(path, loop) -> None:
    """Inserts, updates and deletions of outbox rows (and forwarded ids) from generations
    committed in one transaction are grouped: the final state is right (an insert runs
    before the later generation's update and deletion of the same row) and 300 rows cost
    a handful of statements, not one each (updates are rare: one per release)."""
    store = open_store(path, loop)
    gate = threading.Event()
    real_execute = store.commit_thread.execute

    def held(ops):  # hold the first transaction until every generation is queued
        gate.wait(5)
        return real_execute(ops)

    store.commit_thread.execute = held
    statements: list[str] = []
    store.commit_thread.connection.set_trace_callback(statements.append)
    done: list = []
    store.add_outbox(outbox_row(1))
    store.after_commit(done.append)
    store.flush()                                 # the first transaction, held
    for i in range(2, 302):
        store.add_outbox(outbox_row(i))
        store.remember_forwarded("org-z", i, 100.0)
    store.after_commit(done.append)
    store.flush()
    for i in range(2, 302, 3):
        store.update_outbox(i, 4)
    for i in range(3, 302, 3):
        store.remove_outbox(i)
    store.after_commit(done.append)
    store.flush()
    gate.set()
    loop.run_until(lambda: len(done) == 3)
    assert done == [None] * 3
    grouped = [s for s in statements if s.startswith(("INSERT", "DELETE"))
               and ("outbox" in s or "forwarded_ids" in s)]
    assert len(grouped) < 30, len(grouped)       # 700 rows: 300 + 300 inserts, 100 deletions
    store.close()
    again = open_store(path, loop)
    rows = {r.entry_id: r.attempts for r in again.load_outbox()}
    assert sorted(rows) == [i for i in range(1, 302) if i < 3 or i % 3 != 0]
    assert all(rows[i] == (4 if i % 3 == 2 else 0) for i in rows)
    assert [(r.first_id, r.last_id) for r in again.load_forwarded()] == [(2, 301)]   # 300 ids, one run
    again.close()


def test_read_outbox_gives_the_committed_messages_asked_for(path, loop) -> None:
    store = open_store(path, loop)
    for i in (1, 2, 3):
        store.add_outbox(outbox_row(i, b"m%d" % i))
    commit(store, loop)
    store.add_outbox(outbox_row(4))            # not committed yet: not readable
    rows = store.read_outbox([3, 1, 4, 9])
    assert sorted(rows) == [1, 3] and rows[3].body == b"m3" and rows[3].message_id == 3
    assert rows[1] == store.load_outbox()[0].message
    store.close()
