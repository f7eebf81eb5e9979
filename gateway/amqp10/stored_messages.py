"""1.0 messages and annotations as the durable store keeps them.

A 1.0 message is stored as its encoded bytes, as received. :func:`container_from_stored`
rebuilds the container with the scanner a transfer goes through (``inspect_amqp10``);
the exchange and routing key it was routed with, its receive time and its x-death
records come from the row. The annotations a ``modified`` outcome added to one queue
entry are kept as an encoded 1.0 map, so symbols stay symbols.
"""
from __future__ import annotations

from proton import Data

from gateway.amqp10.payloads import user_id_text
from gateway.broker.message import Encoding, MessageContainer
from gateway.store.interface import StoredMessage
from translators.amqp10_sections import annotation_key, inspect_amqp10, owned_value
from translators.primitive_encoder import Unencodable, encode_value

__all__ = ["container_from_stored", "encode_annotations", "decode_annotations"]

_AMQP10 = Encoding.AMQP10


def container_from_stored(stored: StoredMessage) -> MessageContainer:
    """The container of a stored 1.0 message. Raises ``TranslationError`` when the bytes
    do not scan."""
    row = stored.row
    encoded = bytes(row.body)
    summary = inspect_amqp10(encoded)
    ttl_ms = None if row.deaths else summary.ttl_ms
    # positional, in __init__'s order (see there)
    return MessageContainer(
        _AMQP10, encoded, row.exchange, row.routing_key, summary.application_properties or None,
        summary.durable, summary.priority, ttl_ms, row.created_at, summary.body_size,
        summary.message_id, summary.correlation_id, user_id_text(summary), None, row.message_id,
        row.deaths, stored.annotations, summary.body_at)


def encode_annotations(annotations: dict) -> bytes:
    """An annotations dict as an encoded 1.0 map (keys as symbols or ulongs): proton's
    octets, by the pure-Python encoder where it can (an array, say, goes through
    proton's ``Data``). Why: the store's commit thread encodes one per outbox row, and
    proton's ``Data`` cost it 12 us a row, each of its many C calls giving up and taking
    back the interpreter lock the event loop wants."""
    value = {annotation_key(k): owned_value(v) for k, v in annotations.items()}
    try:
        return encode_value(value)
    except Unencodable:
        data = Data()
        data.put_object(value)
        return bytes(data.encode())


def decode_annotations(blob: bytes) -> dict:
    """Inverse of :func:`encode_annotations`."""
    data = Data()
    data.decode(bytes(blob))
    data.next()
    value = data.get_object()
    return dict(value) if value else {}
