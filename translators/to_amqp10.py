"""0-9-1 properties and body -> encoded AMQP 1.0 message (the table is
``translators/MAPPING.md``).

``x-amqp-1.0-*`` headers written by :func:`translators.to_amqp091.to_amqp091` are removed
and restore the 1.0 fields and sections they carry; 0-9-1-only properties become
``x-amqp-0-9-1-*`` message annotations.
"""
from __future__ import annotations

import struct
from typing import Any, Optional

from proton import Data, DataException, Described, symbol, ubyte, uint, ulong

from translators.basic_properties import BasicProperties
from translators.body import body_to_amqp10, labelled_sections
from translators.errors import TranslationError
from translators.mapping import AMQP10_BODY_TYPE, RESERVED_NAMES, Annotation, Reserved
from translators.property_forms import CARRIED_PROPERTIES, amqp10_field_value, expiration_ttl
from translators.section_scan import SectionCode
from translators.value_types import from_field_value, map_from_field

__all__ = ["to_amqp10"]

_MISSING = object()


def _strip(fields: list) -> list:
    """Drop trailing nulls: AMQP 1.0 lists may omit them (part 1 section 1.4)."""
    end = len(fields)
    while end and fields[end - 1] is None:
        end -= 1
    return fields[:end]


_PACK_U32 = struct.Struct(">I").pack


def _text_map_section(code: int, value: dict) -> Optional[bytes]:
    """The described section ``code`` holding ``value`` (symbol keys, str values), encoded
    byte for byte as proton's ``Data`` does (map32, sym8/sym32, str8/str32), or None when
    a key or value is of another type (then proton encodes it).

    Why: the annotations map (``x-exchange``, ``x-routing-key``) is in every 0-9-1 message
    bound for 1.0, and proton's generic ``put_object`` costs more than the rest of the
    translation.
    """
    parts = []
    append = parts.append
    for k, v in value.items():
        if type(k) is not symbol or type(v) is not str or not k.isascii():
            return None
        kb = k.encode("ascii")
        append(b"\xa3" + bytes((len(kb),)) + kb if len(kb) < 256 else b"\xb3" + _PACK_U32(len(kb)) + kb)
        vb = v.encode("utf-8")
        append(b"\xa1" + bytes((len(vb),)) + vb if len(vb) < 256 else b"\xb1" + _PACK_U32(len(vb)) + vb)
    elements = b"".join(parts)
    return (b"\x00\x53" + bytes((code,)) + b"\xd1" + _PACK_U32(len(elements) + 4)
            + _PACK_U32(2 * len(value)) + elements)


def _octet(value: int, field: str) -> ubyte:
    if not 0 <= value <= 0xFF:
        raise TranslationError(field, f"{value} is not an octet")
    return ubyte(value)


