"""QueueStorage with a real SqliteStore: what a stored queue writes, bodies out of memory
and back, stand-ins at expiry and dead-lettering, restore."""
from __future__ import annotations

import sqlite3

import pytest

from gateway.broker import Broker, DestinationKind, Encoding, MessageContainer
from gateway.broker.queue_storage import PAGE_IN_BATCH
from gateway.store_codecs import load_stored_message
from tests.support.store_loop import commit_now, open_test_store

PROPS = b"\x10\x00\x02"  # delivery-mode 2, nothing else


def persistent(body: bytes, **kw) -> MessageContainer:
    return MessageContainer(Encoding.AMQP091, (PROPS, body), durable=True, size=len(body), **kw)


@pytest.fixture
def broker(store):
    return Broker(container_id="c", store=store, message_loader=load_stored_message, memory_budget=1000)


def rows(tmp_path, sql: str) -> list:
    return sqlite3.connect(str(tmp_path / "store.db")).execute(sql).fetchall()


def test_only_persistent_messages_on_storable_queues_are_written(broker, store, loop, tmp_path):
    v = broker.vhost("/")
    v.declare_queue("dq", durable=True)
    v.declare_queue("tq")
    v.declare_queue("aq", durable=True, auto_delete=True)
    v.declare_queue("xq", durable=True, exclusive=True, owner=1)
    for name in ("dq", "tq", "aq", "xq"):
        v.publish("", name, persistent(b"p"), 0)
    v.publish("", "dq", MessageContainer(Encoding.AMQP091, (b"\x00\x00", b"t"), size=1), 0)
    commit_now(store, loop)
    assert [q.storage is not None for q in (v.queue(n) for n in ("dq", "tq", "aq", "xq"))] == [
        True, False, False, False]
    assert rows(tmp_path, "SELECT name FROM queues") == [("dq",)]
    assert rows(tmp_path, "SELECT count(*) FROM queue_messages") == [(1,)]


def test_a_delivery_is_marked_and_a_requeue_recorded(broker, store, loop, tmp_path, consumer_cls):
    v = broker.vhost("/")
    q = v.declare_queue("dq", durable=True)
    v.publish("", "dq", persistent(b"a"), 0)
    commit_now(store, loop)
    entry = q.get(1.0, ack=True)
    commit_now(store, loop)
    assert rows(tmp_path, "SELECT acquired, delivery_count, redelivered FROM queue_messages") == [(1, 0, 0)]
    q.release(entry)
    commit_now(store, loop)
    assert rows(tmp_path, "SELECT acquired, delivery_count, redelivered FROM queue_messages") == [(0, 1, 1)]
    q.settle(q.get(2.0, ack=True))
    commit_now(store, loop)
    assert rows(tmp_path, "SELECT count(*) FROM messages") == [(0,)]


def test_bodies_over_the_budget_leave_memory_once_committed_and_come_back_in_order(broker, store, loop,
                                                                                 consumer_cls):
    v = broker.vhost("/")
    q = v.declare_queue("dq", durable=True)
    for i in range(10):
        v.publish("", "dq", persistent(b"%03d" % i + bytes(197)), 0)
    assert broker.memory_used == 2000
    assert broker.pager.relieve() == 0  # nothing committed: nothing may leave
    commit_now(store, loop)  # the commit report runs the pager through the service; here:
    assert broker.pager.relieve() == 1000 and broker.memory_used == 1000
    stand_ins = [e for e in q.ready.levels[0] if e.message.payload is None]
    assert [e.seq for e in stand_ins] == [6, 7, 8, 9, 10]  # the newest left first
    c = consumer_cls()
    v.consume("dq", c, now=1.0)
    assert [e.message.payload[1][:3] for e in c.entries] == [b"%03d" % i for i in range(10)]
    assert broker.memory_used == 2000  # all read back, now held by the consumer
    assert c.entries[7].message.properties.delivery_mode == 2  # rebuilt by the 0-9-1 decoder


