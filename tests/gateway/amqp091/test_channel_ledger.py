"""BrokerChannel records message events in ``broker.ledger`` (publish, route, deliver, settle)."""
from __future__ import annotations

import pytest

from gateway.amqp091 import methods as m
from tests.support.broker_channel_driver import BrokerClient, make_broker
from tests.support.ledger_capture import LedgerCapture
from translators.basic_properties import BasicProperties


@pytest.fixture
def ledger():
    return LedgerCapture()


@pytest.fixture
def broker(ledger):
    broker = make_broker()
    broker.use_ledger(ledger)
    return broker


@pytest.fixture
def client(broker):
    c = BrokerClient(broker)
    c.open(1)
    c.declare(1, "q1")
    return c


def _consume(client, *, no_ack=False, queue="q1"):
    client.call(1, m.BasicConsume(queue=queue, consumer_tag="c1", no_ack=no_ack))


def test_routed_publish_is_received_then_routed(client, ledger):
    props = BasicProperties(message_id="m-1", correlation_id="c-1")
    client.publish(1, "", "q1", b"hello", properties=props)
    assert ledger.kinds() == ["received", "routed"]
    received, routed = ledger.events
    assert received["gateway_id"] and received["gateway_id"] == routed["gateway_id"]
    assert (received["proto_in"].value, received["vhost"], received["user"], received["link"]) == \
        ("0-9-1", "/", "guest", 1)
    assert (received["exchange"], received["routing_key"], received["size"]) == ("", "q1", 5)
    assert (received["message_id"], received["correlation_id"]) == ("m-1", "c-1")
    assert routed["routed_to"] == ("q1",)


def test_unroutable_and_returned(client, ledger):
    client.publish(1, "amq.direct", "nowhere")
    client.publish(1, "amq.direct", "nowhere", mandatory=True)
    assert ledger.kinds() == ["received", "unroutable", "received", "returned"]
    assert ledger.of("returned")[0]["reason"] == "NO_ROUTE"


def test_unknown_exchange_is_received_then_refused(client, ledger):
    client.publish(1, "no-such-exchange", "k")
    assert ledger.kinds() == ["received", "refused"]
    refused = ledger.of("refused")[0]
    assert refused["gateway_id"] == ledger.of("received")[0]["gateway_id"]
    assert "no-such-exchange" in refused["reason"]


def test_refused_before_receipt_has_no_gateway_id(broker, ledger):
    bob = BrokerClient(broker, user="bob")
    bob.open(1)
    bob.publish(1, "amq.topic", "k")
    assert ledger.kinds() == ["refused"]
    refused = ledger.events[0]
    assert refused["gateway_id"] is None and "ACCESS_REFUSED" in refused["reason"]
    assert refused["user"] == "bob"


def test_bad_user_id_is_refused(client, ledger):
    client.publish(1, "", "q1", properties=BasicProperties(user_id="mallory"))
    assert ledger.kinds() == ["refused"]
    assert "user_id" in ledger.events[0]["reason"]


def test_deliver_and_ack_settle_accepted_with_receive_time(client, ledger):
    client.publish(1, "", "q1", b"x")
    _consume(client)
    client.call(1, m.BasicAck(delivery_tag=1))
    assert ledger.kinds() == ["received", "routed", "delivered", "settled"]
    delivered, settled = ledger.of("delivered")[0], ledger.of("settled")[0]
    assert (delivered["proto_in"].value, delivered["proto_out"].value) == ("0-9-1", "0-9-1")
    assert (delivered["queue"], delivered["delivery_count"]) == ("q1", 0)
    assert settled["outcome"].value == "accepted"
    assert settled["received_at"] == 1000.0


@pytest.mark.parametrize("method, outcome", [
    (m.BasicReject(delivery_tag=1, requeue=False), "rejected"),
    (m.BasicNack(delivery_tag=1, multiple=False, requeue=False), "rejected"),
])
def test_reject_and_nack_without_requeue_are_rejected(client, ledger, method, outcome):
    client.publish(1, "", "q1")
    _consume(client)
    client.call(1, method)
    assert ledger.of("settled")[0]["outcome"].value == outcome


