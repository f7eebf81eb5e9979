"""Routing across protocols with real clients (issue 5): 1.0 targets reach 0-9-1
consumers bound accordingly, 0-9-1 publishes reach 1.0 sources, topic and headers
exchanges are reached from 1.0, and expiry and priority set by either side are honoured.
"""
from __future__ import annotations

import time

import pika
import pytest
from proton import Delivery, Message, Timeout, int32

from tests.support.cross_protocol_clients import (TIMEOUT, capture_raw_amqp10, pika_channel, pika_get,
                                                  proton_connection, unique)


@pytest.fixture(autouse=True)
def stable_bodies(monkeypatch):
    """proton's decoded binary body is a view into a buffer the next decode reuses; the
    capture hook copies it (several messages are in flight here)."""
    capture_raw_amqp10(monkeypatch)


@pytest.fixture
def entities(channel):
    """Declare queues/exchanges by name; they are deleted after the test."""
    queues: list[str] = []
    exchanges: list[str] = []

    def queue(arguments=None, bind=()) -> str:
        name = unique("rq")
        channel.queue_declare(name, arguments=arguments)
        for exchange, key, *args in bind:
            channel.queue_bind(name, exchange, key, arguments=args[0] if args else None)
        queues.append(name)
        return name

    def exchange(kind: str) -> str:
        name = unique("rx")
        channel.exchange_declare(name, kind)
        exchanges.append(name)
        return name

    yield queue, exchange
    if channel.is_open:
        for name in queues:
            channel.queue_delete(name)
        for name in exchanges:
            channel.exchange_delete(name)


def _nothing_on(channel, queue: str, wait: float = 0.0) -> None:
    """``queue`` is empty. Every message sent before was settled (1.0: routed) or published
    on ``channel`` (0-9-1: processed before this basic.get), so nothing is on its way;
    ``wait`` is only for time to pass (a TTL)."""
    if wait:
        channel.connection.sleep(wait)
    method, _, body = channel.basic_get(queue, auto_ack=True)
    assert method is None, body


def _text(body) -> str:
    return bytes(body).decode() if isinstance(body, (bytes, memoryview)) else body


# --------------------------------------------------------------- 1.0 sender -> 0-9-1

@pytest.mark.parametrize("form", [
    "/exchange/{x}/{rk}", "/exchange/{x}+subject", "/exchanges/{x}/{rk}",
    "/topic/{rk}", "/queue/{q}", "{q}", "/queues/{q}", "/amq/queue/{q}", "/queue+subject",
])
def test_amqp10_target_reaches_amqp091_consumer(form, channel, amqp10, entities):
    queue, exchange = entities
    x = exchange("direct")
    rk = unique("key")
    q = queue(bind=[(x, rk), ("amq.topic", rk)])
    other = queue(bind=[(x, rk + ".other"), ("amq.topic", rk + ".other")])
    address, _, subject = form.partition("+")
    subject_value = {"/exchange/{x}": rk, "/exchanges/{x}": rk, "/queue": q}.get(address)
    sender = amqp10.create_sender(address.format(x=x, rk=rk, q=q))
    sender.send(Message(body=b"routed " + form.encode(), inferred=True, subject=subject_value))
    method, _, body = pika_get(channel, q)
    assert body == b"routed " + form.encode()
    if form.startswith("/exchange"):
        assert (method.exchange, method.routing_key) == (x, rk)
    elif form.startswith("/topic"):
        assert (method.exchange, method.routing_key) == ("amq.topic", rk)
    else:
        assert (method.exchange, method.routing_key) == ("", q)
    _nothing_on(channel, other)


def test_amqp10_topic_patterns_reach_amqp091_bindings(channel, amqp10, entities):
    queue, exchange = entities
    x = exchange("topic")
    star = queue(bind=[(x, "stock.*.nyse")])
    hash_ = queue(bind=[(x, "stock.#")])
    exact = queue(bind=[(x, "stock.ibm.nyse")])
    sender = amqp10.create_sender(f"/exchange/{x}")
    for key in ("stock.ibm.nyse", "stock.msft.lse", "stock"):
        sender.send(Message(body=key, subject=key))
    unroutable = sender.send(Message(body="bond", subject="bond.ibm.nyse"), error_states=[])
    assert unroutable.remote_state == Delivery.ACCEPTED  # no queue took it: dropped

    def drain(q: str) -> list[bytes]:
        got = []
        while True:
            method, _, body = channel.basic_get(q, auto_ack=True)
            if method is None:
                return got
            got.append(method.routing_key)

    assert drain(star) == ["stock.ibm.nyse"]
    assert drain(hash_) == ["stock.ibm.nyse", "stock.msft.lse", "stock"]
    assert drain(exact) == ["stock.ibm.nyse"]


