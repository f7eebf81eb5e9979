"""Consuming through the real gateway: deliveries, acks, nacks, rejects, prefetch, cancel."""
from __future__ import annotations

from tests.support.amqp091_clients import pika_connection, unique


def test_pika_publish_get_roundtrip(gateway):
    conn = pika_connection(gateway)
    try:
        ch = conn.channel()
        q = ch.queue_declare(unique("smoke"), exclusive=True).method.queue
        ch.confirm_delivery()
        ch.basic_publish("", q, b"hi")
        method, _props, body = ch.basic_get(q, auto_ack=True)
        assert body == b"hi" and method.routing_key == q
    finally:
        conn.close()
