"""Unroutable publishes with real clients over real sockets (issue 29, item 1).

A 1.0 message that no binding takes is settled ``accepted`` and dropped by default, so
proton's ``BlockingSender.send`` (which raises on ``released``) no longer crashes a
fire-and-forget publisher; ``amqp10.unroutable: release | reject`` changes the default,
and a link's target chooses for itself with Qpid Broker-J's ``DISCARD_UNROUTABLE`` /
``REJECT_UNROUTABLE`` capabilities. Every unroutable publish of either protocol is
counted in ``amqp_gateway_messages_unroutable_{dropped,returned}_total``.
"""
from __future__ import annotations

import re
import urllib.request

import pika.exceptions
import pytest
from proton import Delivery, Message
from proton.utils import BlockingConnection, SendException

from tests.support.amqp10_link_options import TargetCapabilities
from tests.support.cross_protocol_clients import TIMEOUT, pika_channel, proton_connection, unique
from tests.support.gateway_process import Gateway, default_config, make_gateway

pytestmark = pytest.mark.integration


def unroutable_counts(gw) -> dict[tuple[str, str], float]:
    """{(dropped|returned, amqp091|amqp10): count} scraped from the metrics endpoint."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{gw.metrics_port}{gw.metrics_path}",
                                  timeout=TIMEOUT).read().decode()
    found = re.findall(r'^amqp_gateway_messages_unroutable_(dropped|returned)_total'
                       r'\{protocol="(\w+)"\} (\S+)$', text, re.MULTILINE)
    return {(kind, protocol): float(value) for kind, protocol, value in found}


def counted(before: dict, after: dict) -> dict[tuple[str, str], float]:
    """What changed between two scrapes (the session gateway serves other tests too)."""
    return {key: after[key] - before.get(key, 0.0) for key in after if after[key] != before.get(key, 0.0)}


def send_unchecked(conn: BlockingConnection, sender, message: Message) -> Delivery:
    """Send without BlockingSender's raise-on-outcome, to look at the outcome itself."""
    delivery = sender.link.send(message)
    conn.wait(lambda: bool(delivery.settled or delivery.remote_state),
              msg="waiting for the disposition")
    return delivery


@pytest.fixture(scope="module")
def policy_gateways():
    """One gateway per non-default ``amqp10.unroutable``, started on first use."""
    started: dict[str, Gateway] = {}

    def get(policy: str) -> Gateway:
        if policy not in started:
            started[policy] = make_gateway(
                config_text=default_config(extra=f"amqp10:\n  unroutable: {policy}\n")).start()
        return started[policy]

    yield get
    for gw in started.values():
        gw.stop()


def _unroutable_targets() -> list[tuple]:
    """(link target, message) pairs that no binding takes; None: the anonymous relay."""
    key = unique("nobody.listens")
    return [
        (f"/topic/{key}", Message(body="price")),
        (f"/exchange/amq.direct/{key}", Message(body="event")),
        ("/exchange/amq.topic", Message(body="by subject", subject=key)),
        ("/queue", Message(body="by subject", subject=unique("no-such-queue"))),
        (None, Message(body="relayed", address=f"/exchange/amq.topic/{key}")),
    ]


def test_fire_and_forget_publishers_are_not_told_released(gateway):
    """proton's BlockingSender.send raises SendException on released: before issue 29 each
    of these publishes crashed its (perfectly ordinary) publisher."""
    before = unroutable_counts(gateway)
    conn = proton_connection(gateway)
    try:
        for target, message in _unroutable_targets():
            sender = conn.create_sender(target)
            delivery = sender.send(message, timeout=TIMEOUT)  # raises on released/rejected
            assert delivery.remote_state == Delivery.ACCEPTED
    finally:
        conn.close()
    assert counted(before, unroutable_counts(gateway)) == {("dropped", "amqp10"): 5.0}


def test_a_routed_message_is_still_delivered(gateway):
    conn = proton_connection(gateway)
    try:
        key = unique("listened")
        receiver = conn.create_receiver(f"/topic/{key}", credit=1)
        before = unroutable_counts(gateway)
        conn.create_sender(f"/topic/{key}").send(Message(body="hello"), timeout=TIMEOUT)
        assert receiver.receive(timeout=TIMEOUT).body == "hello"
        receiver.accept()
        assert counted(before, unroutable_counts(gateway)) == {}
    finally:
        conn.close()


