"""Where a 0-9-1 client's operations go on an amqp10 backend (``backends[].address``).

A 1.0 broker has addresses, not exchanges and bindings. The templates say which address
a publish and a consumer use: ``queue`` for basic.consume(Q) and for a publish to the
default exchange with routing key Q (the default exchange's rule: the key names the
queue), ``exchanges[X]`` or else ``exchange`` for a publish to exchange X. So a binding is
not something the gateway can make; it is a fact of the templates, and ``binding_refusal``
says honestly whether queue.bind(Q, X, RK) already holds (a publish to X with RK reaches
the address Q is consumed from) or cannot be carried out.

A 1.0 client's links on an amqp10 backend are carried link for link, and their addresses
by one rule (``carried_target``, ``carried_source``): an address in the gateway's own
grammar (it starts with ``/``: ``/queue/Q``, ``/amq/queue/Q``, ``/queues/Q``,
``/exchange/X/RK``, ``/topic/RK``, ...) goes through the same templates, so a 1.0 and a
0-9-1 client of the vhost name the same queues; one the templates cannot express (a
source that binds to an exchange, a target that takes its key from each message's
subject while the template needs ``{key}``) is refused with the reason; any other
address (a bare name, ``queue://Q``, a dynamic node's address, or one our grammar does
not read) is the backend's own and passes unchanged. Per-message addresses (``to``)
always pass unchanged: the bare message is not rewritten.

The 0-9-1 settlements of a delivery map to 1.0 outcomes here too: ack -> accepted,
nack/reject with requeue -> released (the backend may deliver it again), without requeue
-> rejected.
"""
from __future__ import annotations

from typing import Optional

from addressing import (AddressError, AddressErrorKind, LocalConsume, LocalPublish, SubjectPublish,
                        resolve_remote_source, resolve_remote_target)
from gateway.backend.settings import AddressTemplates

__all__ = ["publish_address", "queue_address", "binding_refusal", "outcome_for", "carried_target",
           "carried_source", "ACCEPTED", "RELEASED", "REJECTED"]

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


def _grammar(address: Optional[str]) -> bool:
    return address is not None and address.startswith("/")


def carried_target(templates: AddressTemplates, address: Optional[str]) -> Optional[str]:
    """The backend's address for a 1.0 client's target ``address`` (see the module
    docstring). Raises ``AddressError`` (INVALID) when the templates cannot express it."""
    if not _grammar(address):
        return address
    try:
        route = resolve_remote_target(address)
    except AddressError:
        return address  # not ours to read: the backend's own
    if isinstance(route, SubjectPublish):
        template = templates.exchanges.get(route.exchange, templates.exchange) if route.exchange else templates.queue
        if "{key}" in template or "{queue}" in template:
            raise AddressError(AddressErrorKind.INVALID,
                               f"target '{address}' takes its routing key from each message's subject, "
                               f"and the backend's address for it ('{template}') needs the key: name it "
                               "in the address (/exchange/X/KEY)")
        return template.format(exchange=route.exchange)
    assert isinstance(route, LocalPublish)
    return publish_address(templates, route.exchange, route.routing_key)


def carried_source(templates: AddressTemplates, address: Optional[str]) -> Optional[str]:
    """The backend's address for a 1.0 client's source ``address`` (see the module
    docstring). Raises ``AddressError`` (INVALID) when the templates cannot express it."""
    if not _grammar(address):
        return address
    try:
        route = resolve_remote_source(address)
    except AddressError:
        return address
    if not isinstance(route, LocalConsume):
        raise AddressError(AddressErrorKind.INVALID,
                           f"source '{address}' is not a queue, and the backend's addresses "
                           "(backends[].address) name queues only: consume from /queue/NAME, or "
                           "from the backend's own address")
    return queue_address(templates, route.queue)


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
