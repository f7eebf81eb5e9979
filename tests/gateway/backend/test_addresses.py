"""The address templates of an amqp10 backend, and what they say about bindings."""
from __future__ import annotations

import pytest

from addressing import AddressError
from gateway.backend.addresses import (binding_refusal, carried_source, carried_target, outcome_for,
                                       publish_address, queue_address)
from gateway.backend.settings import AddressTemplates

ACTIVEMQ = AddressTemplates(queue="queue://{queue}", exchange="topic://{key}",
                            exchanges={"celery": "queue://{key}"})


def test_publishes_and_consumers_go_where_the_templates_say() -> None:
    assert queue_address(ACTIVEMQ, "orders") == "queue://orders"
    assert publish_address(ACTIVEMQ, "", "orders") == "queue://orders"   # the default exchange
    assert publish_address(ACTIVEMQ, "amq.topic", "a.b") == "topic://a.b"
    assert publish_address(ACTIVEMQ, "celery", "celery") == "queue://celery"
    rabbit = AddressTemplates(queue="/amq/queue/{queue}", exchange="/exchange/{exchange}/{key}")
    assert publish_address(rabbit, "in", "k") == "/exchange/in/k"


def test_a_binding_holds_only_when_the_templates_already_route_that_way() -> None:
    assert binding_refusal(ACTIVEMQ, "amq", "celery", "celery", "celery") is None
    refusal = binding_refusal(ACTIVEMQ, "amq", "orders", "amq.topic", "orders")
    assert refusal is not None and "backend amq (amqp10) has no bindings" in refusal
    assert "'topic://orders'" in refusal and "'queue://orders'" in refusal


def test_nack_and_reject_map_to_released_or_rejected() -> None:
    assert outcome_for(True) == "released" and outcome_for(False) == "rejected"


def test_a_carried_link_address_goes_through_the_templates_when_it_is_the_gateways() -> None:
    assert carried_target(ACTIVEMQ, "/queue/orders") == "queue://orders"
    assert carried_target(ACTIVEMQ, "/exchange/amq.topic/a.b") == "topic://a.b"
    assert carried_target(ACTIVEMQ, "/topic/a.b") == "topic://a.b"
    assert carried_source(ACTIVEMQ, "/queue/orders") == carried_source(ACTIVEMQ, "/amq/queue/orders") == \
        carried_source(ACTIVEMQ, "/queues/orders") == "queue://orders"
    # the backend's own addresses (and the anonymous relay's null) pass unchanged
    for address in ("orders", "queue://orders", "topic://a.b", None, "/not/ours/at/all"):
        assert carried_target(ACTIVEMQ, address) == carried_source(ACTIVEMQ, address) == address


def test_a_carried_address_the_templates_cannot_say_is_refused_with_the_reason() -> None:
    with pytest.raises(AddressError) as subject:
        carried_target(ACTIVEMQ, "/exchange/amq.topic")   # the key from each message's subject
    assert "'topic://{key}'" in subject.value.text and "/exchange/X/KEY" in subject.value.text
    assert carried_target(AddressTemplates(exchange="topic://{exchange}"), "/exchange/news") == "topic://news"
    with pytest.raises(AddressError) as binding:
        carried_source(ACTIVEMQ, "/exchange/amq.topic/a.b")
    assert "name queues only" in binding.value.text