def test_requeue_is_released_then_delivered_again(client, ledger):
    client.publish(1, "", "q1")
    _consume(client)
    client.call(1, m.BasicReject(delivery_tag=1, requeue=True))
    assert ledger.kinds()[2:] == ["delivered", "settled", "delivered"]
    assert ledger.of("settled")[0]["outcome"].value == "released"
    assert ledger.of("delivered")[1]["delivery_count"] == 1


def test_no_ack_delivery_settles_at_once(client, ledger):
    client.publish(1, "", "q1")
    _consume(client, no_ack=True)
    assert ledger.kinds()[2:] == ["delivered", "settled"]
    assert ledger.of("settled")[0]["outcome"].value == "accepted"


def test_basic_get_is_a_delivery(client, ledger):
    client.publish(1, "", "q1")
    client.publish(1, "", "q1")
    client.call(1, m.BasicGet(queue="q1", no_ack=True))
    client.call(1, m.BasicGet(queue="q1", no_ack=False))
    client.call(1, m.BasicAck(delivery_tag=2))
    assert ledger.kinds()[4:] == ["delivered", "settled", "delivered", "settled"]
    assert [e["queue"] for e in ledger.of("delivered")] == ["q1", "q1"]


def test_channel_close_releases_unacked(client, ledger):
    client.publish(1, "", "q1")
    _consume(client)
    client.call(1, m.ChannelClose(reply_code=200, reply_text="bye", class_id=0, method_id=0))
    settled = ledger.of("settled")
    assert len(settled) == 1
    assert (settled[0]["outcome"].value, settled[0]["reason"]) == ("released", "channel closed")


def test_transaction_receives_at_publish_and_routes_at_commit(client, ledger):
    client.call(1, m.TxSelect())
    client.publish(1, "", "q1")
    assert ledger.kinds() == ["received"]
    client.call(1, m.TxCommit())
    assert ledger.kinds() == ["received", "routed"]


def test_no_ledger_records_nothing_and_still_works():
    broker = make_broker()
    client = BrokerClient(broker)
    client.open(1)
    client.declare(1, "q1")
    client.publish(1, "", "q1")
    assert broker.vhost("/").queue("q1").message_count == 1


def _broker_with_ledger():
    """A broker recording into a ``Ledger`` whose lines the test takes (as the writer gets them)."""
    from gateway.ledger import Ledger

    broker = make_broker()
    ledger = Ledger(container_id="gw")
    broker.use_ledger(ledger)
    return broker, ledger


def test_a_delivery_shipped_after_its_publish_is_written_with_the_publishs_fields():
    """The publish's record went to the writer in an earlier chunk than its delivery's:
    the delivery still gets the publish's fields (the reader joins them by gateway id)."""
    from tests.support.ledger_files import events_of_lines

    broker, ledger = _broker_with_ledger()
    client = BrokerClient(broker)
    client.open(1)
    client.declare(1, "q1")
    client.publish(1, "", "q1", b"hello")
    shipped = ledger.take_lines()
    _consume(client)
    later = ledger.take_lines()
    assert later.count(b"\n") == 1 and later.startswith(b'["d",')  # the delivery alone
    [line] = [x for x in events_of_lines(shipped + later) if x["event"] == "delivered"]
    assert (line["exchange"], line["routing_key"], line["proto_in"], line["size"]) == \
        ("", "q1", "0-9-1", 5)


def test_a_multiple_ack_settles_each_delivery():
    """The settlements of a multiple ack: one settled record for each delivery."""
    from tests.support.ledger_files import events_of_lines

    broker, ledger = _broker_with_ledger()
    client = BrokerClient(broker)
    client.open(1)
    client.declare(1, "q1")
    _consume(client)
    for _ in range(4):
        client.publish(1, "", "q1")
    client.call(1, m.BasicAck(delivery_tag=3, multiple=True))
    client.call(1, m.BasicAck(delivery_tag=4))
    written = events_of_lines(ledger.take_lines(1000))
    settled = [x for x in written if x["event"] == "settled"]
    assert [x["outcome"] for x in settled] == ["accepted"] * 4
    assert [x["gateway_id"] for x in settled] == \
        [x["gateway_id"] for x in written if x["event"] == "delivered"]


