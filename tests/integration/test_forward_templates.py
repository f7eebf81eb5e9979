"""Address templates against a real RabbitMQ 3.10 (Debian's, started privately).

A ``kind: amqp10`` remote that refuses the address template: RabbitMQ 3.10's 1.0 plugin
does not know RabbitMQ 4's ``/queues/{node}``. The refused attach must not make the edge
reconnect at the initial delay over and over: the backoff grows up to ``reconnect_max``
(issue 46: 19 reconnects in 11 s). The templates check-config suggests for
``broker: rabbitmq-3`` (``ADDRESS_TEMPLATES``) do reach its queue, for both kinds."""
from __future__ import annotations

import pytest
import pytest_twisted
from proton import Message
from twisted.internet import reactor, threads

from gateway.amqp091.outbound_client import OutboundAmqp091
from gateway.amqp10.outbound_client import OutboundAmqp10
from gateway.edge.outbound import RemoteLink
from gateway.forward.backoff import Backoff
from gateway.forward.outbound import ForwardOutcome, OutboundMessage, RemoteSettings
from gateway.forward.settings import ADDRESS_TEMPLATES
from tests.support.minimal_forwarder import MinimalForwarder, container_10
from tests.support.partner_broker import (PARTNER_PASSWORD, PARTNER_USER, PARTNER_VHOST, declare_bound_queue,
                                          drain_queue)
from tests.support.reactor_waits import until

pytestmark = pytest.mark.integration


@pytest_twisted.ensureDeferred
async def test_a_refused_template_backs_off_exponentially(partner_rabbit, tmp_path):
    password_file = tmp_path / "pw"
    password_file.write_text(PARTNER_PASSWORD + "\n")
    await threads.deferToThread(declare_bound_queue, partner_rabbit, "orders")
    settings = RemoteSettings(container="partner", host="127.0.0.1", port=partner_rabbit.port,
                              kind="amqp10", address="/queues/{node}", vhost=PARTNER_VHOST,
                              user=PARTNER_USER, password_file=str(password_file),
                              reconnect_initial=0.2, reconnect_max=1.6)
    forwarder = MinimalForwarder()
    link = RemoteLink(reactor, settings, forwarder, "org-a", OutboundAmqp10)
    link.backoff = Backoff(link.backoff.initial, link.backoff.maximum,
                           uniform=lambda low, high: high)  # the ceiling: the schedule is exact
    delays: list[float] = []
    next_delay = link.backoff.next_delay
    link.backoff.next_delay = lambda: delays.append(next_delay()) or delays[-1]
    link.start()
    encoded = bytes(Message(body=b"x", durable=True).encode())
    forwarder.submit(OutboundMessage(1, "orders", "/queues/orders", container_10(encoded), {}))
    try:
        await until(lambda: len(delays) >= 5)
        # each attempt logged in and was refused the link: the remote's reason is reported
        assert all("Attach rejected" in down and "/queues/orders" in down for down in forwarder.downs)
        assert forwarder.ups >= 5
        assert delays[:5] == [0.2, 0.4, 0.8, 1.6, 1.6]
    finally:
        link.close("test over")


@pytest.mark.parametrize("kind, engine", [("amqp10", OutboundAmqp10), ("amqp091", OutboundAmqp091)])
@pytest_twisted.ensureDeferred
async def test_the_suggested_rabbitmq_3_template_reaches_the_queue(partner_rabbit, tmp_path, kind, engine):
    password_file = tmp_path / "pw"
    password_file.write_text(PARTNER_PASSWORD + "\n")
    queue = f"suggested-{kind}"
    await threads.deferToThread(declare_bound_queue, partner_rabbit, queue)
    template = ADDRESS_TEMPLATES["rabbitmq-3"][kind]
    settings = RemoteSettings(container="partner", host="127.0.0.1", port=partner_rabbit.port,
                              kind=kind, address=template, broker="rabbitmq-3", vhost=PARTNER_VHOST,
                              user=PARTNER_USER, password_file=str(password_file),
                              reconnect_initial=0.2, reconnect_max=1.0)
    forwarder = MinimalForwarder()
    link = RemoteLink(reactor, settings, forwarder, "org-a", engine)
    link.start()
    encoded = bytes(Message(body=b"suggested", inferred=True, durable=True).encode())
    forwarder.submit(OutboundMessage(1, queue, template.replace("{node}", queue),
                                     container_10(encoded), {}))
    try:
        await until(lambda: 1 in forwarder.final)
        assert forwarder.outcome(1) is ForwardOutcome.ACCEPTED, forwarder.final
        got = await threads.deferToThread(drain_queue, partner_rabbit, queue)
        assert [body for _, body in got] == [b"suggested"]
    finally:
        link.close("test over")
