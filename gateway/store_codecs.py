"""The protocols' encodings, lent to the durable store and the broker (wired by the service).

The store (stdlib only) and the broker (no protocol imports) cannot name the 0-9-1 and
1.0 codecs themselves; this module, above both protocol packages, hands them over:

* :data:`STORE_CODECS`: argument tables and x-death records as 0-9-1 field values, and
  1.0 ``modified`` annotations as a 1.0 map (``gateway.store.interface.StoreCodecs``);
* :func:`load_stored_message`: a stored message back as a container, through the
  decoder of the protocol it arrived in (``Broker.message_loader``);
* :data:`MANAGEMENT_MESSAGES`: 0-9-1's composing and rendering of a message, for the
  management API's publish and get (``gateway.management.http_messages``).
"""
from __future__ import annotations

from gateway.amqp091.message_mapping import container_from_properties, delivered_properties
from gateway.amqp091.stored_messages import (container_from_stored as amqp091_from_stored,
                                             decode_stored_value, encode_stored_value)
from gateway.amqp10.stored_messages import (container_from_stored as amqp10_from_stored,
                                            decode_annotations, encode_annotations)
from gateway.broker.message import MessageContainer
from gateway.management.api_facts import MessageCodec
from gateway.store.interface import StoreCodecs, StoredMessage

__all__ = ["STORE_CODECS", "load_stored_message", "MANAGEMENT_MESSAGES"]

STORE_CODECS = StoreCodecs(encode_stored_value, decode_stored_value, encode_annotations,
                           decode_annotations)

MANAGEMENT_MESSAGES = MessageCodec(container_from_properties, delivered_properties)

_LOADERS = {"amqp091": amqp091_from_stored, "amqp10": amqp10_from_stored}


def load_stored_message(stored: StoredMessage) -> MessageContainer:
    """``stored`` as a container; raises ``KeyError`` for an unknown origin and the
    protocol decoder's error for damaged bytes."""
    return _LOADERS[stored.row.origin](stored)