def test_amqp10_topic_address_form_with_wildcard_bindings(channel, amqp10, entities):
    queue, _ = entities
    word = unique("t")
    q = queue(bind=[("amq.topic", f"{word}.*.created")])
    amqp10.create_sender(f"/topic/{word}.order.created").send(Message(body="yes"))
    unroutable = amqp10.create_sender(f"/topic/{word}.order.deleted").send(Message(body="no"), error_states=[])
    assert unroutable.remote_state == Delivery.ACCEPTED  # no queue took it: dropped
    method, props, body = pika_get(channel, q)
    assert method.routing_key == f"{word}.order.created" and props.type == "amqp-1.0"
    _nothing_on(channel, q)


def test_headers_exchange_matches_amqp10_application_properties(channel, amqp10, entities):
    """A 1.0 message's application-properties are the headers a headers exchange matches
    (with their values: the 1.0 string "eu" matches the 0-9-1 binding's "eu", int 1 the 1).
    The routing key plays no part: RabbitMQ 4's ``/exchanges/X`` (empty key) and a
    ``/exchange/X/K`` target reach the same bindings."""
    queue, exchange = entities
    x = exchange("headers")
    all_q = queue(bind=[(x, "", {"x-match": "all", "region": "eu", "tier": 1})])
    any_q = queue(bind=[(x, "", {"x-match": "any", "region": "eu", "urgent": True})])
    sender = amqp10.create_sender(f"/exchanges/{x}")
    sender.send(Message(body=b"both", inferred=True, properties={"region": "eu", "tier": int32(1)}))
    sender.send(Message(body=b"region-only", inferred=True, properties={"region": "eu", "tier": int32(2)}))
    amqp10.create_sender(f"/exchange/{x}/ignored").send(
        Message(body=b"urgent", inferred=True, properties={"urgent": True}))
    none = sender.send(Message(body=b"none", inferred=True, properties={"region": "us"}), error_states=[])
    assert none.remote_state == Delivery.ACCEPTED  # no queue took it: dropped

    def bodies(q: str) -> list[bytes]:
        got = []
        while (item := channel.basic_get(q, auto_ack=True))[0] is not None:
            got.append(item[2])
        return got

    assert bodies(all_q) == [b"both"]
    assert bodies(any_q) == [b"both", b"region-only", b"urgent"]


# --------------------------------------------------------------- 0-9-1 publish -> 1.0

@pytest.mark.parametrize("source", ["/queue/{q}", "{q}", "/queues/{q}", "/exchange/{x}/{rk}", "/topic/{rk}",
                                    "/exchanges/{x}/{rk}"])
def test_amqp091_publish_reaches_amqp10_source(source, channel, amqp10, entities):
    queue, exchange = entities
    x = exchange("direct")
    rk = unique("key")
    q = queue()
    receiver = amqp10.create_receiver(source.format(q=q, x=x, rk=rk), credit=1)
    if "{q}" in source:
        channel.basic_publish("", q, b"to queue")
    elif source.startswith("/topic"):
        channel.basic_publish("amq.topic", rk + ".no", b"not this one")
        channel.basic_publish("amq.topic", rk, b"to topic")
    else:
        channel.basic_publish(x, rk + "-other", b"not this one")
        channel.basic_publish(x, rk, b"to exchange")
    msg = receiver.receive(timeout=TIMEOUT)
    receiver.accept()
    assert bytes(msg.body) in (b"to queue", b"to topic", b"to exchange")
    with pytest.raises(Timeout):
        receiver.receive(timeout=0.3)
    receiver.close()


def test_amqp091_topic_pattern_source_from_amqp10(channel, amqp10):
    word = unique("w")
    receiver = amqp10.create_receiver(f"/topic/{word}.#", credit=10)
    for key in (f"{word}", f"{word}.a.b", f"other.{word}"):
        channel.basic_publish("amq.topic", key, key.encode())
    got = [bytes(receiver.receive(timeout=TIMEOUT).body) for _ in range(2)]
    receiver.accept()
    assert got == [word.encode(), f"{word}.a.b".encode()]
    with pytest.raises(Timeout):
        receiver.receive(timeout=0.3)
    receiver.close()


