"""Transactions on the 1.0 engine (``transactions``, ``coordinator``), against a real
proton client transport pumped in memory: posting, retirement, discharge, rollback."""
from __future__ import annotations

from typing import Any

import pytest
from proton import Delivery, Described, Message, SymbolList, Terminus, symbol, ulong

from gateway.broker.exchanges import DestinationKind
from tests.support.amqp10_pump import Amqp10Pump, decode_message, encode_message

TRANSACTIONAL_STATE, DECLARED = 0x34, 0x33


class Controller:
    """The client side of a coordinator link, as proton's ``Transaction`` writes it."""

    def __init__(self, pump: Amqp10Pump, capabilities: tuple[str, ...] = ("amqp:local-transactions",)) -> None:
        self.pump = pump
        link = pump.connection.session()
        link.open()
        self.link = link.sender("txn-ctrl")
        self.link.target.type = Terminus.COORDINATOR
        self.link.target.capabilities.put_object(SymbolList([symbol(c) for c in capabilities]))
        self.link.open()
        pump.pump()

    def control(self, descriptor: str, value: list) -> Delivery:
        return self.pump.send(self.link, Message(body=Described(symbol(descriptor), value)).encode())

    def declare(self) -> bytes:
        delivery = self.control("amqp:declare:list", [None])
        assert delivery.remote_state == DECLARED, delivery.remote.condition
        return bytes(delivery.remote.data[0])

    def discharge(self, txn_id: bytes, fail: bool) -> Delivery:
        return self.control("amqp:discharge:list", [txn_id, fail])


def post(pump: Amqp10Pump, sender: Any, txn_id: bytes, body: Any, **properties: Any) -> Delivery:
    delivery = sender.delivery(f"p{id(body)}-{body}")
    sender.send(encode_message(body, **properties))
    delivery.local.data = [txn_id]
    delivery.update(TRANSACTIONAL_STATE)
    sender.advance()
    pump.pump()
    return delivery


def retire(pump: Amqp10Pump, delivery: Delivery, txn_id: bytes, outcome: int = Delivery.ACCEPTED,
           settle: bool = False) -> None:
    delivery.local.data = [txn_id, Described(ulong(outcome), [])]
    delivery.update(TRANSACTIONAL_STATE)
    if settle:
        delivery.settle()
    pump.pump()


def _posting(connect) -> tuple[Amqp10Pump, Controller, bytes, Any]:
    """A connection with a declared transaction and a sender to ``/queue/q1``."""
    pump = connect()
    controller = Controller(pump)
    return pump, controller, controller.declare(), pump.sender("/queue/q1")


@pytest.fixture()
def queue(broker):
    return broker.vhost("/").queue("q1")


def test_the_coordinator_answers_with_local_transactions(connect):
    pump = connect()
    controller = Controller(pump)
    assert controller.link.remote_target.type == Terminus.COORDINATOR
    capabilities = controller.link.remote_target.capabilities
    capabilities.rewind()
    capabilities.next()
    assert set(capabilities.get_object()) == {"amqp:local-transactions", "amqp:multi-txns-per-ssn",
                                              "amqp:multi-ssns-per-txn"}
    assert controller.link.credit > 0


def test_a_coordinator_asking_for_distributed_transactions_is_refused(connect):
    pump = connect()
    controller = Controller(pump, ("amqp:local-transactions", "amqp:distributed-transactions",
                                   "amqp:multi-txns-per-ssn", "x-unknown"))
    condition = controller.link.remote_condition
    assert condition is not None and condition.name == "amqp:not-implemented"
    assert condition.description == (
        "coordinator capabilities not supported: amqp:distributed-transactions (distributed "
        "transactions); this coordinator offers amqp:local-transactions, amqp:multi-txns-per-ssn, "
        "amqp:multi-ssns-per-txn")


