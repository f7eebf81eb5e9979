"""max-message-size over a real socket: the gateway announces its limit on every attach
and never sends a message larger than what a proton receiver said it accepts."""
from __future__ import annotations

import pytest
from proton import Message
from proton.utils import LinkDetached

from tests.support.amqp10_link_options import MaxMessageSize
from tests.support.cross_protocol_clients import TIMEOUT, unique

pytestmark = pytest.mark.integration

GATEWAY_LIMIT = 134217728  # limits.max_message_size of the test configuration


def test_every_attach_announces_the_gateway_limit(channel, amqp10):
    queue = unique("announce")
    channel.queue_declare(queue, auto_delete=False)
    try:
        sender = amqp10.create_sender(f"/queue/{queue}")
        receiver = amqp10.create_receiver(f"/queue/{queue}", credit=0)
        assert sender.link.remote_max_message_size == GATEWAY_LIMIT
        assert receiver.link.remote_max_message_size == GATEWAY_LIMIT
    finally:
        channel.queue_delete(queue)


def test_message_above_the_receivers_limit_detaches_it_and_stays_in_the_queue(channel, amqp10):
    queue = unique("too-big")
    channel.queue_declare(queue, auto_delete=False)
    try:
        sender = amqp10.create_sender(f"/queue/{queue}")
        sender.send(Message(body="small"))
        sender.send(Message(body="x" * 5000))
        limited = amqp10.create_receiver(f"/queue/{queue}", credit=0, name="limited",
                                         options=MaxMessageSize(1000))
        assert limited.receive(timeout=TIMEOUT).body == "small"  # receive gives credit 1
        limited.accept()
        with pytest.raises(LinkDetached) as info:
            limited.receive(timeout=TIMEOUT)
        condition = info.value.link.remote_condition
        assert condition.name == "amqp:link:message-size-exceeded"
        assert condition.description.startswith("message size (")
        assert condition.description.endswith(" bytes) > maximum message size (1000 bytes)")
        assert channel.queue_declare(queue, passive=True).method.message_count == 1
        other = amqp10.create_receiver(f"/queue/{queue}", credit=1, name="unlimited")
        got = other.receive(timeout=TIMEOUT)
        # never sent before, so still its first acquisition
        assert (got.body, got.delivery_count, got.first_acquirer) == ("x" * 5000, 0, True)
        other.accept()
    finally:
        channel.queue_delete(queue)
