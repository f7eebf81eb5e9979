"""AMQP 1.0 message -> 0-9-1 properties and body (the table is ``translators/MAPPING.md``).

Everything 0-9-1 has no field for travels in ``x-amqp-1.0-*`` headers so that
:func:`translators.to_amqp10.to_amqp10` restores the 1.0 sections exactly; annotations
named ``x-amqp-0-9-1-*`` that :func:`to_amqp10` wrote become 0-9-1 properties again.
:func:`with_added_annotations` gives a 0-9-1 message the annotations a 1.0 consumer's
``modified`` outcome added, in the same ``x-amqp-1.0-message-annotations`` header.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

from proton import symbol, ubyte

from translators.amqp10_sections import annotation_key, decode_section_fast, owned_value
from translators.basic_properties import BasicProperties
from translators.body import body_to_amqp091, labelled_sections
from translators.errors import TranslationError
from translators.mapping import AMQP10_BODY_TYPE, Annotation, Reserved
from translators.property_forms import (
    CARRIED_PROPERTIES,
    CarriedProperty,
    expiration_ttl,
    fits_shortstr,
    needs_reserved_header,
    same_typed,
    survives_clients,
)
from translators.section_scan import (BODY_CODES, SectionCode, SectionSpan, ends_with_body,
                                      scan_sections)
from translators.plain_values import Carriage, carriage, name_carriage, plain_field_value
from translators.typed_values import map_from_field, map_to_field, to_field_value

__all__ = ["amqp091_properties", "plain_body", "properties_source", "to_amqp091",
           "with_added_annotations"]


def _padded(value: Any, size: int, section: str) -> list:
    if value is None:
        return [None] * size
    if not isinstance(value, list):
        raise TranslationError(section, "must be a list")
    return list(value[:size]) + [None] * (size - len(value))


def _as_map(value: Any, section: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TranslationError(section, "must be a map")
    return dict(value)


def _take(annotations: dict, key: symbol, accept: Callable[[Any], bool]) -> Any:
    """Remove and return the annotation ``key`` (a symbol key) if ``accept`` likes its
    value; else leave it (it then travels with the other annotations) and return None."""
    for k, value in annotations.items():
        if k == key and type(k) is symbol:
            if accept(value):
                del annotations[k]
                return value
            return None
    return None


def _short(value: Any) -> bool:
    return type(value) is str and fits_shortstr(value)


def _from_amqp091(annotations: dict) -> bool:
    """True if the only annotations left are the ``x-exchange``/``x-routing-key`` pair that
    ``to_amqp10`` writes for a 0-9-1 publish: the message came from 0-9-1 and needs no
    ``x-amqp-1.0-message-annotations`` header."""
    return (
        len(annotations) == 2
        and all(type(k) is symbol for k in annotations)
        and type(annotations.get(Annotation.EXCHANGE)) is str
        and type(annotations.get(Annotation.ROUTING_KEY)) is str
    )


# The per-field rules, flattened once: (index, attribute, reserved header, Reserved, form,
# inverse)
_RULES = tuple((rule.index, rule.amqp091, rule.reserved.value, rule.reserved, rule.form,
                rule.inverse) for rule in CARRIED_PROPERTIES)
_MESSAGE_ANNOTATIONS = Reserved.MESSAGE_ANNOTATIONS.value
#: the annotations ``_annotations_to_properties`` may take back into properties
_TAKEN_PREFIX = "x-amqp-0-9-1-"
_PROPERTIES = Reserved.PROPERTIES.value
_APP_PROPERTIES = Reserved.APP_PROPERTIES.value
_ROBUST, _FRAGILE, _INEXACT = Carriage.ROBUST, Carriage.FRAGILE, Carriage.INEXACT
_OTHER_MAPS = ((SectionCode.DELIVERY_ANNOTATIONS, Reserved.DELIVERY_ANNOTATIONS.value,
                "delivery_annotations"),
               (SectionCode.FOOTER, Reserved.FOOTER.value, "footer"))


def properties_source(encoded: bytes) -> tuple[Optional[bytes], bool, bytes, list[SectionSpan]]:
    """``(prefix, labelled, body, spans)``: ``body`` is ``to_amqp091(encoded)``'s body, and
    its properties are a function of ``prefix`` (the sections before the body) and
    ``labelled`` (the body is not a single data section) alone, when the message has no
    message-annotations (whose ``x-amqp-0-9-1-*`` entries are checked against the body)
    and nothing after the body (a footer); ``prefix`` is None otherwise. With ``spans``
    (the sections) ``amqp091_properties`` makes the properties without scanning again.
    Raises ``TranslationError`` on a malformed encoding.

    Why: a sender usually repeats the same header and properties, and translating
    and encoding them was a fifth of a 1.0 -> 0-9-1 delivery; a caller can keep the
    encoded result per ``(prefix, labelled)``.
    """
    spans = scan_sections(encoded)
    body_spans = [span for span in spans if span.code in BODY_CODES]
    body, labelled = body_to_amqp091(encoded, body_spans)
    if not ends_with_body(spans, body_spans):
        return None, labelled, body, spans
    return bytes(encoded[:body_spans[0].start]), labelled, body, spans


def plain_body(encoded: bytes, body_at: int) -> bytes:
    """``to_amqp091(encoded)``'s body for a message whose ``inspect_amqp10`` summary gave
    ``body_at`` (one data section, with the short descriptor, ending the message): its
    payload, without scanning the sections again. Its properties are those of
    ``properties_source``'s ``(encoded[:body_at], False)``."""
    if encoded[body_at + 3] == 0xA0:
        return bytes(encoded[body_at + 5:])
    return bytes(encoded[body_at + 8:])


