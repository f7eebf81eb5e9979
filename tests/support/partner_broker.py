"""A partner's RabbitMQ for the forwarding tests: Debian's ``rabbitmq-server`` started
privately (``bench.reference.PrivateRabbit``) with a vhost and a user for org-a, and pika
helpers to set up and read its queues."""
from __future__ import annotations

from typing import Any

import pika

from bench.reference import PrivateRabbit

__all__ = ["PARTNER_VHOST", "PARTNER_USER", "PARTNER_PASSWORD", "start_partner", "partner_pika",
           "declare_bound_queue", "drain_queue"]

PARTNER_VHOST = "partner"
PARTNER_USER, PARTNER_PASSWORD = "org-a", "org-a-secret"


def start_partner(**kwargs: Any) -> PrivateRabbit:
    """A started node with vhost ``partner`` where ``org-a`` may do everything."""
    node = PrivateRabbit(**kwargs).start()
    node.ctl("add_vhost", PARTNER_VHOST)
    node.ctl("add_user", PARTNER_USER, PARTNER_PASSWORD)
    node.ctl("set_permissions", "-p", PARTNER_VHOST, PARTNER_USER, ".*", ".*", ".*")
    return node


def partner_pika(rabbit: PrivateRabbit) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters(
        host="127.0.0.1", port=rabbit.port, virtual_host=PARTNER_VHOST,
        credentials=pika.PlainCredentials(PARTNER_USER, PARTNER_PASSWORD), socket_timeout=10,
        blocked_connection_timeout=10))


def declare_bound_queue(rabbit: PrivateRabbit, queue: str, exchange: str = "in") -> None:
    """A durable, empty ``queue`` bound to the direct exchange ``exchange`` by its name."""
    with partner_pika(rabbit) as conn:
        ch = conn.channel()
        ch.exchange_declare(exchange, "direct", durable=True)
        ch.queue_declare(queue, durable=True)
        ch.queue_purge(queue)
        ch.queue_bind(queue, exchange, routing_key=queue)


def drain_queue(rabbit: PrivateRabbit, queue: str) -> list[tuple[Any, bytes]]:
    """Every message now in ``queue`` (properties, body), taken."""
    out = []
    with partner_pika(rabbit) as conn:
        ch = conn.channel()
        while True:
            method, props, body = ch.basic_get(queue, auto_ack=True)
            if method is None:
                return out
            out.append((props, body))
