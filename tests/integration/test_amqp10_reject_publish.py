"""A 1.0 sender whose message a full ``reject-publish`` queue refuses hears it: the
transfer is settled ``rejected`` with ``amqp:resource-limit-exceeded`` naming the queue,
over a real socket with proton. (A fixed-key target stops the sender with credit
instead: ``test_amqp10_queue_capacity``; here the targets whose room is not known before
the message, and a byte limit that a large message overflows.) 0-9-1 keeps its nack."""
from __future__ import annotations

import pytest
from proton import Delivery, Message

from tests.support.cross_protocol_clients import TIMEOUT, unique

pytestmark = pytest.mark.integration


def _rejected(amqp10, sender, message):
    delivery = sender.link.send(message)
    amqp10.wait(lambda: delivery.remote_state != 0,
                timeout=TIMEOUT, msg="outcome")
    return delivery


@pytest.mark.parametrize("target", ["/exchange/amq.direct", "/queue"])
def test_subject_keyed_publish_to_a_full_queue_is_rejected_naming_it(channel, amqp10, target):
    queue = unique("full")
    channel.queue_declare(queue, arguments={"x-max-length": 2, "x-overflow": "reject-publish"})
    channel.queue_bind(queue, "amq.direct", routing_key=queue)
    try:
        sender = amqp10.create_sender(target)
        for i in range(2):
            assert sender.send(Message(body=i, subject=queue)).remote_state == Delivery.ACCEPTED
        third = _rejected(amqp10, sender, Message(body=2, subject=queue))
        assert third.remote_state == Delivery.REJECTED
        condition = third.remote.condition
        assert condition.name == "amqp:resource-limit-exceeded"
        assert f"'{queue}'" in condition.description
        assert channel.queue_declare(queue, passive=True).method.message_count == 2
    finally:
        channel.queue_delete(queue)


def test_message_over_the_byte_limit_is_rejected_naming_the_queue(channel, amqp10):
    queue = unique("bytes")
    channel.queue_declare(queue, arguments={"x-max-length-bytes": 1000,
                                            "x-overflow": "reject-publish"})
    try:
        sender = amqp10.create_sender(f"/queue/{queue}")
        assert sender.send(Message(body=b"x" * 100)).remote_state == Delivery.ACCEPTED
        big = _rejected(amqp10, sender, Message(body=b"y" * 5000))
        assert big.remote_state == Delivery.REJECTED
        assert big.remote.condition.name == "amqp:resource-limit-exceeded"
        assert f"'{queue}'" in big.remote.condition.description
        assert channel.queue_declare(queue, passive=True).method.message_count == 1
        # the link goes on: a small one still fits
        assert sender.send(Message(body=b"z" * 100)).remote_state == Delivery.ACCEPTED
    finally:
        channel.queue_delete(queue)


def test_amqp091_publisher_with_confirms_is_nacked(channel):
    queue = unique("nack")
    channel.queue_declare(queue, arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    try:
        channel.confirm_delivery()
        channel.basic_publish("", queue, b"one")
        import pika.exceptions
        with pytest.raises(pika.exceptions.NackError):
            channel.basic_publish("", queue, b"two")
    finally:
        channel.queue_delete(queue)
