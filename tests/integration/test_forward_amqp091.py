"""``kind: amqp091`` against Debian's RabbitMQ, started privately (bench/reference.py).

The outbound connection (``OutboundAmqp091`` driven by the edge's ``RemoteLink``) runs in this process under
pytest-twisted's reactor, fed by a minimal forwarder (``tests/support/minimal_forwarder``);
what arrives is read from RabbitMQ with pika, in a thread. Shown: messages of both
origins arrive with their properties and the forwarding annotations as headers, confirms
become ACCEPTED, a publish to a missing exchange and one with no route become REJECTED
with RabbitMQ's reason (and the stream goes on), a refused login is reported and retried,
and RabbitMQ stopped for a while then started again loses nothing.
"""
from __future__ import annotations

from typing import Any

import pytest
import pytest_twisted
from proton import Message
from twisted.internet import reactor, task, threads

from bench.reference import PrivateRabbit
from gateway.amqp091.content import encode_properties
from gateway.amqp091.outbound_client import OutboundAmqp091
from gateway.edge.outbound import RemoteLink
from gateway.forward.outbound import ForwardOutcome, OutboundMessage, RemoteSettings
from tests.support.minimal_forwarder import MinimalForwarder, container_091, container_10
from tests.support.partner_broker import (PARTNER_PASSWORD, PARTNER_USER, PARTNER_VHOST, declare_bound_queue,
                                          drain_queue)
from tests.support.reactor_waits import until
from translators.basic_properties import BasicProperties

pytestmark = pytest.mark.integration

ANNOTATIONS = {"x-opt-origin-container": "org-a", "x-opt-hops": ["org-a"]}


@pytest.fixture
def rabbit(partner_rabbit):
    return partner_rabbit


@pytest.fixture
def password_file(tmp_path):
    path = tmp_path / "partner.password"
    path.write_text(PARTNER_PASSWORD + "\n")
    return str(path)


def _remote(rabbit: PrivateRabbit, password_file: str, **kwargs: Any) -> RemoteSettings:
    options = dict(container="partner", host="127.0.0.1", port=rabbit.port, kind="amqp091",
                   address="/exchange/in/{node}", vhost=PARTNER_VHOST, user=PARTNER_USER, password_file=password_file,
                   credit=50, reconnect_initial=0.2, reconnect_max=1.0)
    options.update(kwargs)
    return RemoteSettings(**options)


def _start(remote: RemoteSettings) -> tuple[MinimalForwarder, RemoteLink]:
    forwarder = MinimalForwarder()
    connection = RemoteLink(reactor, remote, forwarder, "org-a", OutboundAmqp091)
    connection.start()
    return forwarder, connection


def _entry(entry_id: int, message: Any, address: str = "/exchange/in/orders", node: str = "orders") -> OutboundMessage:
    return OutboundMessage(entry_id, node, address, message, dict(ANNOTATIONS))


@pytest_twisted.ensureDeferred
async def test_messages_arrive_with_their_properties_and_confirms_accept_them(rabbit, password_file):
    await threads.deferToThread(declare_bound_queue, rabbit, "orders")
    forwarder, connection = _start(_remote(rabbit, password_file))
    try:
        props = encode_properties(BasicProperties(content_type="application/json", delivery_mode=2,
                                                  message_id="m-091", headers={"app": "v1"}))
        encoded = bytes(Message(body=b"from 1.0", inferred=True, id="m-10", durable=True,
                                content_type="text/plain", properties={"k": 7}).encode())
        forwarder.submit(_entry(1, container_091(props, b'{"n": 1}')),
                         _entry(2, container_10(encoded), address="/queue/orders"))
        await until(lambda: len(forwarder.final) == 2)
        assert forwarder.ups == 1 and forwarder.downs == []
        assert [forwarder.outcome(1), forwarder.outcome(2)] == [ForwardOutcome.ACCEPTED] * 2
        got = await threads.deferToThread(drain_queue, rabbit, "orders")
        (p1, b1), (p2, b2) = sorted(got, key=lambda item: item[0].message_id)
        assert (b1, p1.content_type, p1.delivery_mode) == (b'{"n": 1}', "application/json", 2)
        assert p1.headers == {"app": "v1", **ANNOTATIONS}
        assert (b2, p2.message_id, p2.content_type) == (b"from 1.0", "m-10", "text/plain")
        assert p2.headers["k"] == 7 and p2.headers["x-opt-origin-container"] == "org-a"
    finally:
        connection.close("test over")


