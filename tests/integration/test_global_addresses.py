"""Global addresses ``node@container`` naming this gateway resolve to the local node."""
from __future__ import annotations

import pika
import pytest
from proton import Message

from tests.support.cross_protocol_clients import pika_channel, pika_get, proton_connection, unique
from tests.support.gateway_process import default_config

pytestmark = pytest.mark.integration

CONTAINER = "gw-global-test"


@pytest.fixture(scope="module")
def gw(request):
    from tests.support.gateway_process import GatewayProcess

    g = GatewayProcess(config_text=default_config(extra=f"container_id: {CONTAINER}\n")).start()
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