def test_transient_messages_and_uncommitted_writes_stay_in_memory(broker, store, loop):
    v = broker.vhost("/")
    q = v.declare_queue("dq", durable=True)
    v.publish("", "dq", MessageContainer(Encoding.AMQP091, (b"\x00\x00", bytes(600)), size=600), 0)
    commit_now(store, loop)
    v.publish("", "dq", persistent(bytes(600)), 0)  # not committed yet
    assert broker.pager.relieve() == 0
    assert all(e.message.payload is not None for e in q.ready.levels[0])


def test_a_stand_in_that_expires_is_dead_lettered_with_its_body(broker, store, loop, consumer_cls):
    v = broker.vhost("/")
    v.declare_queue("dead", durable=True)
    q = v.declare_queue("dq", durable=True, arguments={"x-message-ttl": 1000, "x-dead-letter-exchange": "",
                                                       "x-dead-letter-routing-key": "dead"})
    v.publish("", "dq", persistent(bytes(1500)), 0)
    commit_now(store, loop)
    broker.pager.relieve()
    assert q.ready.levels[0][0].message.payload is None
    assert q.expire(5.0) == 1
    c = consumer_cls()
    v.consume("dead", c, now=5.0)
    (entry,) = c.entries
    assert entry.message.payload[1] == bytes(1500)
    assert entry.message.deaths[0]["reason"] == "expired" and entry.message.deaths[0]["queue"] == "dq"


def test_page_in_reads_a_batch(broker, store, loop):
    v = broker.vhost("/")
    q = v.declare_queue("dq", durable=True)
    count = PAGE_IN_BATCH + 50
    for i in range(count):
        v.publish("", "dq", persistent(b"%04d" % i), 0)
    commit_now(store, loop)
    broker.pager.budget = 0
    broker.pager.relieve()
    assert all(e.message.payload is None for e in q.ready.levels[0])
    assert q.get(1.0, ack=False).message.payload[1] == b"0000"
    loaded = [e for e in q.ready.levels[0] if e.message.payload is not None]
    assert len(loaded) == PAGE_IN_BATCH - 1  # read with the first one, in one query


def test_restore_brings_back_stand_ins_and_a_message_shared_by_two_queues(tmp_path, store, loop,
                                                                          consumer_cls):
    broker = Broker(container_id="c", store=store, message_loader=load_stored_message)
    v = broker.vhost("/")
    v.declare_queue("a", durable=True)
    v.declare_queue("b", durable=True)
    v.declare_exchange("fan", "fanout", durable=True)
    v.bind(DestinationKind.QUEUE, "a", "fan")
    v.bind(DestinationKind.QUEUE, "b", "fan")
    v.publish("fan", "", persistent(b"both", priority=3), 0)
    commit_now(store, loop)
    assert rows(tmp_path, "SELECT count(*) FROM messages") == [(1,)]
    store.close()

    again = open_test_store(str(tmp_path), loop)
    try:
        restored = Broker(container_id="c", store=again, message_loader=load_stored_message)
        counts = restored.restore(now=10.0)
        assert (counts["/"].queues, counts["/"].bindings, counts["/"].messages) == (2, 2, 2)
        rv = restored.vhost("/")
        for name in ("a", "b"):
            c = consumer_cls(auto_settle=True)
            rv.consume(name, c, now=11.0)
            (entry,) = c.entries
            assert entry.message.payload == (PROPS, b"both") and entry.message.exchange == "fan"
        commit_now(again, loop)
        assert rows(tmp_path, "SELECT count(*) FROM messages") == [(0,)]
    finally:
        again.close()



def test_removing_a_vhost_removes_its_entities_from_the_store(tmp_path, store, loop):
    broker = Broker(container_id="c", vhosts=("/", "gone"), store=store, message_loader=load_stored_message)
    v = broker.vhost("gone")
    v.declare_exchange("x", "direct", durable=True)
    v.declare_queue("q", durable=True)
    v.bind(DestinationKind.QUEUE, "q", "x", "k")
    v.publish("x", "k", persistent(b"m"), 0)
    commit_now(store, loop)
    broker.remove_vhost("gone")
    commit_now(store, loop)
    for table in ("exchanges", "queues", "bindings", "messages", "queue_messages"):
        assert rows(tmp_path, f"SELECT count(*) FROM {table}") == [(0,)], table
