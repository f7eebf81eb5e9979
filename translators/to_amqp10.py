"""0-9-1 properties and body -> encoded AMQP 1.0 message (the table is
``translators/MAPPING.md``).

``x-amqp-1.0-*`` headers written by :func:`translators.to_amqp091.to_amqp091` are removed
and restore the 1.0 fields and sections they carry; 0-9-1-only properties become
``x-amqp-0-9-1-*`` message annotations.
"""
from __future__ import annotations

from typing import Any, Optional

from proton import Data, DataException, Described, symbol, ubyte, uint, ulong

from translators.basic_properties import BasicProperties
from translators.body import body_to_amqp10, labelled_sections
from translators.errors import TranslationError
from translators.primitive_encoder import Unencodable, encode_described_list, encode_described_map
from translators.mapping import AMQP10_BODY_TYPE, RESERVED_NAMES, Annotation, Reserved
from translators.carried_sections import (MISSING, carried_application, carried_properties,
                                          property_candidate, restored_application)
from translators.property_forms import (CARRIED_PROPERTIES, amqp10_field_value, expiration_ttl,
                                        same_typed)
from translators.carried_counts import TO_AMQP10, count_carried
from translators.delivery_header import with_delivery_header
from translators.section_scan import SectionCode, binary_section_head
from translators.typed_values import from_field_value, map_from_field

__all__ = ["to_amqp10"]


def _strip(fields: list) -> list:
    """Drop trailing nulls: AMQP 1.0 lists may omit them (part 1 section 1.4)."""
    end = len(fields)
    while end and fields[end - 1] is None:
        end -= 1
    return fields[:end]


def _octet(value: int, field: str) -> ubyte:
    if not 0 <= value <= 0xFF:
        raise TranslationError(field, f"{value} is not an octet")
    return ubyte(value)


# The per-field rules, flattened once (enum attribute access per message is not free):
# (index, BasicProperties attribute, reserved header name, Reserved, form, inverse, overflow)
_RULES = tuple((rule.index, rule.amqp091, rule.reserved.value, rule.reserved, rule.form,
                rule.inverse, rule.overflow) for rule in CARRIED_PROPERTIES)
_FROM_091 = tuple(r for r in _RULES if r[1] is not None)
_MESSAGE_ANNOTATIONS = Reserved.MESSAGE_ANNOTATIONS.value
_PROPERTIES = Reserved.PROPERTIES.value
_APP_PROPERTIES = Reserved.APP_PROPERTIES.value
_DELIVERY_ANNOTATIONS = Reserved.DELIVERY_ANNOTATIONS.value
_FOOTER = Reserved.FOOTER.value
_HEADER_CODE = int(SectionCode.HEADER)
_DELIVERY_ANNOTATIONS_CODE = int(SectionCode.DELIVERY_ANNOTATIONS)
_MESSAGE_ANNOTATIONS_CODE = int(SectionCode.MESSAGE_ANNOTATIONS)
_PROPERTIES_CODE = int(SectionCode.PROPERTIES)
_APPLICATION_PROPERTIES_CODE = int(SectionCode.APPLICATION_PROPERTIES)
_FOOTER_CODE = int(SectionCode.FOOTER)


#: the encoded sections before the body and the annotations they carry, by (properties,
#: exchange, routing key), for property lists that recur (see to_amqp10)
_PREFIXES: dict[tuple, tuple[bytes, tuple[str, ...]]] = {}
#: the annotations that carry what 1.0 has no field for (``carried_counts``)
_CARRYING = frozenset(str(a) for a in vars(Annotation).values()
                      if isinstance(a, symbol) and a.startswith("x-amqp-0-9-1-"))
PREFIXES_MAX = 256


