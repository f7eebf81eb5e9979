"""The address templates of an amqp10 backend, and what they say about bindings."""
from __future__ import annotations

from gateway.backend.addresses import binding_refusal, outcome_for, publish_address, queue_address
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
