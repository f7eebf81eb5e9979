"""Message bytes in and out of the 1.0 engine: the container a transfer becomes, and the
bytes a delivery carries.

Incoming: :func:`container_from_transfer` keeps the encoded message as the payload
(``Encoding.AMQP10``) and fills the routing fields from ``inspect_amqp10``, which decodes
only the header, properties and application-properties sections.

Outgoing: :func:`delivery_bytes` sends a 1.0-origin payload unchanged on a first delivery
(1.0 -> 1.0 costs no re-encoding). A 0-9-1-origin message is translated once per message
through ``MessageContainer.converted`` (cached for every other 1.0 consumer, so a fan-out
translates once); the cached form already carries first-acquirer true (seed 001:
first-acquirer iff not redelivered; without a header a 1.0 receiver would read *false*).
A redelivery only gets a new header section through ``with_delivery_header``
(delivery-count, first-acquirer false). Annotations added by a ``modified`` outcome are merged into the
message-annotations section alone (``with_message_annotations``): every other section,
several data sections and a footer included, keeps its bytes. The merged form is cached
on the annotated copy of the container that the outcome made.
"""
from __future__ import annotations

from gateway.broker.message import Encoding, MessageContainer
from translators import to_amqp10
from translators.amqp10_sections import (Amqp10Summary, inspect_amqp10, with_delivery_header,
                                         with_message_annotations)

__all__ = ["container_from_transfer", "delivery_bytes", "user_id_text"]

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
    # positional, in __init__'s order (see there): exchange, routing_key, headers, durable,
    # priority, ttl_ms, created_at, size, message_id, correlation_id, user_id,
    # properties, gateway_id, deaths, annotations, body_at
    message = MessageContainer(
        _AMQP10, encoded, "", "", summary.application_properties or None, summary.durable,
        summary.priority, summary.ttl_ms, now, summary.body_size, summary.message_id,
        summary.correlation_id, user_id_text(summary), None, 0, None, None, summary.body_at)
    return message, summary


def _from_amqp091(message: MessageContainer) -> bytes:
    """A 0-9-1 message as sent on its first delivery to 1.0 (cached per message)."""
    properties_bytes, body = message.payload
    return to_amqp10(message.properties, body, exchange=message.exchange,
                     routing_key=message.routing_key, first_delivery=True,
                     raw_properties=properties_bytes)


def _annotated(message: MessageContainer) -> bytes:
    """The first-delivery form of a message a ``modified`` outcome annotated: its 1.0
    bytes (as received, or translated from 0-9-1) with the annotations merged into the
    message-annotations section only (cached on the container, a copy made by the
    outcome)."""
    if message.origin is Encoding.AMQP10:
        encoded = message.payload
    else:
        encoded = _from_amqp091(message)
    return with_message_annotations(encoded, message.annotations or {})


def delivery_bytes(message: MessageContainer, *, delivery_count: int, redelivered: bool) -> bytes:
    """The encoded 1.0 message to send for one delivery of ``message``.

    Raises ``translators.TranslationError`` if a 0-9-1 message cannot be translated.
    """
    if message.annotations:
        encoded = message.converted(Encoding.AMQP10, _annotated)  # type: ignore[assignment]
    elif message.origin is Encoding.AMQP10:
        encoded = message.payload
    else:
        encoded = message.converted(Encoding.AMQP10, _from_amqp091)  # type: ignore[assignment]
    if delivery_count or redelivered:
        encoded = with_delivery_header(encoded, delivery_count=delivery_count, first_acquirer=False)
    return encoded
