"""Global addresses ``node@container`` naming this gateway resolve to the local node."""
from __future__ import annotations

import pika
import pytest
from proton import Message

from tests.support.cross_protocol_clients import pika_channel, pika_get, proton_connection, unique
from tests.support.gateway_process import default_config, make_gateway

pytestmark = pytest.mark.integration

CONTAINER = "gw-global-test"


@pytest.fixture(scope="module")
def gw(request):

    g = make_gateway(config_text=default_config(extra=f"container_id: {CONTAINER}\n")).start()
    yield g
    g.stop()


def test_amqp091_publish_to_default_exchange_with_node_at_us(gw):
    conn, ch = pika_channel(gw)
    try:
        q = unique("orders")
        ch.queue_declare(q)
        ch.basic_publish("", f"{q}@{CONTAINER}", b"to the local node")
        method, props, body = pika_get(ch, q)
        assert body == b"to the local node" and method.routing_key == f"{q}@{CONTAINER}"
    finally:
        conn.close()


def test_amqp091_node_at_another_container_is_unroutable(gw):
    conn, ch = pika_channel(gw)
    try:
        ch.confirm_delivery()
        q = unique("orders")
        ch.queue_declare(q)
        with pytest.raises(pika.exceptions.UnroutableError):
            ch.basic_publish("", f"{q}@elsewhere", b"x", mandatory=True)
    finally:
        conn.close()


def test_amqp10_target_node_at_us_reaches_the_queue(gw):
    conn, ch = pika_channel(gw)
    q = unique("orders")
    ch.queue_declare(q)
    c = proton_connection(gw)
    try:
        sender = c.create_sender(f"{q}@{CONTAINER}")
        sender.send(Message(body=b"from 1.0", inferred=True))
        method, props, body = pika_get(ch, q)
        assert body == b"from 1.0"
    finally:
        c.close()
        conn.close()


def test_amqp091_reply_to_node_at_us_reaches_the_reply_queue_from_amqp10(gw):
    """A 0-9-1 client names its reply queue globally (``q@us``): the 1.0 service sees that
    address as it is (not ``/queue/q@us``, which would name, and declare, another local
    queue) and its answer reaches the reply queue."""
    conn, ch = pika_channel(gw)
    service, replies = unique("svc"), unique("replies")
    ch.queue_declare(service)
    ch.queue_declare(replies)
    c = proton_connection(gw)
    try:
        ch.basic_publish("", service, b"question",
                         pika.BasicProperties(reply_to=f"{replies}@{CONTAINER}", correlation_id="c-1"))
        receiver = c.create_receiver(f"/queue/{service}", credit=1)
        request = receiver.receive(timeout=10)
        receiver.accept()
        assert request.reply_to == f"{replies}@{CONTAINER}"
        c.create_sender(request.reply_to).send(
            Message(body=b"answer", inferred=True, correlation_id=request.correlation_id))
        method, props, body = pika_get(ch, replies)
        assert body == b"answer" and props.correlation_id == "c-1"
    finally:
        c.close()
        conn.close()
