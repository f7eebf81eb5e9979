"""The 1.0 bytes of a message on its way to a remote over 1.0.

The bare message is what the client sent (a 1.0 message's own bytes; a 0-9-1 message as
the translator renders it for a 1.0 receiver, ``translators.to_amqp10``); the forwarding
annotations are merged into the message-annotations section alone
(``with_message_annotations``). For ``kind: gateway`` the remote's ``amqp$transfer``
reads ``to``, so a message without one gets its global address (its routing key) as
``to`` (``with_to``; a message that has one keeps it, byte for byte).
"""
from __future__ import annotations

from gateway.broker.message import Encoding
from gateway.forward.outbound import OutboundMessage
from translators import to_amqp10
from translators.amqp10_sections import with_message_annotations, with_to

__all__ = ["amqp10_payload"]


def amqp10_payload(out: OutboundMessage, *, fill_to: bool) -> bytes:
    """Raises ``translators.TranslationError`` for a message that cannot be rendered."""
    message = out.message
    if message.origin is Encoding.AMQP10:
        encoded = message.payload
    else:
        properties_bytes, body = message.payload
        encoded = to_amqp10(message.properties, body, exchange=message.exchange,
                            routing_key=message.routing_key, raw_properties=properties_bytes)
    if fill_to and message.routing_key:
        encoded = with_to(encoded, message.routing_key)
    return with_message_annotations(encoded, out.annotations)