def to_amqp10(
    properties: BasicProperties, body: bytes, *, exchange: str = "", routing_key: str = "",
    first_delivery: bool = False, raw_properties: Optional[bytes] = None,
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

    Without headers, the sections before the body depend only on the properties and the
    publish's exchange and routing key, and many publishers repeat those on every
    message: such prefixes are kept (at most ``PREFIXES_MAX``, forgotten at once when
    full), unless the message has its own id, correlation id or timestamp (then the key
    would not recur). Why: building and encoding the sections was most of a 0-9-1 ->
    1.0 delivery's translation.

    ``first_delivery``: the result is ``with_delivery_header(to_amqp10(...),
    delivery_count=0, first_acquirer=True)``, what a 1.0 receiver gets on a message's first
    delivery; with a kept prefix the header is in it already and the body is copied once.
    ``raw_properties``: the 0-9-1 property octets ``properties`` were decoded from, when
    the caller has them: the kept prefixes are then found by them (a hash of a few octets
    in C, where the decoded properties hash all their fields in Python).
    """
    if (properties.headers is None and properties.message_id is None
            and properties.correlation_id is None and properties.timestamp is None
            and properties.type != AMQP10_BODY_TYPE):
        key = (properties if raw_properties is None else raw_properties, exchange,
               routing_key, first_delivery)
        kept = _PREFIXES.get(key)
        if kept is None:
            kept = _sections_before_body(properties, exchange, routing_key)
            if first_delivery:
                kept = with_delivery_header(kept[0], delivery_count=0, first_acquirer=True), kept[1]
            if len(_PREFIXES) >= PREFIXES_MAX:
                _PREFIXES.clear()
            _PREFIXES[key] = kept
        prefix, carried = kept
        if carried:
            count_carried(TO_AMQP10, carried)
        return b"".join((prefix, binary_section_head(SectionCode.DATA, len(body)), body))
    encoded, carried = _to_amqp10(properties, body, exchange, routing_key)
    if carried:
        count_carried(TO_AMQP10, carried)
    if first_delivery:
        return with_delivery_header(encoded, delivery_count=0, first_acquirer=True)
    return encoded


def _sections_before_body(properties: BasicProperties, exchange: str,
                          routing_key: str) -> tuple[bytes, tuple[str, ...]]:
    """What ``_to_amqp10`` writes before the body for properties without headers (and so
    without a footer): its output for an empty body, less the empty body's section; and
    the annotations that carry fields."""
    empty_body = body_to_amqp10(b"", False)
    encoded, carried = _to_amqp10(properties, b"", exchange, routing_key)
    assert encoded.endswith(empty_body)
    return encoded[:len(encoded) - len(empty_body)], carried


def _to_amqp10(properties: BasicProperties, body: bytes, exchange: str,
               routing_key: str) -> tuple[bytes, tuple[str, ...]]:
    """The encoded message, and the names of the annotations carrying 0-9-1-only fields."""
    headers = properties.headers
    if headers:
        headers = dict(headers)
        reserved = {name: headers.pop(name) for name in RESERVED_NAMES if name in headers}
    else:
        headers, reserved = {}, {}
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

    props: Any = [None] * 13
    if reserved:
        section = carried_properties(reserved[_PROPERTIES]) if _PROPERTIES in reserved else None
        for index, attribute, name, which, form, inverse, overflow in _RULES:
            current = getattr(properties, attribute) if attribute else None
            restored = reserved.get(name, MISSING)
            if section is not None:
                restored = property_candidate(section, index, restored, attribute is not None)
            elif restored is not MISSING:  # no section: the header's value
                restored = from_field_value(restored)
            if restored is not MISSING:
                restored = amqp10_field_value(which, restored)
                if form(restored) == current:
                    props[index] = restored
                    continue
            if current is not None:
                props[index] = _translated(current, form, inverse, overflow, extra)
        if section is not None and all(
                same_typed(value, carried) for value, carried in zip(props, section.values)):
            # every field as it was: the section as it came
            props = section.octets if any(v is not None for v in props) else []
        else:
            props = _strip(props)
    else:  # nothing carried from 1.0: only the 0-9-1 fields
        for index, attribute, _name, _which, form, inverse, overflow in _FROM_091:
            current = getattr(properties, attribute)
            if current is not None:
                props[index] = _translated(current, form, inverse, overflow, extra)
        props = _strip(props)

    if _MESSAGE_ANNOTATIONS in reserved:
        annotations = map_from_field(reserved[_MESSAGE_ANNOTATIONS], symbol, _MESSAGE_ANNOTATIONS)
    else:
        annotations = {Annotation.EXCHANGE: exchange, Annotation.ROUTING_KEY: routing_key}
    if extra:
        annotations.update(extra)
    as_sections = properties.type == AMQP10_BODY_TYPE and labelled_sections(body)
    if properties.type is not None and not as_sections:
        annotations[Annotation.TYPE] = properties.type
    if properties.app_id is not None:
        annotations[Annotation.APP_ID] = properties.app_id
    if properties.cluster_id is not None:
        annotations[Annotation.CLUSTER_ID] = properties.cluster_id

    if _APP_PROPERTIES in reserved:
        application: Any = restored_application(carried_application(reserved[_APP_PROPERTIES]),
                                                headers)
    else:
        application = {name: from_field_value(value) for name, value in headers.items()}
    delivery_annotations = (
        map_from_field(reserved[_DELIVERY_ANNOTATIONS], symbol, _DELIVERY_ANNOTATIONS)
        if _DELIVERY_ANNOTATIONS in reserved else None)
    footer = (map_from_field(reserved[_FOOTER], symbol, _FOOTER) if _FOOTER in reserved else None)
    sections = ((_HEADER_CODE, header), (_DELIVERY_ANNOTATIONS_CODE, delivery_annotations),
                (_MESSAGE_ANNOTATIONS_CODE, annotations), (_PROPERTIES_CODE, props),
                (_APPLICATION_PROPERTIES_CODE, application))
    encoded_body = body_to_amqp10(body, as_sections)
    carried = tuple(str(k) for k in annotations if k in _CARRYING)
    try:
        return _encode(sections, encoded_body, footer), carried
    except Unencodable:
        pass  # an array somewhere, say: proton encodes this one
    try:
        return _encode_with_proton(sections, encoded_body, footer), carried
    except (DataException, KeyError, TypeError, UnicodeEncodeError) as exc:
        raise TranslationError("encoding", f"cannot encode: {exc!r}") from None


def _translated(current: Any, form: Any, inverse: Any, overflow: Any, extra: dict) -> Any:
    """The 1.0 value of a 0-9-1 property; the 0-9-1 value also goes to its overflow
    annotation when the 1.0 value would not give it back."""
    value = inverse(current)
    if overflow is not None and (value is None or form(value) != current):
        extra[overflow.key] = overflow.to_annotation(current)
    return value


def _encode(sections: tuple, encoded_body: bytes, footer: Optional[dict]) -> bytes:
    """The sections by the pure-Python encoder (proton's octets, see primitive_encoder);
    a section given as ``bytes`` is already encoded (a carried section)."""
    parts = []
    for code, value in sections:
        if value:
            if type(value) is bytes:
                parts.append(value)
            elif code == _HEADER_CODE or code == _PROPERTIES_CODE:
                parts.append(encode_described_list(code, value))
            else:
                parts.append(encode_described_map(code, value))
    parts.append(encoded_body)
    if footer:
        parts.append(encode_described_map(_FOOTER_CODE, footer))
    return b"".join(parts)


def _encode_with_proton(sections: tuple, encoded_body: bytes, footer: Optional[dict]) -> bytes:
    parts = []
    for code, value in sections:
        if value:
            if type(value) is bytes:
                parts.append(value)
            else:
                data = Data()
                data.put_object(Described(ulong(code), value))
                parts.append(bytes(data.encode()))
    encoded = b"".join(parts) + encoded_body
    if footer:
        tail = Data()
        tail.put_object(Described(ulong(_FOOTER_CODE), footer))
        encoded += bytes(tail.encode())
    return encoded