def to_amqp091(encoded: bytes) -> tuple[BasicProperties, bytes]:
    """Translate an encoded 1.0 message (the payload of a transfer) for a 0-9-1 consumer.

    Returns ``(properties, body)``. Header ``first-acquirer``/``delivery-count`` and the
    ``x-exchange``/``x-routing-key`` annotations are delivery information and are not
    carried (the 0-9-1 deliver method has redelivered, exchange and routing key). Raises
    ``TranslationError`` on a malformed encoding.
    """
    spans = scan_sections(encoded)
    body, labelled = body_to_amqp091(encoded, [span for span in spans if span.code in BODY_CODES])
    return amqp091_properties(encoded, spans, body, labelled), body


def amqp091_properties(encoded: bytes, spans: list[SectionSpan], body: bytes,
                       labelled: bool) -> BasicProperties:
    """``to_amqp091``'s properties, from the sections already scanned and the body
    already made (``properties_source`` gives all four). Raises ``TranslationError``."""
    decoded: dict[SectionCode, Any] = {}
    carriable: dict[SectionCode, SectionSpan] = {}
    for span in spans:
        if span.code not in BODY_CODES:
            decoded[span.code] = decode_section_fast(encoded, span)
            carriable[span.code] = span

    header = _padded(decoded.get(SectionCode.HEADER), 5, "header")
    props = _padded(decoded.get(SectionCode.PROPERTIES), 13, "properties")
    annotations = _as_map(decoded.get(SectionCode.MESSAGE_ANNOTATIONS), "message-annotations")
    fields: dict[str, Any] = {}
    headers: dict[str, Any] = {}

    # application-properties first, so a 0-9-1 consumer sees them in their order; their
    # section travels too unless every plain value comes back as it is (see below)
    worst = _ROBUST
    for key, value in _as_map(decoded.get(SectionCode.APPLICATION_PROPERTIES), "application-properties").items():
        name = name_carriage(key)
        if name is None:
            worst = _INEXACT  # no header name for it: only the section can carry it
            continue
        headers[key] = plain_field_value(value)
        if worst is not _INEXACT:
            level = carriage(value)
            if name > level:
                level = name
            if level > worst:
                worst = level

    durable, priority, ttl = header[0], header[1], header[2]
    if type(durable) is bool:
        fields["delivery_mode"] = 2 if durable else 1
    if type(priority) is ubyte:
        fields["priority"] = int(priority)
    ttl = int(ttl) if isinstance(ttl, int) and not isinstance(ttl, bool) else None
    if ttl is not None:
        fields["expiration"] = str(ttl)

    carry_properties = False
    for index, attribute, name, which, form, inverse in _RULES:
        value = props[index]
        if value is None:
            continue
        form_value = form(value)
        if attribute is not None:
            fields[attribute] = form_value
        if needs_reserved_header(form_value, inverse, value):
            written = headers[name] = to_field_value(value)
            if not carry_properties and not survives_clients(which, written):
                carry_properties = True
    if carry_properties:  # the exact section too: a client may re-type a header's value
        span = carriable[SectionCode.PROPERTIES]
        headers[_PROPERTIES] = bytes(encoded[span.start:span.end])

    if annotations:
        _annotations_to_properties(annotations, fields, durable, ttl, props, body, labelled)
    from_amqp091 = _from_amqp091(annotations)
    if not from_amqp091:
        headers[_MESSAGE_ANNOTATIONS] = map_to_field(annotations, symbol)
    # values that came from 0-9-1 headers are 0-9-1 values already: what a client may do
    # to them it does to any header
    if worst is _INEXACT or (worst is _FRAGILE and not from_amqp091):
        span = carriable[SectionCode.APPLICATION_PROPERTIES]
        headers[_APP_PROPERTIES] = bytes(encoded[span.start:span.end])
    for code, name, label in _OTHER_MAPS:
        section = decoded.get(code)
        if section is not None:
            section = _as_map(section, label)
            if section:
                headers[name] = map_to_field(section, symbol)
    if labelled:
        fields["type"] = AMQP10_BODY_TYPE
    return BasicProperties(headers=headers or None, **fields)