def test_many_transactions_open_at_once_and_one_used_from_another_session(connect, queue):
    """``amqp:multi-txns-per-ssn`` and ``amqp:multi-ssns-per-txn``, as offered."""
    pump = connect()
    controller = Controller(pump, ("amqp:local-transactions", "amqp:multi-txns-per-ssn",
                                   "amqp:multi-ssns-per-txn"))
    first, second = controller.declare(), controller.declare()
    assert first != second
    sender = pump.sender("/queue/q1")  # its own session, not the coordinator's
    assert sender.session is not controller.link.session
    post(pump, sender, first, "one")
    post(pump, sender, second, "two")
    assert controller.discharge(second, False).remote_state == Delivery.ACCEPTED
    assert queue.message_count == 1
    assert controller.discharge(first, True).remote_state == Delivery.ACCEPTED
    assert queue.message_count == 1


def test_posted_messages_are_visible_only_after_commit(connect, queue):
    pump, controller, txn, sender = _posting(connect)
    deliveries = [post(pump, sender, txn, i) for i in range(3)]
    for delivery in deliveries:
        assert delivery.settled and delivery.remote_state == TRANSACTIONAL_STATE
        txn_id, outcome = delivery.remote.data
        assert bytes(txn_id) == txn and outcome.descriptor == ulong(Delivery.ACCEPTED)
    assert queue.message_count == 0
    assert controller.discharge(txn, False).remote_state == Delivery.ACCEPTED
    assert queue.message_count == 3


def test_rollback_drops_the_posted_messages(connect, queue):
    pump, controller, txn, sender = _posting(connect)
    post(pump, sender, txn, "x")
    assert controller.discharge(txn, True).remote_state == Delivery.ACCEPTED
    assert queue.message_count == 0
    # the txn-id is gone: discharging it again is refused
    again = controller.discharge(txn, False)
    assert again.remote_state == Delivery.REJECTED
    assert again.remote.condition.name == "amqp:transaction:unknown-id"
    assert "txn:1" in again.remote.condition.description


def test_a_post_with_an_unknown_txn_id_is_rejected(connect, queue):
    pump = connect()
    Controller(pump).declare()
    sender = pump.sender("/queue/q1")
    delivery = post(pump, sender, b"nope", "x")
    assert delivery.remote_state == Delivery.REJECTED
    assert delivery.remote.condition.name == "amqp:transaction:unknown-id"
    assert "'nope'" in delivery.remote.condition.description
    assert queue.message_count == 0


def test_a_refused_post_carries_its_condition_in_the_transactional_state(connect):
    pump = connect()
    controller = Controller(pump)
    txn = controller.declare()
    sender = pump.sender(None)  # the anonymous relay: the message has no 'to'
    delivery = post(pump, sender, txn, "x")
    txn_id, outcome = delivery.remote.data
    assert outcome.descriptor == ulong(Delivery.REJECTED)
    [error] = outcome.value
    assert error.descriptor == ulong(0x1D)
    assert error.value[:2] == [symbol("amqp:invalid-field"),
                               "anonymous relay: the message has no 'to' address"]


def test_posts_through_the_anonymous_relay_and_to_an_exchange(connect, broker, queue):
    broker.vhost("/").bind(DestinationKind.QUEUE, "q1", "amq.topic", "t.k")
    pump = connect()
    controller = Controller(pump)
    txn = controller.declare()
    relay = pump.sender(None)
    topic = pump.sender("/topic/t.k", name="topic")
    for delivery in (post(pump, relay, txn, "via relay", address="/queue/q1"),
                     post(pump, topic, txn, "via topic")):
        assert delivery.remote.data[1].descriptor == ulong(Delivery.ACCEPTED)
    assert queue.message_count == 0
    assert controller.discharge(txn, False).remote_state == Delivery.ACCEPTED
    assert queue.message_count == 2


def _consume(pump, count):
    receiver = pump.receiver("/queue/q1", credit=count)
    pump.pump()
    return receiver, pump.take(receiver)


def _fill(pump, count):
    sender = pump.sender("/queue/q1", name="filler")
    for i in range(count):
        assert pump.send(sender, encode_message(i)).remote_state == Delivery.ACCEPTED


