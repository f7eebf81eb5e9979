"""BrokerChannel records message events in ``broker.ledger`` (publish, route, deliver, settle)."""
from __future__ import annotations

import pytest

from gateway.amqp091 import methods as m
from gateway.ledger.buffer import ROUTED_ROW_LENGTH
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


def _broker_with_feed():
    """A broker recording into a ``LedgerFeed`` (the writer process's feed)."""
    from gateway.ledger.feed import LedgerFeed

    broker = make_broker()
    feed = LedgerFeed(container_id="gw")
    broker.use_ledger(feed)
    return broker, feed


def test_a_delivery_refers_by_gateway_id_to_a_publish_row_already_shipped():
    """With the writer process (``LedgerFeed``), a publish row that went out in an
    earlier frame is referred to by its gateway id, and the writer still writes the
    delivery with the publish's fields."""
    from gateway.ledger.batches import BatchReader
    from gateway.ledger.encoding import RowEncoder

    broker, feed = _broker_with_feed()
    client = BrokerClient(broker)
    client.open(1)
    client.declare(1, "q1")
    frames = [feed.take_frame(100.0)]  # what the writer process has been sent up to here
    client.publish(1, "", "q1", b"hello")
    frames.append(feed.take_frame(100.5))
    _consume(client)
    [(_, rows)] = BatchReader().feed(feed.take_frame(100.6))
    [delivered] = [row for row in rows if len(row) == 5]
    assert type(delivered[2]) is int, "the key went out with the publish"
    encoder = RowEncoder("gw")
    written = b"".join(encoder.encode(rows)[0] for _, rows in BatchReader().feed(
        b"".join(frames)) + [(None, rows)])
    import json
    [line] = [json.loads(x) for x in written.splitlines() if b'"delivered"' in x]
    assert (line["exchange"], line["routing_key"], line["proto_in"], line["size"]) == \
        ("", "q1", "0-9-1", 5)
    feed.forget_taken()  # a new writer process: full keys again
    client.call(1, m.BasicRecover(requeue=True))
    [(_, rows)] = BatchReader().feed(feed.take_frame(100.7))
    assert [type(row[2]) for row in rows if len(row) == 5] == [tuple]


def test_a_multiple_ack_is_one_settled_many_row():
    """The settlements of a multiple ack go in one row (``buffer``'s settled-many row),
    written as one settled record for each delivery; a single ack keeps a row of its own."""
    from tests.support.ledger_shipping import ShippedLedger

    broker, feed = _broker_with_feed()
    writer = ShippedLedger(feed)
    client = BrokerClient(broker)
    client.open(1)
    client.declare(1, "q1")
    _consume(client)
    for _ in range(4):
        client.publish(1, "", "q1")
    client.call(1, m.BasicAck(delivery_tag=3, multiple=True))
    client.call(1, m.BasicAck(delivery_tag=4))
    settled_rows = [row for row in feed.rows if row is not None and len(row) in (3, 4)]
    assert [len(row) for row in settled_rows] == [3, 4]
    assert len(settled_rows[0][1]) == 3
    writer.ship(1000.1)
    settled = writer.of("settled")
    assert [x["outcome"] for x in settled] == ["accepted"] * 4
    assert [x["gateway_id"] for x in settled] == [x["gateway_id"] for x in writer.of("delivered")]


def test_an_ack_long_after_its_delivery_keeps_the_messages_fields():
    """The delivered row referred to the publish row by gateway id; seconds later the
    writer process has forgotten that row, so the settled row carries the message's key
    itself, and the settlement keeps its size, protocol and latency from receipt."""
    from tests.support.ledger_shipping import ShippedLedger

    broker, feed = _broker_with_feed()
    writer = ShippedLedger(feed)
    consumer = BrokerClient(broker, now=1000.0)
    consumer.open(1)
    consumer.declare(1, "q1")
    _consume(consumer)
    publisher = BrokerClient(broker, now=1000.0)
    publisher.open(1)
    publisher.declare(1, "q2")
    writer.ship(999.9)
    publisher.publish(1, "", "q1", b"hello")  # delivered at once, by gateway id
    writer.ship(1000.05)
    for now in (1002.0, 1004.0, 1006.0, 1008.0):  # later publishes: the writer moves on
        publisher.conn.now = now
        publisher.publish(1, "", "q2")
        writer.ship(now + 0.05)
    consumer.conn.now = 1008.5
    consumer.call(1, m.BasicAck(delivery_tag=1))
    writer.ship(1008.6)
    [delivered], [settled] = writer.of("delivered"), writer.of("settled")
    assert (settled["proto_in"], settled["size"], settled["latency_us"], settled["outcome"]) == \
        ("0-9-1", 5, 8_500_000, "accepted")
    assert settled["gateway_id"] == delivered["gateway_id"] and delivered["size"] == 5


def test_a_delivery_made_while_routing_refers_to_the_publish_row_before_it():
    """A waiting consumer gets the message while its publish is routed: the publish row's
    place is taken before routing, so the delivery refers to it by gateway id and comes
    after it; a publish that routing refuses leaves its place empty."""
    from gateway.ledger.encoding import RowEncoder

    broker, feed = _broker_with_feed()
    client = BrokerClient(broker)
    client.open(1)
    client.declare(1, "q1")
    _consume(client)
    client.publish(1, "", "q1", b"hello")
    client.publish(1, "no-such-exchange", "k")  # 404: the channel closes and releases
    publish, delivered, empty, refused, released = feed.rows
    assert len(publish) == ROUTED_ROW_LENGTH and publish[-1] == ("q1",)  # a routed row
    assert delivered[2] == publish[5] and type(delivered[2]) is int
    assert empty is None and refused[1] == "received>refused" and released[1] is delivered
    import json
    written = [json.loads(x) for x in RowEncoder("gw").encode(feed.take())[0].splitlines()]
    assert [r["event"] for r in written] == ["received", "routed", "delivered", "received",
                                             "refused", "settled"]
    assert (written[2]["exchange"], written[2]["routing_key"], written[2]["size"],
            written[2]["gateway_id"]) == ("", "q1", 5, written[0]["gateway_id"])


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
