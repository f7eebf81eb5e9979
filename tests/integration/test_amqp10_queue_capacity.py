"""A full queue stops a 1.0 sender over a real socket: link credit follows the room left
in a ``reject-publish`` queue (``x-max-length``), for ``/queue/Q`` and for an exchange
target whose binding leads to the queue; a ``drop-head`` queue never stops it."""
from __future__ import annotations

import pytest
from proton import Delivery, Message, Timeout

from tests.support.cross_protocol_clients import TIMEOUT, pika_get, unique

pytestmark = pytest.mark.integration

STALL = 1.0  # seconds a blocked send must stay unsettled


def _credit(amqp10, sender) -> int:
    amqp10.wait(lambda: sender.link.credit > 0, timeout=TIMEOUT, msg="credit")
    return sender.link.credit


@pytest.mark.parametrize("target", ["/queue/{q}", "/exchange/amq.direct/{q}"])
def test_full_queue_stops_the_sender_until_a_consumer_takes_one(channel, amqp10, target):
    queue = unique("five")
    channel.queue_declare(queue, arguments={"x-max-length": 5, "x-overflow": "reject-publish"})
    channel.queue_bind(queue, "amq.direct", routing_key=queue)
    try:
        sender = amqp10.create_sender(target.format(q=queue))
        assert _credit(amqp10, sender) == 5
        for i in range(5):
            sender.send(Message(body=i))
        assert sender.link.credit == 0
        sixth = sender.link.send(Message(body=5))  # waits in proton for credit
        with pytest.raises(Timeout):
            amqp10.wait(lambda: sixth.settled, timeout=STALL)
        assert not sixth.remote_state
        assert channel.queue_declare(queue, passive=True).method.message_count == 5
        pika_get(channel, queue)  # a consumer takes one ...
        amqp10.wait(lambda: sixth.settled, timeout=TIMEOUT)  # ... and the sixth goes
        assert sixth.remote_state == Delivery.ACCEPTED
        assert channel.queue_declare(queue, passive=True).method.message_count == 5
    finally:
        channel.queue_delete(queue)


def test_drop_head_queue_keeps_taking_and_keeps_the_newest(channel, amqp10):
    queue = unique("drop-head")
    channel.queue_declare(queue, arguments={"x-max-length": 5})
    try:
        sender = amqp10.create_sender(f"/queue/{queue}")
        assert _credit(amqp10, sender) > 5
        for i in range(10):
            assert sender.send(Message(body=i)).remote_state == Delivery.ACCEPTED
        assert channel.queue_declare(queue, passive=True).method.message_count == 5
        receiver = amqp10.create_receiver(f"/queue/{queue}", credit=10)
        assert [receiver.receive(timeout=TIMEOUT).body for _ in range(5)] == [5, 6, 7, 8, 9]
        receiver.accept()
    finally:
        channel.queue_delete(queue)
