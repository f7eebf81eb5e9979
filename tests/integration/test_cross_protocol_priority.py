"""Message priority in a priority queue (``x-max-priority``) across the protocols (issue
29, item 4): a 1.0 message whose header has no priority ranks 4, AMQP 1.0's default; a
0-9-1 message without the property ranks 0, as in RabbitMQ. Only the rank uses the
default: a 0-9-1 consumer of such a 1.0 message sees no priority property, and a 1.0
consumer reads the default from the absent field. Real clients: proton (1.0), pika."""
from __future__ import annotations

import pika
import pytest
from proton import Message

from tests.support.cross_protocol_clients import TIMEOUT, pika_get, unique


@pytest.fixture
def priority_queue(channel):
    name = unique("prio")
    channel.queue_declare(name, arguments={"x-max-priority": 10})
    yield name
    if channel.is_open:
        channel.queue_delete(name)


def test_1_0_messages_without_priority_rank_4_and_0_9_1_ones_0(channel, amqp10, priority_queue):
    q = priority_queue
    sender = amqp10.create_sender(f"/queue/{q}")
    sender.send(Message(body=b"1.0 p2", priority=2, inferred=True))
    sender.send(Message(body=b"1.0 none", inferred=True))  # proton leaves the default (4) out of the header
    channel.basic_publish("", q, b"0-9-1 none", pika.BasicProperties())
    channel.basic_publish("", q, b"0-9-1 p3", pika.BasicProperties(priority=3))
    sender.send(Message(body=b"1.0 p6", priority=6, inferred=True))
    sender.send(Message(body=b"1.0 p0", priority=0, inferred=True))
    channel.basic_publish("", q, b"0-9-1 p5", pika.BasicProperties(priority=5))
    assert channel.queue_declare(q, passive=True).method.message_count == 7
    got = [pika_get(channel, q, timeout=TIMEOUT) for _ in range(7)]
    assert [(body, props.priority) for _, props, body in got] == [
        (b"1.0 p6", 6), (b"0-9-1 p5", 5), (b"1.0 none", None), (b"0-9-1 p3", 3), (b"1.0 p2", 2),
        (b"0-9-1 none", None), (b"1.0 p0", 0)]


def test_a_1_0_consumer_reads_the_default_and_the_ranks_hold(channel, amqp10, priority_queue):
    q = priority_queue
    channel.basic_publish("", q, b"0-9-1 none", pika.BasicProperties())
    sender = amqp10.create_sender(f"/queue/{q}")
    sender.send(Message(body=b"1.0 p3", priority=3, inferred=True))
    sender.send(Message(body=b"1.0 none", inferred=True))
    receiver = amqp10.create_receiver(f"/queue/{q}", credit=3)
    got = [receiver.receive(timeout=TIMEOUT) for _ in range(3)]
    receiver.accept()
    assert [(bytes(m.body), m.priority) for m in got] == [
        (b"1.0 none", 4), (b"1.0 p3", 3), (b"0-9-1 none", 4)]
