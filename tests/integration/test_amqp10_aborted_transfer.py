"""An aborted multi-frame 1.0 transfer (proton's ``Delivery.abort()``) is discarded
cleanly over a real socket: no half message is queued, the broker's queued bytes come
back to what they were, and the link goes on (credit keeps flowing, the next message is
taken whole)."""
from __future__ import annotations

import re
import urllib.request

import pytest
from proton import Delivery, Message

from tests.support.cross_protocol_clients import TIMEOUT, unique

pytestmark = pytest.mark.integration

MIB = 1024 * 1024
_QUEUED = re.compile(r"^amqp_gateway_memory_queued_bytes(?:\{[^}]*\})? (\S+)$", re.M)


def _queued_bytes(gw) -> float:
    body = urllib.request.urlopen(f"http://127.0.0.1:{gw.metrics_port}{gw.metrics_path}",
                                  timeout=10).read().decode()
    return float(_QUEUED.search(body).group(1))


def _stream_then_abort(amqp10, sender, tag: bytes, encoded: bytes, sent: int) -> Delivery:
    """Send the first ``sent`` bytes of ``encoded`` (several frames), wait until proton
    has written them out, then abort the delivery."""
    delivery = sender.link.delivery(tag)
    sender.link.stream(encoded[:sent])
    session = sender.link.session
    amqp10.wait(lambda: session.outgoing_bytes == 0, timeout=TIMEOUT, msg="frames written")
    delivery.abort()
    amqp10.wait(lambda: session.outgoing_bytes == 0, timeout=TIMEOUT, msg="abort written")
    return delivery


def test_aborted_one_mib_transfer_is_discarded_and_the_link_goes_on(gateway, channel, amqp10):
    queue = unique("abort")
    channel.queue_declare(queue)
    try:
        before = _queued_bytes(gateway)
        sender = amqp10.create_sender(f"/queue/{queue}")
        amqp10.wait(lambda: sender.link.credit > 0, timeout=TIMEOUT, msg="credit")
        encoded = Message(body=b"a" * (2 * MIB)).encode()
        for i in range(3):  # a leak or a half message would show on repetition
            _stream_then_abort(amqp10, sender, b"aborted-%d" % i, encoded, MIB)
        # the link goes on: more messages than one credit window, each taken whole
        for i in range(300):
            assert sender.send(Message(body=f"after-{i}")).remote_state == Delivery.ACCEPTED
        assert channel.queue_declare(queue, passive=True).method.message_count == 300
        receiver = amqp10.create_receiver(f"/queue/{queue}", credit=10)
        first = receiver.receive(timeout=TIMEOUT)
        assert first.body == "after-0"
        receiver.accept()
        receiver.close()
        channel.queue_purge(queue)
        assert _queued_bytes(gateway) <= before + 1024
    finally:
        channel.queue_delete(queue)


def test_abort_before_any_byte_and_after_the_first_frame(channel, amqp10):
    queue = unique("abort-edge")
    channel.queue_declare(queue)
    try:
        sender = amqp10.create_sender(f"/queue/{queue}")
        amqp10.wait(lambda: sender.link.credit > 0, timeout=TIMEOUT, msg="credit")
        empty = sender.link.delivery(b"empty")
        empty.abort()
        _stream_then_abort(amqp10, sender, b"one-frame", Message(body=b"b" * 100).encode(), 50)
        assert sender.send(Message(body="whole")).remote_state == Delivery.ACCEPTED
        assert channel.queue_declare(queue, passive=True).method.message_count == 1
        receiver = amqp10.create_receiver(f"/queue/{queue}", credit=1)
        assert receiver.receive(timeout=TIMEOUT).body == "whole"
        receiver.accept()
    finally:
        channel.queue_delete(queue)
