"""The one home of "a message as encoded 1.0 bytes", whatever encoding it arrived in.

A 1.0 message is its own bytes (kept as received); a 0-9-1 message is translated by
``translators.to_amqp10`` from its properties (their raw octets find the translator's
kept prefixes) and body, with the exchange and routing key it was published with. The
1.0 engine's deliveries (``first_delivery``: the header a first acquisition sends), the
forwarders' transfers and the management nodes' requests all come through here, so a
change to the rule (what a 0-9-1 publish's exchange and routing key become, say) is
made once.
"""
from __future__ import annotations

from translators import to_amqp10

from .message import Encoding, MessageContainer

__all__ = ["amqp10_bytes"]

_AMQP10 = Encoding.AMQP10


def amqp10_bytes(message: MessageContainer, *, first_delivery: bool = False) -> bytes:
    """``message`` as 1.0 bytes (a 1.0 payload as it is: ``first_delivery`` only shapes
    a translated one). Raises ``translators.TranslationError`` for a 0-9-1 message that
    cannot be translated."""
    if message.origin is _AMQP10:
        return message.payload  # type: ignore[no-any-return]
    properties_bytes, body = message.payload
    return to_amqp10(message.properties, body, exchange=message.exchange,
                     routing_key=message.routing_key, first_delivery=first_delivery,
                     raw_properties=properties_bytes)
