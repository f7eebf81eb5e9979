"""A gateway forwarding to a partner's RabbitMQ (``kind: amqp091``), through
``amqp$transfer`` and through a static route (``shovels``).

Shown with real clients: a pika publisher on the gateway with routing key
``orders@partner`` reaches the partner's queue; a legacy publisher to an ordinary queue
that a shovel drains reaches it too, with its properties; while RabbitMQ is stopped the
gateway keeps taking (and confirming) messages into the outbox, and once it is back every
one arrives and the local queue is empty; a gateway killed (kill -9) while it sends a
backlog, its window grown past ``credit``, sends again after a restart what RabbitMQ had
not confirmed: every confirmed message arrives.
"""
from __future__ import annotations

import asyncio
import time

import pika
import pytest

from tests.support.confirmed_publisher import publish_confirmed
from tests.support.gateway_process import Gateway, default_config, make_gateway
from tests.support.partner_broker import (PARTNER_PASSWORD, PARTNER_USER, PARTNER_VHOST, declare_bound_queue,
                                          drain_queue)

pytestmark = pytest.mark.integration


def _gateway(rabbit, tmp_path, *, process: bool = False) -> Gateway:
    password = tmp_path / "partner.password"
    password.write_text(PARTNER_PASSWORD + "\n")
    extra = (f"container_id: org-a\nstate_dir: {tmp_path}\n"
             "forwarding:\n  remotes:\n"
             f"    - container: partner\n      host: 127.0.0.1\n      port: {rabbit.port}\n"
             f"      kind: amqp091\n      address: /exchange/in/{{node}}\n      vhost: {PARTNER_VHOST}\n"
             f"      user: {PARTNER_USER}\n      password_file: {password}\n      credit: 100\n"
             "      reconnect_initial: 0.2\n      reconnect_max: 1.0\n"
             "  shovels:\n    - name: orders-out\n      queue: outbound.orders\n"
             "      remote: partner\n      node: shovelled\n")
    return make_gateway(config_text=default_config(extra=extra), process=process).start()


def _publish(gw: Gateway, routing_key: str, bodies: list[bytes], **props) -> None:
    conn = pika.BlockingConnection(pika.ConnectionParameters(
        host="127.0.0.1", port=gw.amqp_port, credentials=pika.PlainCredentials("guest", "guest")))
    ch = conn.channel()
    ch.confirm_delivery()
    for body in bodies:
        ch.basic_publish("", routing_key, body, pika.BasicProperties(delivery_mode=2, **props), mandatory=True)
    conn.close()


def _wait_for(rabbit, queue: str, count: int, timeout: float = 60.0) -> list:
    got: list = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        got += drain_queue(rabbit, queue)
        time.sleep(0.2)
    return got


def _local_depth(gw: Gateway, queue: str) -> int:
    conn = pika.BlockingConnection(pika.ConnectionParameters(
        host="127.0.0.1", port=gw.amqp_port, credentials=pika.PlainCredentials("guest", "guest")))
    depth = conn.channel().queue_declare(queue, passive=True).method.message_count
    conn.close()
    return depth


@pytest.fixture
def gateway_to_partner(partner_rabbit, tmp_path):
    declare_bound_queue(partner_rabbit, "orders")
    declare_bound_queue(partner_rabbit, "shovelled")
    gw = _gateway(partner_rabbit, tmp_path)
    yield gw
    gw.stop()


def test_a_0_9_1_publish_to_orders_at_partner_reaches_rabbitmq(partner_rabbit, gateway_to_partner):
    _publish(gateway_to_partner, "orders@partner", [b"one", b"two"], content_type="text/plain",
             headers={"app": "legacy"})
    got = _wait_for(partner_rabbit, "orders", 2)
    assert sorted(body for _, body in got) == [b"one", b"two"]
    props = got[0][0]
    assert props.content_type == "text/plain" and props.headers["app"] == "legacy"
    assert gateway_to_partner.wait_for_log("forwarding to 'partner': connected")


def test_a_shovel_drains_a_local_queue_to_the_partner(partner_rabbit, gateway_to_partner):
    bodies = [f"s-{n}".encode() for n in range(200)]
    _publish(gateway_to_partner, "outbound.orders", bodies, message_id="from-legacy")
    got = _wait_for(partner_rabbit, "shovelled", len(bodies))
    assert sorted(body for _, body in got) == sorted(bodies)
    assert {props.message_id for props, _ in got} == {"from-legacy"}
    assert _local_depth(gateway_to_partner, "outbound.orders") == 0


def test_rabbitmq_stopped_the_shovel_keeps_taking_and_nothing_is_lost(partner_rabbit, gateway_to_partner):
    _publish(gateway_to_partner, "outbound.orders", [b"before"])
    assert [body for _, body in _wait_for(partner_rabbit, "shovelled", 1)] == [b"before"]
    partner_rabbit.stop_app()
    try:
        bodies = [f"while-down-{n}".encode() for n in range(100)]
        _publish(gateway_to_partner, "outbound.orders", bodies)     # confirmed by the gateway
        deadline = time.monotonic() + 30
        while _local_depth(gateway_to_partner, "outbound.orders") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _local_depth(gateway_to_partner, "outbound.orders") == 0   # all in the outbox
    finally:
        partner_rabbit.start_app()
    got = _wait_for(partner_rabbit, "shovelled", len(bodies))
    assert sorted(body for _, body in got) == sorted(bodies)


@pytest.mark.process
def test_killed_while_sending_a_backlog_then_restarted_every_confirmed_message_arrives(partner_rabbit, tmp_path):
    declare_bound_queue(partner_rabbit, "orders")
    gw = _gateway(partner_rabbit, tmp_path, process=True)
    bodies = [f"k-{n}-".encode().ljust(1024, b".") for n in range(30000)]   # a backlog of seconds
    try:
        partner_rabbit.stop_app()
        try:   # the backlog: every message confirmed by the gateway, none sent yet
            ledger = asyncio.run(publish_confirmed(f"amqp://guest:guest@127.0.0.1:{gw.amqp_port}/",
                                                   "orders@partner", bodies, window=300))
        finally:
            partner_rabbit.start_app()
        assert len(ledger.confirmed) == len(bodies)
        connection = pika.BlockingConnection(pika.ConnectionParameters(
            host="127.0.0.1", port=partner_rabbit.port, virtual_host=PARTNER_VHOST,
            credentials=pika.PlainCredentials(PARTNER_USER, PARTNER_PASSWORD)))
        try:
            deadline = time.monotonic() + 60
            arrived = 0
            while arrived < 500 and time.monotonic() < deadline:
                arrived = connection.channel().queue_declare("orders", passive=True).method.message_count
        finally:
            gw.kill()
            connection.close()
    finally:
        gw.kill()
    assert 500 <= arrived < len(bodies), "killed before or after the sending, not during it"
    again = _gateway(partner_rabbit, tmp_path, process=True)
    try:
        got: set[bytes] = set()   # a resend may repeat some: wait for each one, not a count
        deadline = time.monotonic() + 120
        while len(got) < len(bodies) and time.monotonic() < deadline:
            got.update(body for _, body in drain_queue(partner_rabbit, "orders"))
            time.sleep(0.2)
        assert got == set(bodies)
    finally:
        again.stop()