@pytest.mark.parametrize("policy, state", [("release", Delivery.RELEASED),
                                           ("reject", Delivery.REJECTED)])
def test_the_operator_chooses_release_or_reject(policy_gateways, policy, state):
    gw = policy_gateways(policy)
    before = unroutable_counts(gw)
    conn = proton_connection(gw)
    try:
        key = unique("nobody")
        sender = conn.create_sender(f"/exchange/amq.direct/{key}")
        with pytest.raises(SendException) as info:
            sender.send(Message(body="x"), timeout=TIMEOUT)
        assert info.value.state == state
        delivery = send_unchecked(conn, sender, Message(body="y"))
        assert delivery.remote_state == state
        if policy == "reject":
            condition = delivery.remote.condition
            assert condition.name == "amqp:not-found"
            assert condition.description == (f"no route for routing key '{key}' from exchange "
                                             "'amq.direct' in vhost '/'")
    finally:
        conn.close()
    assert counted(before, unroutable_counts(gw)) == {("returned", "amqp10"): 2.0}


def _capabilities(terminus) -> list[str]:
    data = terminus.capabilities
    data.rewind()
    return [str(s) for s in data.get_object().elements] if data.next() else []


@pytest.mark.parametrize("capability", ["REJECT_UNROUTABLE", "reject-unroutable"])
def test_a_target_asks_for_rejection(gateway, capability):
    """On a gateway that accepts unroutable messages, Broker-J's capability makes this
    link's unroutable messages rejected; the attach reply says it is honoured."""
    conn = proton_connection(gateway)
    try:
        key = unique("nobody")
        sender = conn.create_sender(f"/topic/{key}", options=TargetCapabilities("shared", capability))
        assert _capabilities(sender.link.remote_target) == [capability]
        delivery = send_unchecked(conn, sender, Message(body="x"))
        assert delivery.remote_state == Delivery.REJECTED
        assert delivery.remote.condition.name == "amqp:not-found"
        assert f"routing key '{key}' from exchange 'amq.topic'" in delivery.remote.condition.description
        plain = conn.create_sender(f"/topic/{key}", name="plain")
        assert _capabilities(plain.link.remote_target) == []
        assert plain.send(Message(body="y"), timeout=TIMEOUT).remote_state == Delivery.ACCEPTED
    finally:
        conn.close()


@pytest.mark.parametrize("policy", ["release", "reject"])
@pytest.mark.parametrize("capability", ["DISCARD_UNROUTABLE", "discard-unroutable"])
def test_a_target_asks_for_discarding(policy_gateways, policy, capability):
    gw = policy_gateways(policy)
    conn = proton_connection(gw)
    try:
        sender = conn.create_sender(None, options=TargetCapabilities(capability))  # the relay
        assert _capabilities(sender.link.remote_target) == [capability]
        message = Message(body="x", address=f"/topic/{unique('nobody')}")
        assert sender.send(message, timeout=TIMEOUT).remote_state == Delivery.ACCEPTED
    finally:
        conn.close()


def test_amqp091_unroutable_publishes_are_counted_too(gateway):
    """The same counters for 0-9-1 (pika): dropped without mandatory, returned with it."""
    before = unroutable_counts(gateway)
    connection, channel = pika_channel(gateway)
    try:
        channel.confirm_delivery()
        channel.basic_publish("amq.direct", unique("nobody"), b"dropped")
        channel.basic_publish("", unique("no-such-queue"), b"dropped")
        with pytest.raises(pika.exceptions.UnroutableError):
            channel.basic_publish("amq.direct", unique("nobody"), b"returned", mandatory=True)
        queue = channel.queue_declare("", exclusive=True).method.queue
        channel.basic_publish("", queue, b"routed", mandatory=True)
    finally:
        connection.close()
    assert counted(before, unroutable_counts(gateway)) == {("dropped", "amqp091"): 2.0,
                                                          ("returned", "amqp091"): 1.0}