@pytest_twisted.ensureDeferred
async def test_a_missing_exchange_and_an_unroutable_key_are_rejected_with_the_reason(rabbit, password_file):
    await threads.deferToThread(declare_bound_queue, rabbit, "refusals")
    forwarder, connection = _start(_remote(rabbit, password_file))
    try:
        plain = encode_properties(BasicProperties(delivery_mode=2))
        forwarder.submit(_entry(1, container_091(plain, b"1"), address="/exchange/in/refusals"),
                         _entry(2, container_091(plain, b"2"), address="/exchange/in/nobody-bound"),
                         _entry(3, container_091(plain, b"3"), address="/exchange/in/refusals"))
        await until(lambda: len(forwarder.final) == 3)
        forwarder.submit(_entry(4, container_091(plain, b"4"), address="/exchange/missing/x"),
                         _entry(5, container_091(plain, b"5"), address="/exchange/in/refusals"))
        await until(lambda: len(forwarder.final) == 5)
        outcomes = {n: forwarder.outcome(n) for n in range(1, 6)}
        assert outcomes == {1: ForwardOutcome.ACCEPTED, 2: ForwardOutcome.REJECTED, 3: ForwardOutcome.ACCEPTED,
                            4: ForwardOutcome.REJECTED, 5: ForwardOutcome.ACCEPTED}
        assert forwarder.final[2].error == ("basic.return 312 NO_ROUTE: exchange 'in' has no route for "
                                            "routing key 'nobody-bound'")
        assert forwarder.final[4].error == ("channel.close 404 NOT_FOUND - no exchange 'missing' in vhost "
                                            "'partner'")
        # the channel error cost the channel, not the connection: a new one carried message 5
        assert forwarder.ups == 2 and len(forwarder.downs) == 1 and "404" in forwarder.downs[0]
        got = await threads.deferToThread(drain_queue, rabbit, "refusals")
        assert sorted(body for _, body in got) == [b"1", b"3", b"5"]
    finally:
        connection.close("test over")


@pytest_twisted.ensureDeferred
async def test_a_refused_login_is_reported_and_retried_with_backoff(rabbit, tmp_path):
    wrong = tmp_path / "wrong.password"
    wrong.write_text("not-the-password")
    forwarder, connection = _start(_remote(rabbit, str(wrong)))
    try:
        await until(lambda: len(forwarder.downs) >= 2)
        assert forwarder.ups == 0
        assert "ACCESS_REFUSED" in forwarder.downs[0] and "remote 'partner'" in forwarder.downs[0]
        missing = _remote(rabbit, str(tmp_path / "absent"))
        other, other_connection = _start(missing)
        await until(lambda: other.downs)
        other_connection.close("test over")
        assert "cannot read password_file" in other.downs[0] and "absent" in other.downs[0]
    finally:
        connection.close("test over")


@pytest_twisted.ensureDeferred
async def test_rabbitmq_stopped_for_a_while_then_back_loses_nothing(rabbit, password_file):
    await threads.deferToThread(declare_bound_queue, rabbit, "outage")
    forwarder, connection = _start(_remote(rabbit, password_file, address="/queue/{node}"))
    count = 400
    try:
        durable = encode_properties(BasicProperties(delivery_mode=2))
        entries = [_entry(n, container_091(durable, str(n).encode()), address="/queue/outage", node="outage")
                   for n in range(1, count + 1)]
        forwarder.submit(*entries[:100])
        await until(lambda: len(forwarder.final) >= 50)
        stopping = threads.deferToThread(rabbit.stop_app)
        forwarder.submit(*entries[100:250])         # offered while RabbitMQ goes away
        await stopping
        forwarder.submit(*entries[250:])            # offered while it is away: held
        await until(lambda: forwarder.downs)
        await task.deferLater(reactor, 3.0, lambda: None)   # a few refused attempts
        assert not forwarder.is_up
        assert len(forwarder.final) <= 250, "settled while RabbitMQ was stopped"
        await threads.deferToThread(rabbit.start_app)
        # the last 150 can only be settled over a new connection
        await until(lambda: len(forwarder.final) == count and forwarder.ups >= 2, timeout=60)
        assert {s.outcome for s in forwarder.final.values()} == {ForwardOutcome.ACCEPTED}
        got = await threads.deferToThread(drain_queue, rabbit, "outage")
        bodies = [int(body) for _, body in got]
        assert set(bodies) == set(range(1, count + 1))     # every one (a resend may repeat one)
    finally:
        connection.close("test over")
