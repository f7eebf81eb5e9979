"""0-9-1 messages and values as the durable store keeps them.

A 0-9-1 message is stored as it arrived: its property octets and its body
(``broker.queued_message.message_row``). :func:`container_from_stored` rebuilds the
container from those bytes with the same decoder a publish uses, so headers, ids, TTL and
priority are derived once more instead of being serialised a second time.

Argument tables (queues, exchanges, bindings) and x-death records have no arrival
encoding of their own; they are kept as a 0-9-1 field value (:func:`encode_stored_value`),
the encoding their typed values (``Int32``, ``Timestamp``, ``Decimal`` ...) came in.
"""
from __future__ import annotations

from typing import Any

from gateway.amqp091.content import decode_properties
from gateway.amqp091.values import decode_field_value, encode_field_value
from gateway.broker.message import Encoding, MessageContainer
from gateway.store.interface import StoredMessage

__all__ = ["container_from_stored", "encode_stored_value", "decode_stored_value"]

_AMQP091 = Encoding.AMQP091


def container_from_stored(stored: StoredMessage) -> MessageContainer:
    """The container of a stored 0-9-1 message. A message with deaths has no TTL any more
    (dead-lettering removed it). Raises ``ConnectionException`` for damaged properties."""
    row = stored.row
    raw = bytes(row.properties or b"")
    props = decode_properties(raw)
    ttl_ms = None
    if props.expiration is not None and not row.deaths and props.expiration.isdigit():
        ttl_ms = int(props.expiration)
    body = bytes(row.body)
    # positional, in __init__'s order (see there)
    return MessageContainer(
        _AMQP091, (raw, body), row.exchange, row.routing_key, props.headers,
        props.delivery_mode == 2, props.priority, ttl_ms, row.created_at, len(body),
        props.message_id, props.correlation_id, props.user_id, props, row.message_id,
        row.deaths, stored.annotations)


def encode_stored_value(value: Any) -> bytes:
    """A table or list as one 0-9-1 field value (type letter first)."""
    return encode_field_value(value)


def decode_stored_value(blob: bytes) -> Any:
    """Inverse of :func:`encode_stored_value`. Raises ``DecodeError``."""
    value, _ = decode_field_value(bytes(blob), 0)
    return value
