"""BrokerChannel's exchange and queue methods with a real durable store: a change that
wrote to the store is answered once it is committed, replies keep their order, and a
failed commit closes the connection naming the change (issue 41, item 2).

The commit thread is held inside its transaction (``held_commits``) where a test needs
the commit to take time, and its reports run only when the test runs the ``ManualLoop``.
"""
from __future__ import annotations

import sqlite3
import threading
from typing import Iterator

import pytest

from gateway.amqp091 import methods as m
from gateway.amqp091.spec import ReplyCode
from tests.support.broker_channel_driver import BrokerClient, make_broker
from tests.support.frame_builder import methods_of
from translators.basic_properties import BasicProperties


@pytest.fixture
def held_commits(store) -> Iterator[threading.Event]:
    """The commit thread waits inside each transaction until the event is set."""
    thread = store.commit_thread
    real = thread.execute
    release = threading.Event()

    def slow(ops):
        release.wait(10)
        return real(ops)

    thread.execute = slow
    yield release
    release.set()


def rows(tmp_path, table: str) -> int:
    db = sqlite3.connect(str(tmp_path / "store.db"))
    try:
        return db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    finally:
        db.close()


def reports(client, store, loop) -> list[m.Method]:
    """Hand the open batch over, run the commit reports until everything written so far
    is reported; the methods that made the server send."""
    done: list = []
    store.after_commit(done.append)
    store.flush()
    loop.run_until(lambda: bool(done))
    return methods_of(client.received())


def batch(client, *methods: m.Method, channel: int = 1) -> list[m.Method]:
    return methods_of(client.send(b"".join(client.frames.method(channel, x) for x in methods)))


def test_durable_declares_and_binds_are_answered_only_after_their_commit(store, loop, tmp_path, held_commits):
    c = BrokerClient(make_broker(store=store))
    c.open(1)
    out = batch(c, m.ExchangeDeclare(exchange="x", type="direct", durable=True),
                m.QueueDeclare(queue="q", durable=True),
                m.QueueBind(queue="q", exchange="x", routing_key="k"))
    assert out == []  # nothing is answered while the commit runs
    store.flush()
    assert c.broker.vhost("/").queue("q") is not None  # in effect in memory already
    assert methods_of(c.received()) == []
    assert rows(tmp_path, "bindings") == 0
    held_commits.set()
    assert reports(c, store, loop) == [m.ExchangeDeclareOk(), m.QueueDeclareOk(queue="q"), m.QueueBindOk()]
    assert (rows(tmp_path, "exchanges"), rows(tmp_path, "queues"), rows(tmp_path, "bindings")) == (1, 1, 1)


def test_methods_after_a_declare_act_at_once_and_their_answers_wait_behind_it(store, loop):
    c = BrokerClient(make_broker(store=store))
    c.open(1)
    c.call(1, m.ConfirmSelect())
    declare = c.frames.method(1, m.QueueDeclare(queue="q", durable=True))
    publish = c.frames.content(1, m.BasicPublish(exchange="", routing_key="q"), b"hello",
                               BasicProperties(delivery_mode=1))
    get = c.frames.method(1, m.BasicGet(queue="q", no_ack=True))
    assert methods_of(c.send(declare + publish + get)) == []
    queue = c.broker.vhost("/").queue("q")
    assert queue.entries.published == 1 and queue.message_count == 0  # routed, then taken by the get
    out = reports(c, store, loop)
    assert [type(x) for x in out] == [m.QueueDeclareOk, m.BasicAck, m.BasicGetOk]
    # nothing waits now: answers go out at once again
    assert c.publish(1, "", "q", b"t") == [m.BasicAck(delivery_tag=2, multiple=False)]


def test_what_writes_nothing_is_answered_at_once(store, loop):
    c = BrokerClient(make_broker(store=store))
    c.open(1)
    assert c.declare(1, "transient") == [m.QueueDeclareOk(queue="transient")]
    assert c.declare(1, "q", durable=True) == []
    assert reports(c, store, loop) == [m.QueueDeclareOk(queue="q")]
    writes = store.write_count
    assert c.declare(1, "q", durable=True) == [m.QueueDeclareOk(queue="q")]  # equivalent, saved
    assert c.declare(1, "q", passive=True) == [m.QueueDeclareOk(queue="q")]
    assert c.call(1, m.ExchangeDeclare(exchange="amq.direct", type="direct", durable=True)) == [
        m.ExchangeDeclareOk()]
    assert store.write_count == writes