def to_amqp10(
    properties: BasicProperties, body: bytes, *, exchange: str = "", routing_key: str = ""
) -> bytes:
    """Translate 0-9-1 content for a 1.0 receiver; returns the encoded message sections
    (header, delivery-annotations, message-annotations, properties,
    application-properties, body, footer; empty sections are omitted).

    ``exchange`` and ``routing_key`` (those of the 0-9-1 publish) become the
    ``x-exchange``/``x-routing-key`` annotations, unless the message came from 1.0 (its
    ``x-amqp-1.0-message-annotations`` header is present): then its annotations are
    restored exactly instead. The header has no ``first-acquirer``/``delivery-count``;
    the 1.0 engine adds them per delivery with ``with_delivery_header``. Raises
    ``TranslationError`` for a malformed reserved header or an out-of-range property.
    """
    headers = dict(properties.headers or {})
    reserved = {name: headers.pop(name) for name in RESERVED_NAMES if name in headers}
    extra: dict[symbol, Any] = {}

    mode = properties.delivery_mode
    durable = None if mode is None else mode == 2
    if mode is not None and mode not in (1, 2):
        extra[Annotation.DELIVERY_MODE] = _octet(mode, "delivery-mode")
    priority = None if properties.priority is None else _octet(properties.priority, "priority")
    ttl = None
    if properties.expiration is not None:
        parsed = expiration_ttl(properties.expiration)
        if parsed is not None:
            ttl = uint(parsed)
        if parsed is None or str(parsed) != properties.expiration:
            extra[Annotation.EXPIRATION] = properties.expiration
    header = _strip([durable, priority, ttl])

    props: list = [None] * 13
    for rule in CARRIED_PROPERTIES:
        current = getattr(properties, rule.amqp091) if rule.amqp091 else None
        carried = reserved.get(rule.reserved.value, _MISSING)
        if carried is not _MISSING:
            restored = amqp10_field_value(rule.reserved, from_field_value(carried))
            if rule.form(restored) == current:
                props[rule.index] = restored
                continue
        if current is None:
            continue
        value = rule.inverse(current)
        if rule.overflow is not None and (value is None or rule.form(value) != current):
            extra[rule.overflow.key] = rule.overflow.to_annotation(current)
        props[rule.index] = value
    props = _strip(props)

    if Reserved.MESSAGE_ANNOTATIONS.value in reserved:
        annotations = map_from_field(
            reserved[Reserved.MESSAGE_ANNOTATIONS.value], symbol, Reserved.MESSAGE_ANNOTATIONS.value
        )
    else:
        annotations = {Annotation.EXCHANGE: exchange, Annotation.ROUTING_KEY: routing_key}
    annotations.update(extra)
    as_sections = properties.type == AMQP10_BODY_TYPE and labelled_sections(body)
    if properties.type is not None and not as_sections:
        annotations[Annotation.TYPE] = properties.type
    if properties.app_id is not None:
        annotations[Annotation.APP_ID] = properties.app_id
    if properties.cluster_id is not None:
        annotations[Annotation.CLUSTER_ID] = properties.cluster_id

    application = {name: from_field_value(value) for name, value in headers.items()}
    if Reserved.APPLICATION_PROPERTIES.value in reserved:
        application.update(map_from_field(
            reserved[Reserved.APPLICATION_PROPERTIES.value], str, Reserved.APPLICATION_PROPERTIES.value
        ))

    sections = Data()
    try:
        if header:
            sections.put_object(Described(ulong(SectionCode.HEADER), header))
        fast_annotations = _text_map_section(SectionCode.MESSAGE_ANNOTATIONS, annotations)
        head = b""  # sections encoded before the hand-encoded annotations, and those
        for code, name in (
            (SectionCode.DELIVERY_ANNOTATIONS, Reserved.DELIVERY_ANNOTATIONS),
            (SectionCode.MESSAGE_ANNOTATIONS, None),
            (SectionCode.PROPERTIES, None),
            (SectionCode.APPLICATION_PROPERTIES, None),
        ):
            if name is not None:
                value: Any = (
                    map_from_field(reserved[name.value], symbol, name.value)
                    if name.value in reserved
                    else None
                )
            else:
                value = {
                    SectionCode.MESSAGE_ANNOTATIONS: annotations,
                    SectionCode.PROPERTIES: props,
                    SectionCode.APPLICATION_PROPERTIES: application,
                }[code]
            if value:
                if code == SectionCode.MESSAGE_ANNOTATIONS and fast_annotations is not None:
                    # sections are concatenated values: flush what Data holds, then ours
                    head = bytes(sections.encode()) + fast_annotations
                    sections = Data()
                    continue
                sections.put_object(Described(ulong(code), value))
        encoded = head + bytes(sections.encode()) + body_to_amqp10(body, as_sections)
        if Reserved.FOOTER.value in reserved:
            footer = map_from_field(reserved[Reserved.FOOTER.value], symbol, Reserved.FOOTER.value)
            if footer:
                tail = Data()
                tail.put_object(Described(ulong(SectionCode.FOOTER), footer))
                encoded += tail.encode()
    except (DataException, KeyError, TypeError, UnicodeEncodeError) as exc:
        raise TranslationError("encoding", f"cannot encode: {exc!r}") from None
    return encoded