def test_retirement_takes_effect_on_commit(connect, queue):
    pump = connect()
    _fill(pump, 2)
    controller = Controller(pump)
    txn = controller.declare()
    receiver, got = _consume(pump, 2)
    assert len(got) == 2
    for delivery, _ in got:
        retire(pump, delivery, txn)
    assert queue.acquired_count == 2  # still acquired: nothing settled yet
    assert not got[0][0].settled
    assert controller.discharge(txn, False).remote_state == Delivery.ACCEPTED
    assert queue.acquired_count == queue.message_count == 0
    assert all(delivery.settled for delivery, _ in got)


def _retired_one(connect, settle: bool = False) -> tuple[Amqp10Pump, Controller, bytes, Any, Delivery, bytes]:
    """A connection that took the one message of ``q1`` and retired it (accepted) in a
    declared transaction."""
    pump = connect()
    _fill(pump, 1)
    controller = Controller(pump)
    txn = controller.declare()
    receiver, [(delivery, data)] = _consume(pump, 1)
    retire(pump, delivery, txn, settle=settle)
    return pump, controller, txn, receiver, delivery, data


def test_rollback_leaves_retired_deliveries_acquired_for_the_client(connect, queue):
    pump, controller, txn, receiver, delivery, data = _retired_one(connect)
    assert controller.discharge(txn, True).remote_state == Delivery.ACCEPTED
    assert queue.acquired_count == 1 and not delivery.settled
    # the client settles it anew (as proton's client releases after an abort)
    pump.settle(delivery, Delivery.ACCEPTED)
    assert queue.acquired_count == queue.message_count == 0


def test_rollback_releases_a_delivery_the_client_settled(connect, queue):
    pump, controller, txn, receiver, delivery, data = _retired_one(connect, settle=True)
    assert controller.discharge(txn, True).remote_state == Delivery.ACCEPTED
    receiver.flow(1)
    pump.pump()
    [(again, data2)] = pump.take(receiver)
    assert decode_message(data2).body == decode_message(data).body == 0


def test_a_detached_consumer_makes_the_commit_roll_back(connect, queue):
    pump, controller, txn, receiver, delivery, _ = _retired_one(connect)
    receiver.close()
    pump.pump()
    answer = controller.discharge(txn, False)
    assert answer.remote_state == Delivery.REJECTED
    assert answer.remote.condition.name == "amqp:transaction:rollback"
    assert queue.message_count == 1


def test_a_retirement_with_an_unknown_txn_id_detaches_the_link(connect, queue):
    pump = connect()
    _fill(pump, 1)
    receiver, [(delivery, _)] = _consume(pump, 1)
    retire(pump, delivery, b"txn:9")
    assert receiver.remote_condition.name == "amqp:transaction:unknown-id"
    assert queue.message_count == 1


def test_connection_loss_rolls_back(connect, broker, queue):
    pump, controller, txn, receiver, delivery, _ = _retired_one(connect)
    post(pump, pump.sender("/queue/q1", name="txn-sender"), txn, "late")
    pump.engine.receive_eof()
    assert queue.message_count == 1
    assert queue.ready.count == 1  # the retired delivery is back, the post gone


def test_distributed_declare_is_refused(connect):
    pump = connect()
    controller = Controller(pump)
    answer = controller.control("amqp:declare:list", [b"global"])
    assert answer.remote_state == Delivery.REJECTED
    assert answer.remote.condition.name == "amqp:not-implemented"


def test_a_control_message_that_is_neither_is_rejected(connect):
    pump = connect()
    controller = Controller(pump)
    answer = pump.send(controller.link, encode_message("hello"))
    assert answer.remote_state == Delivery.REJECTED
    assert answer.remote.condition.name == "amqp:decode-error"


def test_transactional_acquisition_is_refused(connect):
    pump = connect()
    session = pump.session()
    link = session.receiver("acq")
    link.source.address = "/queue/q1"
    link.properties = {symbol("txn-id"): b"txn:1"}
    link.open()
    pump.pump()
    assert link.remote_condition.name == "amqp:not-implemented"
    assert "txn-id" in link.remote_condition.description