def test_a_redeclare_while_the_first_commit_runs_waits_for_it(store, loop, held_commits):
    c = BrokerClient(make_broker(store=store))
    c.open(1)
    c.open(2)
    assert c.declare(1, "q", durable=True) == []
    store.flush()
    assert c.declare(2, "q", durable=True) == []  # unchanged, but not saved yet
    held_commits.set()
    assert reports(c, store, loop) == [m.QueueDeclareOk(queue="q"), m.QueueDeclareOk(queue="q")]


def test_deletes_and_unbinds_of_durable_entities_wait_for_their_commit(store, loop):
    c = BrokerClient(make_broker(store=store))
    c.open(1)
    batch(c, m.ExchangeDeclare(exchange="x", type="direct", durable=True),
          m.QueueDeclare(queue="q", durable=True), m.QueueBind(queue="q", exchange="x", routing_key="k"),
          m.ExchangeBind(destination="x", source="amq.topic", routing_key="#"))
    assert len(reports(c, store, loop)) == 4
    for method in (m.QueueUnbind(queue="q", exchange="x", routing_key="k"),
                   m.ExchangeUnbind(destination="x", source="amq.topic", routing_key="#"),
                   m.QueueDelete(queue="q"), m.ExchangeDelete(exchange="x")):
        assert c.call(1, method) == []
        (answer,) = reports(c, store, loop)
        assert answer.NAME == method.NAME + "-ok"


def test_a_failed_commit_closes_the_connection_naming_the_declare(store, loop):
    c = BrokerClient(make_broker(store=store))
    c.open(1)
    real = store.commit_thread.execute

    def full(ops):
        real(ops)
        raise sqlite3.OperationalError("database or disk is full")

    store.commit_thread.execute = full
    assert c.declare(1, "q", durable=True) == []
    (close,) = reports(c, store, loop)
    assert isinstance(close, m.ConnectionClose) and close.reply_code == ReplyCode.RESOURCE_ERROR
    assert close.reply_text.startswith("RESOURCE_ERROR - queue.declare of queue 'q' in vhost '/' is in "
                                       "effect but not saved: store write failed: database or disk is full")
    # the queue's write waits for a retry: a second client's re-declare is not answered
    # before it is saved either, and is answered once a commit succeeds
    store.commit_thread.execute = real
    again = BrokerClient(c.broker)
    again.open(1)
    assert again.declare(1, "q", durable=True) == []
    assert reports(again, store, loop) == [m.QueueDeclareOk(queue="q")]


def test_a_failed_commit_of_a_nowait_bind_closes_the_connection_too(store, loop):
    c = BrokerClient(make_broker(store=store))
    c.open(1)
    c.declare(1, "q", durable=True)
    assert reports(c, store, loop) == [m.QueueDeclareOk(queue="q")]
    real = store.commit_thread.execute

    def readonly(ops):
        real(ops)
        raise sqlite3.OperationalError("attempt to write a readonly database")

    store.commit_thread.execute = readonly
    assert c.call(1, m.QueueBind(queue="q", exchange="amq.direct", routing_key="k", nowait=True)) == []
    (close,) = reports(c, store, loop)
    assert isinstance(close, m.ConnectionClose) and close.reply_code == ReplyCode.INTERNAL_ERROR
    assert "queue.bind of the binding of queue 'q' to exchange 'amq.direct'" in close.reply_text


def test_a_reply_for_a_closed_channel_never_reaches_its_successor(store, loop):
    c = BrokerClient(make_broker(store=store))
    c.open(1)
    assert c.declare(1, "q", durable=True) == []
    assert c.call(1, m.ChannelClose()) == [m.ChannelCloseOk()]
    c.open(1)  # the same number, a new channel
    assert reports(c, store, loop) == []
    assert c.declare(1, "t") == [m.QueueDeclareOk(queue="t")]
