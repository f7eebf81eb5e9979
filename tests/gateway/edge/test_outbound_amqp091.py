"""Where a forwarded message goes at a 0-9-1 partner: our address grammar read as a target
there (the integration tests against RabbitMQ are in tests/integration/test_forward_amqp091.py)."""
from __future__ import annotations

import pytest

from addressing import AddressError, LocalPublish, SubjectPublish
from gateway.edge.outbound_amqp091 import partner_route


@pytest.mark.parametrize("address, route", [
    ("/exchange/in/orders", LocalPublish("in", "orders")),
    ("/exchanges/in/orders", LocalPublish("in", "orders")),
    ("/queue/orders", LocalPublish("", "orders")),
    ("/queues/orders", LocalPublish("", "orders")),
    ("orders", LocalPublish("", "orders")),
    ("/topic/a.b", LocalPublish("amq.topic", "a.b")),
    ("/exchange/in", SubjectPublish("in")),
])
def test_exchange_and_queue_addresses(address, route):
    assert partner_route(address) == route


@pytest.mark.parametrize("address, text", [
    ("/exchange/in/a/b", "/exchange/in/a/b"),
    ("orders@elsewhere", "no service 'amqp$transfer'"),
    ("amqp$transfer", "no service 'amqp$transfer'"),
])
def test_what_a_0_9_1_broker_cannot_take_is_refused_with_the_reason(address, text):
    with pytest.raises(AddressError) as caught:
        partner_route(address)
    assert text in caught.value.text