def _annotations_to_properties(
    annotations: dict,
    fields: dict[str, Any],
    durable: Any,
    ttl: Optional[int],
    props: list,
    body: bytes,
    labelled: bool,
) -> None:
    """Move the ``x-amqp-0-9-1-*`` annotations that ``to_amqp10`` writes into 0-9-1
    properties. Each predicate accepts exactly what ``to_amqp10`` would have written for
    the message as it stands, so anything else stays an annotation and round-trips."""
    mode = _take(annotations, Annotation.DELIVERY_MODE,
                 lambda v: type(v) is ubyte and v not in (1, 2) and durable is False)
    if mode is not None:
        fields["delivery_mode"] = int(mode)

    def expiration_ok(v: Any) -> bool:
        if not _short(v):
            return False
        parsed = expiration_ttl(v)
        return (parsed is None and ttl is None) or (parsed is not None and parsed == ttl and str(parsed) != v)

    expiration = _take(annotations, Annotation.EXPIRATION, expiration_ok)
    if expiration is not None:
        fields["expiration"] = expiration
    for rule in CARRIED_PROPERTIES:
        if rule.overflow is None or rule.amqp091 is None:
            continue
        back = rule.overflow.from_annotation
        current = props[rule.index]

        def overflow_ok(v: Any, rule: CarriedProperty = rule, back: Callable = back, current: Any = current) -> bool:
            candidate = back(v)
            if candidate is None:
                return False
            value = rule.inverse(candidate)
            return same_typed(value, current) and (value is None or rule.form(value) != candidate)

        taken = _take(annotations, rule.overflow.key, overflow_ok)
        if taken is not None:
            fields[rule.amqp091] = back(taken)
    kind = _take(annotations, Annotation.TYPE,
                 lambda v: _short(v) and not labelled and (v != AMQP10_BODY_TYPE or not labelled_sections(body)))
    if kind is not None:
        fields["type"] = kind
    for key, name in ((Annotation.APP_ID, "app_id"), (Annotation.CLUSTER_ID, "cluster_id")):
        text = _take(annotations, key, _short)
        if text is not None:
            fields[name] = text


def with_added_annotations(
    properties: BasicProperties, annotations: dict, *, exchange: str, routing_key: str
) -> BasicProperties:
    """``properties`` of a 0-9-1 message whose 1.0 form was given ``annotations`` (a 1.0
    ``modified`` outcome), for the next 0-9-1 consumer.

    Why: what a 1.0 consumer added must reach a 0-9-1 consumer the way any 1.0 message
    annotation does, in the ``x-amqp-1.0-message-annotations`` header (MAPPING.md,
    table A), and come back on the way to 1.0. The header holds the annotations the
    message's 1.0 form has: those its header already carries (else the ``x-exchange``
    and ``x-routing-key`` of the publish, as ``to_amqp10`` writes them), updated with
    ``annotations``; the same result as translating to 1.0, merging and translating
    back, without touching the rest. Raises ``TranslationError`` for a malformed header.
    """
    headers = dict(properties.headers or {})
    name = Reserved.MESSAGE_ANNOTATIONS.value
    if name in headers:
        merged = map_from_field(headers[name], symbol, name)
    else:
        merged = {Annotation.EXCHANGE: exchange, Annotation.ROUTING_KEY: routing_key}
    for key, value in annotations.items():
        merged[annotation_key(key)] = owned_value(value)
    headers[name] = map_to_field(merged, symbol)
    return dataclasses.replace(properties, headers=headers)


def annotations_header(annotations: dict) -> Optional[dict]:
    """The value of the ``x-amqp-1.0-message-annotations`` header that ``amqp091_properties``
    gives a message with message-annotations ``annotations``, when that header is all
    they change: the properties are then those of the same message without that section
    (where the header is there, empty, at the same place) with this value in it. None
    (translate in full) when an annotation is one that goes back into a 0-9-1 property
    (``x-amqp-0-9-1-*``), or when they are only the ``x-exchange``/``x-routing-key`` pair.
    Why: a receiving gateway has a forwarded message's annotations decoded already, and
    the properties without them recur, so only this header is made per message."""
    if _from_amqp091(annotations):
        return None
    for key in annotations:
        if str(key).startswith(_TAKEN_PREFIX):
            return None
    return map_to_field(annotations, symbol)
