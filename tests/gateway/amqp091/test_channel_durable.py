"""BrokerChannel with a real durable store: confirms and tx.commit-ok wait for the commit.

The store's commit thread reports through a ``ManualLoop``: until the test runs the
report, the broker does not know the write is on disk, and no confirm may go out.
"""
from __future__ import annotations

import sqlite3
import threading
import time

import pytest

from gateway.amqp091 import methods as m
from gateway.amqp091.frames import MethodFrame
from gateway.amqp091.spec import ReplyCode
from tests.support.broker_channel_driver import BrokerClient, make_broker
from tests.support.frame_builder import methods_of
from translators.basic_properties import BasicProperties

PERSISTENT = BasicProperties(delivery_mode=2)
TRANSIENT = BasicProperties(delivery_mode=1)


@pytest.fixture
def client(store, loop):
    c = BrokerClient(make_broker(store=store))
    c.open(1)
    c.declare(1, "durable", durable=True)
    assert committed(c, store, loop) == [m.QueueDeclareOk(queue="durable")]
    c.declare(1, "plain")
    c.call(1, m.ConfirmSelect())
    return c


def publishes(client, channel, *items):
    """One batch of basic.publish: ``(routing_key, properties)`` each."""
    return b"".join(client.frames.content(channel, m.BasicPublish(exchange="", routing_key=k), b"x", p)
                    for k, p in items)


def committed(client, store, loop) -> list[m.Method]:
    """Hand the batch over, let the commit report run; the methods it made the server send."""
    store.flush()
    loop.wait_for_reports()
    loop.run_until(lambda: True)
    return methods_of(client.received())


def test_persistent_publish_on_a_durable_queue_is_acked_only_after_the_commit(client, store, loop, tmp_path):
    assert client.publish(1, "", "durable", b"p", PERSISTENT) == []  # held
    db = sqlite3.connect(str(tmp_path / "store.db"))
    assert db.execute("SELECT count(*) FROM messages").fetchone() == (0,)
    assert committed(client, store, loop) == [m.BasicAck(delivery_tag=1, multiple=True)]
    assert db.execute("SELECT count(*) FROM messages").fetchone() == (1,)  # on disk when acked


def test_transient_traffic_is_acked_at_once(client, store, loop):
    assert client.publish(1, "", "durable", b"t", TRANSIENT) == [m.BasicAck(delivery_tag=1, multiple=False)]
    assert client.publish(1, "", "plain", b"p", PERSISTENT) == [m.BasicAck(delivery_tag=2, multiple=False)]
    assert store.write_count == 1  # the durable queue, nothing for the messages


def test_publishes_after_a_held_one_wait_with_it_so_no_multiple_ack_jumps_it(client, store, loop):
    out = client.send(publishes(client, 1, ("plain", TRANSIENT), ("plain", TRANSIENT),
                                ("durable", PERSISTENT), ("plain", TRANSIENT)))
    assert out == [MethodFrame(1, m.BasicAck(delivery_tag=2, multiple=True))]  # before the held one
    # a later batch while 3 and 4 wait: held too
    assert client.publish(1, "", "plain", b"t", TRANSIENT) == []
    # both runs wait for the same commit: one ack (multiple) for the later covers both
    assert committed(client, store, loop) == [m.BasicAck(delivery_tag=5, multiple=True)]
    # nothing waits any more: acks go out at once again
    assert client.publish(1, "", "plain", b"t", TRANSIENT) == [m.BasicAck(delivery_tag=6, multiple=False)]


def test_a_failed_write_nacks_the_held_publishes(client, store, loop):
    thread = store.commit_thread
    real = thread.execute

    def failing(ops):
        real(ops)
        raise sqlite3.OperationalError("database or disk is full")

    thread.execute = failing
    client.send(publishes(client, 1, ("durable", PERSISTENT), ("durable", PERSISTENT)))
    assert committed(client, store, loop) == [m.BasicNack(delivery_tag=2, multiple=True, requeue=False)]


def test_tx_commit_ok_waits_for_the_commit(store, loop):
    c = BrokerClient(make_broker(store=store))
    c.open(1)
    c.declare(1, "durable", durable=True)
    committed(c, store, loop)
    c.call(1, m.TxSelect())
    c.publish(1, "", "durable", b"p", PERSISTENT)
    assert c.call(1, m.TxCommit()) == []
    assert committed(c, store, loop) == [m.TxCommitOk()]
    c.publish(1, "", "durable", b"t", TRANSIENT)
    assert c.call(1, m.TxCommit()) == [m.TxCommitOk()]  # nothing stored: at once


def test_a_failed_tx_commit_closes_the_connection_naming_the_problem(store, loop):
    c = BrokerClient(make_broker(store=store))
    c.open(1)
    c.declare(1, "durable", durable=True)
    committed(c, store, loop)
    c.call(1, m.TxSelect())
    real = store.commit_thread.execute

    def failing(ops):
        real(ops)
        raise sqlite3.OperationalError("attempt to write a readonly database")

    store.commit_thread.execute = failing
    c.publish(1, "", "durable", b"p", PERSISTENT)
    assert c.call(1, m.TxCommit()) == []
    (close,) = committed(c, store, loop)
    assert isinstance(close, m.ConnectionClose) and close.reply_code == ReplyCode.INTERNAL_ERROR
    assert "readonly database" in close.reply_text


def test_a_confirm_for_a_closed_channel_is_dropped(client, store, loop):
    client.publish(1, "", "durable", b"p", PERSISTENT)
    assert client.call(1, m.ChannelClose()) == [m.ChannelCloseOk()]
    assert committed(client, store, loop) == []


def test_runs_of_a_channel_committed_in_one_report_get_one_multiple_ack(client, store, loop):
    """Two runs of publishes handed to the store in two generations, both reported durable
    by one commit report: one basic.ack multiple for the later covers the earlier (one ack
    per channel per report, not one per generation)."""
    thread = store.commit_thread
    real = thread.execute
    release = threading.Event()

    def held(ops):  # the first commit waits while the two later generations queue up
        assert release.wait(10)
        return real(ops)

    thread.execute = held
    client.send(publishes(client, 1, ("durable", PERSISTENT)))
    store.flush()
    deadline = time.monotonic() + 10
    while thread.taken_gen < store.latest_generation and time.monotonic() < deadline:
        time.sleep(0.002)
    assert thread.taken_gen == store.latest_generation  # the first commit is running
    client.send(publishes(client, 1, ("durable", PERSISTENT), ("durable", PERSISTENT)))
    store.flush()
    client.send(publishes(client, 1, ("durable", PERSISTENT)))
    store.flush()
    last = store.latest_generation
    release.set()
    loop.run_until(lambda: store.is_committed(last))
    acks = methods_of(client.received())
    assert acks[-1] == m.BasicAck(delivery_tag=4, multiple=True)
    # the run up to 3 (the second generation) was reported with the one up to 4: no ack of its own
    assert m.BasicAck(delivery_tag=3, multiple=True) not in acks
    assert set(acks) <= {m.BasicAck(delivery_tag=1, multiple=True), m.BasicAck(delivery_tag=4, multiple=True)}