def test_an_ack_long_after_its_delivery_keeps_the_messages_fields():
    """The settlement is recorded seconds after the delivery, while other messages flow
    and their records are shipped: it keeps its message's size, protocol and latency from
    receipt (v1 lost them once its writer had let the publish go)."""
    from tests.support.ledger_files import events_of_lines

    broker, ledger = _broker_with_ledger()
    consumer = BrokerClient(broker, now=1000.0)
    consumer.open(1)
    consumer.declare(1, "q1")
    _consume(consumer)
    publisher = BrokerClient(broker, now=1000.0)
    publisher.open(1)
    publisher.declare(1, "q2")
    publisher.publish(1, "", "q1", b"hello")  # delivered at once
    shipped = ledger.take_lines()
    for now in (1002.0, 1004.0, 1006.0, 1008.0):  # later publishes
        publisher.conn.now = now
        publisher.publish(1, "", "q2")
        shipped += ledger.take_lines()
    consumer.conn.now = 1008.5
    consumer.call(1, m.BasicAck(delivery_tag=1))
    written = events_of_lines(shipped + ledger.take_lines())
    [delivered] = [x for x in written if x["event"] == "delivered"]
    [settled] = [x for x in written if x["event"] == "settled"]
    assert (settled["proto_in"], settled["size"], settled["latency_us"], settled["outcome"]) == \
        ("0-9-1", 5, 8_500_000, "accepted")
    assert settled["gateway_id"] == delivered["gateway_id"] and delivered["size"] == 5


def test_a_delivery_made_while_routing_has_the_publishs_fields():
    """A waiting consumer gets the message while its publish is routed (its record comes
    before the publish's): it still has the publish's fields; a publish that routing
    refuses is received and refused, and delivers nothing."""
    from tests.support.ledger_files import events_of_lines

    broker, ledger = _broker_with_ledger()
    client = BrokerClient(broker)
    client.open(1)
    client.declare(1, "q1")
    _consume(client)
    client.publish(1, "", "q1", b"hello")
    client.publish(1, "no-such-exchange", "k")  # 404: the channel closes and releases
    written = events_of_lines(ledger.take_lines())
    assert sorted(r["event"] for r in written) == sorted(
        ["received", "routed", "delivered", "received", "refused", "settled"])
    [delivered] = [r for r in written if r["event"] == "delivered"]
    [received, _] = [r for r in written if r["event"] == "received"]
    assert (delivered["exchange"], delivered["routing_key"], delivered["size"],
            delivered["gateway_id"]) == ("", "q1", 5, received["gateway_id"])
    [refused] = [r for r in written if r["event"] == "refused"]
    assert refused["gateway_id"] != received["gateway_id"] and "no-such-exchange" in refused["reason"]


@pytest.mark.parametrize("no_ack", [False, True])
def test_a_delivery_caused_by_another_connection_has_the_publish_time(broker, ledger, no_ack):
    """A consumer's connection last heard from its client at 10.0; a publish at 50.0 on
    another connection is delivered to it at 50.0, not at 10.0 (before its receipt)."""
    consumer = BrokerClient(broker, now=10.0)
    consumer.open(1)
    consumer.declare(1, "q1")
    _consume(consumer, no_ack=no_ack)
    publisher = BrokerClient(broker, now=50.0)
    publisher.open(1)
    publisher.publish(1, "", "q1")
    # (the delivery happens while the publish is routed: it is recorded first)
    assert sorted((e.event, e.now) for e in ledger.events) == sorted([
        ("received", 50.0), ("routed", 50.0), ("delivered", 50.0)] + (
        [("settled", 50.0)] if no_ack else []))
