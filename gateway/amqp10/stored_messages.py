"""1.0 messages and annotations as the durable store keeps them.

A 1.0 message is stored as its encoded bytes, as received. :func:`container_from_stored`
rebuilds the container with the scanner a transfer goes through (``inspect_amqp10``);
the exchange and routing key it was routed with, its receive time and its x-death
records come from the row. The annotations a ``modified`` outcome added to one queue
entry are kept as an encoded 1.0 map, so symbols stay symbols.
"""
from __future__ import annotations

import struct
from typing import Any, NamedTuple, Optional

from proton import Data

from gateway.amqp10.payloads import user_id_text
from gateway.broker.message import Encoding, MessageContainer
from gateway.store.interface import StoredMessage
from translators.amqp10_sections import annotation_key, inspect_amqp10, owned_value
from translators.int_slot import IntSlot, learn_slot
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
    back the interpreter lock the event loop wants. A map like the last one but for one
    integer (past one octet) is the last one's octets with that integer put in
    (``IntSlot``): nothing encoded."""
    global _last_slot
    kept = _last_slot
    if kept is not None:
        keys, key_types, value_types, lists, probe, key, slot = kept
        if tuple(annotations) == keys and tuple(map(type, annotations)) == key_types \
                and tuple(map(type, annotations.values())) == value_types:
            value = annotations[key]
            plain = not -128 <= value <= 127 and {**annotations, key: 0} == probe
            for k in lists:
                plain = plain and set(map(type, annotations[k])) <= _STR
            if plain:
                try:
                    return slot.fill(value)
                except struct.error:  # past 64 bits
                    pass
    learnt = _learn(annotations)
    if learnt is not None:
        _last_slot = learnt
        return learnt.slot.fill(annotations[learnt.key])
    try:
        return _encoded(annotations)
    except Unencodable:
        value = {annotation_key(k): owned_value(v) for k, v in annotations.items()}
        data = Data()
        data.put_object(value)
        return bytes(data.encode())


_STR = {str}


class _MapSlot(NamedTuple):
    """A map ``encode_annotations`` makes by putting one integer into its last octets:
    equal values of another type (a symbol for a str, True for 1) encode otherwise, so
    the types are compared too, those in lists (strings only) included."""

    keys: tuple
    key_types: tuple
    value_types: tuple
    lists: tuple
    probe: dict
    key: Any
    slot: IntSlot


#: the latest map ``encode_annotations`` found an integer slot in: an outbox row's
#: forwarding annotations differ from the last row's in the gateway id alone
_last_slot: Optional[_MapSlot] = None


def _learn(annotations: dict) -> Optional[_MapSlot]:
    """The slot of ``annotations``' one integer past one octet, when its other values are
    strings, integers or lists of strings; else None."""
    key = None
    lists = []
    for k, v in annotations.items():
        t = type(v)
        if t is int and not -128 <= v <= 127:
            if key is not None:
                return None  # two: the one that varies is not known
            key = k
        elif t is list and set(map(type, v)) <= _STR:
            lists.append(k)
        elif t is not str and t is not int:
            return None
    if key is None:
        return None
    try:
        slot = learn_slot(lambda v: _encoded({**annotations, key: v}), annotations[key])
    except (Unencodable, struct.error):
        return None
    if slot is None:
        return None
    return _MapSlot(tuple(annotations), tuple(map(type, annotations)),
                    tuple(map(type, annotations.values())), tuple(lists),
                    {**annotations, key: 0}, key, slot)


def _encoded(annotations: dict) -> bytes:
    """Raises ``Unencodable`` (a value only proton's ``Data`` encodes)."""
    return encode_value({annotation_key(k): owned_value(v) for k, v in annotations.items()})


def decode_annotations(blob: bytes) -> dict:
    """Inverse of :func:`encode_annotations`."""
    data = Data()
    data.decode(bytes(blob))
    data.next()
    value = data.get_object()
    return dict(value) if value else {}
