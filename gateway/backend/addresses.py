"""Where a 0-9-1 client's operations go on an amqp10 backend (``backends[].address``).

A 1.0 broker has addresses, not exchanges and bindings. The templates say which address
a publish and a consumer use: ``queue`` for basic.consume(Q) and for a publish to the
default exchange with routing key Q (the default exchange's rule: the key names the
queue), ``exchanges[X]`` or else ``exchange`` for a publish to exchange X. So a binding is
not something the gateway can make; it is a fact of the templates, and ``binding_refusal``
says honestly whether queue.bind(Q, X, RK) already holds (a publish to X with RK reaches
the address Q is consumed from) or cannot be carried out.

The 0-9-1 settlements of a delivery map to 1.0 outcomes here too: ack -> accepted,
nack/reject with requeue -> released (the backend may deliver it again), without requeue
-> rejected.
"""
from __future__ import annotations

from typing import Optional

from gateway.backend.settings import AddressTemplates

__all__ = ["publish_address", "queue_address", "binding_refusal", "outcome_for", "ACCEPTED",
           "RELEASED", "REJECTED"]

ACCEPTED, RELEASED, REJECTED = "accepted", "released", "rejected"


def queue_address(templates: AddressTemplates, queue: str) -> str:
    """The address queue ``queue`` is consumed from."""
    return templates.queue.format(queue=queue)


def publish_address(templates: AddressTemplates, exchange: str, routing_key: str) -> str:
    """The address basic.publish(``exchange``, ``routing_key``) sends to."""
    if not exchange:
        return queue_address(templates, routing_key)
    template = templates.exchanges.get(exchange, templates.exchange)
    return template.format(exchange=exchange, key=routing_key)


def binding_refusal(templates: AddressTemplates, backend: str, queue: str, exchange: str,
                    routing_key: str) -> Optional[str]:
    """None when queue.bind(``queue``, ``exchange``, ``routing_key``) holds by the templates,
    else the reason it cannot be carried out."""
    target, source = publish_address(templates, exchange, routing_key), queue_address(templates, queue)
    if target == source:
        return None
    return (f"backend {backend} (amqp10) has no bindings: a publish to exchange '{exchange}' with "
            f"routing key '{routing_key}' goes to address '{target}', and queue '{queue}' is "
            f"consumed from '{source}' (see backends[].address)")


def outcome_for(requeue: bool) -> str:
    """The 1.0 outcome of a basic.nack or basic.reject."""
    return RELEASED if requeue else REJECTED
