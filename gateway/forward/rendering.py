"""The 1.0 bytes of a message on its way to a remote over 1.0.

The bare message is what the client sent (a 1.0 message's own bytes; a 0-9-1 message as
the translator renders it for a 1.0 receiver: ``gateway.broker.amqp10_form``); the
forwarding annotations are merged into the message-annotations section alone. For
``kind: gateway`` the remote's ``amqp$transfer`` reads ``to``, so a message without one
gets its global address (its routing key) as ``to`` (a message that has one keeps it,
byte for byte). Both changes are made by ``translators.forwarded_form.forwarded_form``,
which, for a sender that repeats its sections before the body, encodes only the
annotations section per message, and, for a stream whose forwarding annotations differ in
the gateway id alone, puts the id into the section of the message before.
"""
from __future__ import annotations

from gateway.broker.amqp10_form import amqp10_bytes
from gateway.forward.annotations import GATEWAY_ID
from gateway.forward.outbound import OutboundMessage
from translators.forwarded_form import forwarded_form

__all__ = ["amqp10_payload"]


def amqp10_payload(out: OutboundMessage, *, fill_to: bool) -> bytes:
    """Raises ``translators.TranslationError`` for a message that cannot be rendered."""
    message = out.message
    to = message.routing_key if fill_to and message.routing_key else None
    return forwarded_form(amqp10_bytes(message), to, out.annotations, GATEWAY_ID)
