"""Unsettled 1.0 transfers the durable store writes are accepted only after the commit."""
from __future__ import annotations

import sqlite3

import pytest
from proton import Delivery

from gateway.amqp10 import INCOMING_CREDIT
from gateway.broker import Broker
from tests.support.amqp10_pump import Amqp10Pump, encode_message, engine_factory


@pytest.fixture()
def pump(store, authenticator):
    broker = Broker(container_id="gateway-test", store=store)
    broker.vhost("/").declare_queue("dq", durable=True)
    broker.vhost("/").declare_queue("plain")
    return Amqp10Pump(engine_factory(broker, authenticator)).open()


def commit(store, loop, pump) -> None:
    store.flush()
    loop.wait_for_reports()
    loop.run_until(lambda: True)
    pump.pump()


def test_durable_transfer_to_a_durable_queue_is_accepted_after_the_commit(pump, store, loop, tmp_path):
    sender = pump.sender("/queue/dq")
    first = pump.send(sender, encode_message("a", durable=True))
    second = pump.send(sender, encode_message("b", durable=True))
    assert first.remote_state == 0 and second.remote_state == 0  # no outcome yet
    db = sqlite3.connect(str(tmp_path / "store.db"))
    assert db.execute("SELECT count(*) FROM messages").fetchone() == (0,)
    commit(store, loop, pump)
    assert first.remote_state == Delivery.ACCEPTED and first.settled
    assert second.remote_state == Delivery.ACCEPTED and second.settled
    assert db.execute("SELECT count(*) FROM messages").fetchone() == (2,)


def test_what_the_store_does_not_keep_is_accepted_at_once(pump, store):
    sender = pump.sender("/queue/dq")
    assert pump.send(sender, encode_message("t", durable=False)).remote_state == Delivery.ACCEPTED
    other = pump.sender("/queue/plain", name="other")
    assert pump.send(other, encode_message("d", durable=True)).remote_state == Delivery.ACCEPTED


def test_a_failed_write_rejects_with_a_condition_naming_it(pump, store, loop):
    real = store.commit_thread.execute

    def failing(ops):
        real(ops)
        raise sqlite3.OperationalError("database or disk is full")

    store.commit_thread.execute = failing
    sender = pump.sender("/queue/dq")
    delivery = pump.send(sender, encode_message("a", durable=True))
    commit(store, loop, pump)
    assert delivery.remote_state == Delivery.REJECTED
    assert delivery.remote.condition.name == "amqp:resource-limit-exceeded"
    assert "database or disk is full" in delivery.remote.condition.description


def test_a_link_gone_before_the_commit_is_left_alone(pump, store, loop):
    sender = pump.sender("/queue/dq")
    delivery = pump.send(sender, encode_message("a", durable=True))
    sender.close()
    pump.pump()
    commit(store, loop, pump)  # must not touch the freed delivery
    assert delivery.remote_state == 0
    assert not pump.engine.closed


def test_transfers_waiting_for_the_disk_come_off_the_credit_window(pump, store, loop):
    sender = pump.sender("/queue/dq")
    assert sender.credit == INCOMING_CREDIT
    for i in range(200):
        pump.send(sender, encode_message(i, durable=True))
    assert sender.credit == INCOMING_CREDIT - 200  # no refill while they wait
    commit(store, loop, pump)
    assert sender.credit == INCOMING_CREDIT