# --------------------------------------------------------------- expiry, either side

def test_amqp091_expiration_is_honoured_for_an_amqp10_consumer(channel, amqp10, entities):
    queue, _ = entities
    q = queue()
    channel.basic_publish("", q, b"short-lived", pika.BasicProperties(expiration="100"))
    channel.basic_publish("", q, b"long-lived", pika.BasicProperties(expiration="600000"))
    time.sleep(0.4)
    receiver = amqp10.create_receiver(f"/queue/{q}", credit=5)
    msg = receiver.receive(timeout=TIMEOUT)
    receiver.accept()
    assert bytes(msg.body) == b"long-lived" and msg.ttl == 600.0
    with pytest.raises(Timeout):
        receiver.receive(timeout=0.3)
    receiver.close()


def test_amqp10_ttl_is_honoured_for_an_amqp091_consumer(channel, amqp10, entities):
    queue, _ = entities
    q = queue()
    sender = amqp10.create_sender(f"/queue/{q}")
    sender.send(Message(body=b"short-lived", inferred=True, ttl=0.1))
    sender.send(Message(body=b"long-lived", inferred=True, ttl=600.0))
    time.sleep(0.4)
    _, props, body = pika_get(channel, q)
    assert body == b"long-lived" and props.expiration == "600000"
    _nothing_on(channel, q)


def test_amqp10_ttl_expires_while_waiting_in_a_queue_with_a_consumer_gone(channel, amqp10, entities):
    """The TTL keeps running after the publish: a message still in the queue when it expires
    is never delivered to a 0-9-1 consumer that comes later."""
    queue, _ = entities
    q = queue()
    amqp10.create_sender(f"/queue/{q}").send(Message(body=b"x", inferred=True, ttl=0.2))
    method, _, _ = channel.basic_get(q, auto_ack=False)
    assert method is not None
    channel.basic_nack(method.delivery_tag, requeue=True)
    _nothing_on(channel, q, wait=0.4)


# --------------------------------------------------------------- priority, either side

PRIORITIES = [1, 9, 5, 0, 7]


def test_amqp10_priorities_order_an_amqp091_consumer(channel, amqp10, entities):
    queue, _ = entities
    q = queue(arguments={"x-max-priority": 10})
    sender = amqp10.create_sender(f"/queue/{q}")
    for p in PRIORITIES:
        sender.send(Message(body=str(p).encode(), inferred=True, priority=p))
    got = [pika_get(channel, q)[2] for _ in PRIORITIES]
    assert got == [str(p).encode() for p in sorted(PRIORITIES, reverse=True)]


def test_amqp091_priorities_order_an_amqp10_consumer(channel, amqp10, entities):
    queue, _ = entities
    q = queue(arguments={"x-max-priority": 10})
    for p in PRIORITIES:
        channel.basic_publish("", q, str(p).encode(), pika.BasicProperties(priority=p))
    # a synchronous method after the publishes: they are all queued when it is answered
    assert channel.queue_declare(q, passive=True).method.message_count == len(PRIORITIES)
    receiver = amqp10.create_receiver(f"/queue/{q}", credit=len(PRIORITIES))
    got = []
    for _ in PRIORITIES:
        msg = receiver.receive(timeout=TIMEOUT)
        got.append((bytes(msg.body), msg.priority))
    receiver.accept()
    receiver.close()
    assert got == [(str(p).encode(), p) for p in sorted(PRIORITIES, reverse=True)]


def test_mixed_priorities_from_both_sides_share_one_order(channel, amqp10, entities):
    queue, _ = entities
    q = queue(arguments={"x-max-priority": 10})
    sender = amqp10.create_sender(f"/queue/{q}")
    sender.send(Message(body=b"10-low", inferred=True, priority=2))
    channel.basic_publish("", q, b"091-high", pika.BasicProperties(priority=8))
    sender.send(Message(body=b"10-mid", inferred=True, priority=5))
    channel.basic_publish("", q, b"091-none", pika.BasicProperties())
    got = [pika_get(channel, q)[2] for _ in range(4)]
    assert got == [b"091-high", b"10-mid", b"10-low", b"091-none"]
