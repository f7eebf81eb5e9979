"""Message bytes in and out of the 1.0 engine: the container a transfer becomes, and the
bytes a delivery carries.

Incoming: :func:`container_from_transfer` keeps the encoded message as the payload
(``Encoding.AMQP10``) and fills the routing fields from ``inspect_amqp10``, which decodes
only the header, properties and application-properties sections. A message whose header
has no priority has AMQP 1.0's default, 4, and ranks so in a priority queue (the
container's ``priority``); a 0-9-1 message without one ranks 0, its protocol's rule.
Only the ranking uses the default: the message itself is not changed, so a 0-9-1
consumer gets no ``priority`` property for it (translators/MAPPING.md).

Outgoing: :func:`delivery_parts` gives what one delivery sends: the message as it is
kept (a 1.0-origin one with ``x-exchange`` and ``x-routing-key`` merged into its
message-annotations once, as RabbitMQ 4 delivers every message: its own clients need
them), and the header section to send in place of its own. Every delivery's header says
the broker's ``delivery-count`` and ``first-acquirer``: true on a message's first
acquisition from the queue, false on a redelivery (after a release, a ``modified``
outcome, a lost link or connection) and on a browsing (``copy``) link, which acquires
nothing (spec 3.2.1: first-acquirer true means no other link acquired the message; seed
001: first-acquirer iff not redelivered; a receiver reads a missing one as false). A
1.0-origin payload is not re-encoded for this: the new header is made from
the old one (``delivery_header``, kept per header octets) and the link sends the two parts
into the same delivery. A 0-9-1-origin message is translated once per message through
``MessageContainer.converted`` (cached for every other 1.0 consumer, so a fan-out
translates once) in its first-delivery form, header included, so a first acquisition
sends it whole. Annotations added by a ``modified`` outcome are merged into the
message-annotations section alone (``with_message_annotations``): every other section,
several data sections and a footer included, keeps its bytes. The merged form is cached
on the annotated copy of the container that the outcome made.
"""
from __future__ import annotations

import functools

from gateway.broker.amqp10_form import amqp10_bytes
from gateway.broker.message import Encoding, MessageContainer
from translators.amqp10_sections import (DEFAULT_PRIORITY, Amqp10Summary, inspect_amqp10,
                                         with_message_annotations, with_routing_annotations)
from translators.delivery_header import delivery_header
from translators.routed_delivery import routed_head

__all__ = ["container_from_summary", "container_from_transfer", "delivery_parts", "service_request_container",
           "user_id_text"]

_AMQP10 = Encoding.AMQP10


def user_id_text(summary: Amqp10Summary) -> str | None:
    """The message's ``user-id`` as text (UTF-8, invalid bytes replaced), or None."""
    if summary.user_id is None:
        return None
    return summary.user_id.decode("utf-8", "replace")


def container_from_transfer(encoded: bytes, now: float) -> tuple[MessageContainer, Amqp10Summary]:
    """A container for one received 1.0 message (``now`` in seconds).

    ``exchange`` and ``routing_key`` are left empty: the link fills them from its route.
    Raises ``translators.TranslationError`` on a malformed encoding.
    """
    summary = inspect_amqp10(encoded)
    return container_from_summary(encoded, summary, now), summary


def container_from_summary(encoded: bytes, summary: Amqp10Summary, now: float) -> MessageContainer:
    """:func:`container_from_transfer` for a message whose summary (``inspect_amqp10``)
    is known already."""
    priority = summary.priority
    if priority is None:
        priority = DEFAULT_PRIORITY
    # positional, in __init__'s order (see there): exchange, routing_key, headers, durable,
    # priority, ttl_ms, created_at, size, message_id, correlation_id, user_id,
    # properties, gateway_id, deaths, annotations, body_at
    return MessageContainer(
        _AMQP10, encoded, "", "", summary.application_properties or None, summary.durable,
        priority, summary.ttl_ms, now, summary.body_size, summary.message_id,
        summary.correlation_id, None if summary.user_id is None else user_id_text(summary),
        None, 0, None, None, summary.body_at)


def service_request_container(encoded: bytes, now: float) -> MessageContainer:
    """A container for a message that only a service node reads (it decodes the bytes
    itself), when :func:`container_from_transfer` finds its sections out of order."""
    return MessageContainer(_AMQP10, encoded, "", "", None, False, DEFAULT_PRIORITY, None, now, len(encoded))


#: a 0-9-1 message as sent on its first delivery to 1.0 (cached per message; a partial,
#: not a function calling it: one call less per message)
_from_amqp091 = functools.partial(amqp10_bytes, first_delivery=True)


def _routed(message: MessageContainer) -> bytes:
    """A 1.0 message as RabbitMQ 4 delivers it: ``x-exchange`` and ``x-routing-key`` (where
    it was published) merged into its message-annotations section, every other section
    kept octet for octet (cached per message, so a fan-out splices once)."""
    return with_routing_annotations(message.payload, message.exchange, message.routing_key)


def _annotated(message: MessageContainer) -> bytes:
    """The first-delivery form of a message a ``modified`` outcome annotated: its 1.0
    bytes (as received, with ``x-exchange``/``x-routing-key``, or translated from 0-9-1)
    with the annotations merged into the message-annotations section only (cached on
    the container, a copy made by the outcome)."""
    if message.origin is _AMQP10:
        encoded = _routed(message)
    else:
        encoded = _from_amqp091(message)
    return with_message_annotations(encoded, message.annotations or {})


def delivery_parts(message: MessageContainer, *, delivery_count: int,
                   first_acquirer: bool) -> tuple[bytes, bytes, int]:
    """``(header, encoded, rest)``: one delivery of ``message`` is ``header`` followed by
    ``encoded[rest:]`` (``header`` empty and ``rest`` 0 when ``encoded`` goes as it is).

    Raises ``translators.TranslationError`` if a 0-9-1 message cannot be translated.
    """
    if message.annotations:
        encoded = message.converted(Encoding.AMQP10, _annotated)
    elif message.origin is _AMQP10:
        at = message.body_at
        if at is not None:  # its octets before the body, rewritten, then its body
            payload = message.payload
            head = routed_head(payload, at, message.exchange, message.routing_key,
                               delivery_count, first_acquirer)
            if head is not None:
                return head, payload, at
        encoded = message.converted(_AMQP10, _routed)
    else:
        encoded = message.converted(Encoding.AMQP10, _from_amqp091)
        if first_acquirer and not delivery_count:  # translated with this header already
            return b"", encoded, 0  # type: ignore[return-value]
    header, rest = delivery_header(encoded, delivery_count, first_acquirer)  # type: ignore[arg-type]
    return header, encoded, rest  # type: ignore[return-value]
