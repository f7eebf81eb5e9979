"""Hot-path helpers for the 1.0 engine and the broker: read the routing fields of an
encoded 1.0 message, and rewrite its header, without decoding or re-encoding the rest.

Why: a message that goes from a 1.0 sender to a 1.0 receiver is never translated; the
broker needs only a few fields (durable, priority, ttl, to, subject, application
properties for the headers exchange, size), and each delivery needs a header with its own
``delivery-count`` and ``first-acquirer``. :mod:`translators.section_scan` finds the
section boundaries from the constructors alone; only the sections that hold wanted fields
are decoded (by proton's codec), and :func:`with_delivery_header` splices a new header in
front of the untouched bytes (``translators.delivery_header``);
:func:`with_message_annotations` likewise re-encodes only
the message-annotations section (a 1.0 ``modified`` outcome's annotations), so several
data sections, a footer and every other section keep their exact bytes.
"""
from __future__ import annotations

import struct
from typing import Any, NamedTuple, Optional

from proton import Array, Data, DataException, Described, symbol, ulong

from translators.errors import TranslationError
from translators.mapping import Annotation
from translators.primitive_decoder import Unsupported, decode_value
from translators.primitive_encoder import Unencodable, encode_described_list, encode_described_map
from translators.section_scan import (
    BODY_CODES,
    SectionCode,
    SectionSpan,
    ends_with_body,
    scan_sections,
)

__all__ = [
    "Amqp10Summary",
    "inspect_amqp10",
    "with_message_annotations",
    "with_to",
    "owned_value",
    "annotation_key",
    "annotations_place",
    "plain_data_at",
    "decode_section",
    "decode_section_fast",
    "decode_sections",
    "data_payload",
    "HEADER_FIELDS",
    "DEFAULT_PRIORITY",
    "PROPERTIES_FIELDS",
]

HEADER_FIELDS = ("durable", "priority", "ttl", "first-acquirer", "delivery-count")
DEFAULT_PRIORITY = 4
"""A 1.0 message's priority when its header has none (spec 3.2.1)."""
PROPERTIES_FIELDS = (
    "message-id", "user-id", "to", "subject", "reply-to", "correlation-id", "content-type",
    "content-encoding", "absolute-expiry-time", "creation-time", "group-id",
    "group-sequence", "reply-to-group-id",
)


class Amqp10Summary(NamedTuple):
    """The routing-relevant fields of an encoded 1.0 message, as proton decodes them.

    Absent fields are ``None`` except where the spec gives a default (``durable`` False,
    ``first_acquirer`` False, ``delivery_count`` 0). ``priority`` ``None`` means the
    spec default ``DEFAULT_PRIORITY`` (4). ``ttl_ms``, ``absolute_expiry_time`` and ``creation_time`` are
    milliseconds (the latter two POSIX). ``application_properties`` holds proton values,
    which compare equal to 0-9-1 field values of the same number or string. ``body_size``
    is the size of the body a 0-9-1 consumer would get: the octets of a single ``data``
    section, else the length of all encoded body sections.

    A named tuple, as immutable as a frozen dataclass and made several times faster (one
    per 1.0 message received).
    """

    durable: bool = False
    priority: Optional[int] = None
    ttl_ms: Optional[int] = None
    first_acquirer: bool = False
    delivery_count: int = 0
    message_id: Any = None
    correlation_id: Any = None
    user_id: Optional[bytes] = None
    to: Optional[str] = None
    subject: Optional[str] = None
    reply_to: Optional[str] = None
    absolute_expiry_time: Optional[int] = None
    creation_time: Optional[int] = None
    application_properties: dict = {}  # noqa: RUF012 - read-only, see inspect_amqp10
    body_size: int = 0
    #: where the body starts when it is one ``data`` section (short descriptor), the last
    #: section, after no message-annotations; None otherwise. Then ``encoded[:body_at]`` is all
    #: a 0-9-1 rendering's properties depend on, and ``to_amqp091.plain_body`` gives its body
    #: without scanning again (see ``to_amqp091.properties_source``).
    body_at: Optional[int] = None


def owned_value(value: Any) -> Any:
    """``value`` with every proton ``memoryview`` (its binary type) turned into ``bytes``,
    so values outlive the decoder and hash like the 0-9-1 side's ``bytes``."""
    kind = type(value)
    if kind is memoryview:
        return value.tobytes()
    if kind is list:
        return [owned_value(v) for v in value]
    if isinstance(value, dict):
        return {owned_value(k): owned_value(v) for k, v in value.items()}
    if kind is Described:
        return Described(owned_value(value.descriptor), owned_value(value.value))
    if kind is Array:
        return Array(owned_value(value.descriptor), value.type, *(owned_value(e) for e in value.elements))
    return value


def decode_section(encoded: bytes, span: SectionSpan) -> Any:
    """The value of one section (without its descriptor) as proton's Python value, with
    binaries as ``bytes``.

    Raises ``TranslationError`` if proton cannot decode it."""
    data = Data()
    try:
        data.decode(encoded[span.value_start : span.end])
    except DataException as exc:
        raise TranslationError(span.code.name.lower(), f"cannot decode: {exc}") from None
    data.next()
    return owned_value(data.get_object())


def decode_section_fast(encoded: bytes, span: SectionSpan) -> Any:
    """As :func:`decode_section`, through the pure-Python primitive decoder when the
    section holds only primitives, lists and maps (the usual case), else through proton."""
    try:
        value, end = decode_value(encoded, span.value_start)
    except Unsupported:
        return decode_section(encoded, span)
    if end != span.end:
        raise TranslationError(span.code.name.lower(), "section size mismatch")
    return value


def decode_sections(encoded: bytes) -> list[tuple[SectionCode, Any]]:
    """Every section of ``encoded`` as ``(code, value)``, in order (for tests and tools)."""
    return [(span.code, decode_section(encoded, span)) for span in scan_sections(encoded)]


def data_payload(encoded: bytes, span: SectionSpan) -> bytes:
    """The octets inside a ``data`` section; raises ``TranslationError`` if its value is
    not a binary."""
    code = encoded[span.value_start]
    if code == 0xA0:
        return bytes(encoded[span.value_start + 2 : span.end])
    if code == 0xB0:
        return bytes(encoded[span.value_start + 5 : span.end])
    raise TranslationError("data", "a data section must hold a binary")


def data_size(encoded: bytes, span: SectionSpan) -> int:
    """``len(data_payload(encoded, span))`` without copying the payload (spans end within
    ``encoded``: ``scan_sections`` checked them); raises like :func:`data_payload`."""
    code = encoded[span.value_start]
    if code == 0xA0:
        return span.end - span.value_start - 2
    if code == 0xB0:
        return span.end - span.value_start - 5
    raise TranslationError("data", "a data section must hold a binary")


#: (prefix, summary fields, prefix length) of the latest plain message: see _remember_plain
_last_plain: Optional[tuple[bytes, tuple, int]] = None
#: a data section's head under the short descriptor: vbin32, vbin8 (size follows)
_DATA_HEAD32 = b"\x00\x53\x75\xb0"
_DATA_HEAD8 = b"\x00\x53\x75\xa0"
_U32 = struct.Struct(">I")

#: members read through their class cost an enum lookup each: the hot paths use these
_MESSAGE_ANNOTATIONS = SectionCode.MESSAGE_ANNOTATIONS
_DATA, _HEADER, _PROPERTIES, _APPLICATION_PROPERTIES = (
    SectionCode.DATA, SectionCode.HEADER, SectionCode.PROPERTIES, SectionCode.APPLICATION_PROPERTIES)


def _typed(value: Any, kind: type) -> Any:
    """``value`` if it is a ``kind``, else ``None``: wrongly typed fields count as absent."""
    if value is None:
        return None
    return value if isinstance(value, kind) and not (kind is int and isinstance(value, bool)) else None


#: ``Amqp10Summary``'s fields but ``body_size`` and ``body_at`` by the sections before the
#: body (see ``inspect_amqp10``); at most ``SUMMARIES_MAX``, forgotten at once when full
_SUMMARIES: dict[bytes, tuple] = {}
SUMMARIES_MAX = 256
_new_summary = tuple.__new__


def inspect_amqp10(encoded: bytes) -> Amqp10Summary:
    """Read the routing fields of an encoded 1.0 message (see :class:`Amqp10Summary`).

    Decodes only the header, properties and application-properties sections. Raises
    ``TranslationError`` on a malformed encoding.

    Every field but ``body_size`` is a function of the octets before the first body
    section, and a sender usually repeats them: the decoded fields are kept per prefix
    (a message with a fresh message-id misses and is decoded as before). That is why the
    ``application_properties`` of a summary are to be read, never changed.
    """
    last = _last_plain
    # its prefix and one data section? (bytes, or the bytearray proton's recv returns)
    if last is not None and (encoded.__class__ is bytes or encoded.__class__ is bytearray):
        prefix, fields, at = last
        if encoded.startswith(prefix):  # (plain_data_at, inlined: once per 1.0 message)
            head, end = encoded[at:at + 4], len(encoded)
            if head == _DATA_HEAD32:
                if end >= at + 8 and at + 8 + _U32.unpack_from(encoded, at + 4)[0] == end:
                    return _new_summary(Amqp10Summary, fields + (end - at - 8, at))
            elif head == _DATA_HEAD8 and end >= at + 5 and at + 5 + encoded[at + 4] == end:
                return _new_summary(Amqp10Summary, fields + (end - at - 5, at))
    spans = scan_sections(encoded)
    body_spans = [span for span in spans if span.code in BODY_CODES]
    if len(body_spans) == 1 and body_spans[0].code is _DATA:
        body_size = data_size(encoded, body_spans[0])
    else:
        body_size = sum(s.end - s.start for s in body_spans)
    if not body_spans:
        return _new_summary(Amqp10Summary, _summary_fields(encoded, spans) + (body_size, None))
    body = body_spans[0]
    prefix = bytes(encoded[:body.start])
    key = prefix
    for span in spans:  # the summary never reads the message-annotations: a forwarded
        if span.code is _MESSAGE_ANNOTATIONS:  # message's are new every time, the rest not
            key = prefix[:span.start] + prefix[span.end:]
            break
        if span.start >= body.start:
            break
    fields = _SUMMARIES.get(key)
    if fields is None:
        fields = _summary_fields(encoded, spans)
        if len(_SUMMARIES) >= SUMMARIES_MAX:
            _SUMMARIES.clear()
        _SUMMARIES[key] = fields
    plain = (len(body_spans) == 1 and body.code is _DATA
             and body.value_start == body.start + 3 and ends_with_body(spans, body_spans))
    if plain:
        _remember_plain(prefix, fields)
    return _new_summary(Amqp10Summary, fields + (body_size, body.start if plain else None))


def plain_data_at(encoded: bytes, at: int) -> int:
    """The payload size of the one data section (short descriptor) that starts at ``at``
    and ends ``encoded``; -1 when ``encoded`` does not end so."""
    head, end = encoded[at:at + 4], len(encoded)
    if head == _DATA_HEAD32:
        if end >= at + 8 and at + 8 + _U32.unpack_from(encoded, at + 4)[0] == end:
            return end - at - 8
    elif head == _DATA_HEAD8 and end >= at + 5 and at + 5 + encoded[at + 4] == end:
        return end - at - 5
    return -1


def _remember_plain(prefix: bytes, fields: tuple) -> None:
    """The prefix of the latest plain message (sections that decide its summary, then one
    data section under the short descriptor, nothing after it). Why: a sender repeats
    its prefix, and a message that is that prefix and one data section exactly needs no
    scan at all: the data section's head and the message's length are all that is left
    to check. ``body_at`` is then the prefix's length."""
    global _last_plain
    _last_plain = (prefix, fields, len(prefix))


def _summary_fields(encoded: bytes, spans: list[SectionSpan]) -> tuple:
    """``Amqp10Summary``'s fields in their declared order, without ``body_size`` and
    ``body_at`` (the two that depend on more than the sections before the body)."""
    header: Any = None
    properties: Any = None
    app_properties: Any = None
    for span in spans:
        code = span.code
        if code is _HEADER:
            header = decode_section_fast(encoded, span)
        elif code is _PROPERTIES:
            properties = decode_section_fast(encoded, span)
        elif code is _APPLICATION_PROPERTIES:
            app_properties = decode_section_fast(encoded, span)
    h = _fields(header, 5)
    p = _fields(properties, 13)
    creation = _typed(p[9], int)
    expiry = _typed(p[8], int)
    return (
        h[0] is True,                    # durable
        _typed(h[1], int),               # priority
        _typed(h[2], int),               # ttl_ms
        h[3] is True,                    # first_acquirer
        _typed(h[4], int) or 0,          # delivery_count
        p[0],                            # message_id
        p[5],                            # correlation_id
        _typed(p[1], bytes),             # user_id
        _typed(p[2], str),               # to
        _typed(p[3], str),               # subject
        _typed(p[4], str),               # reply_to
        None if expiry is None else int(expiry),
        None if creation is None else int(creation),
        app_properties if isinstance(app_properties, dict) else {},
    )


_NONES = (None,) * 13


def _fields(values: Any, size: int) -> Any:
    """A list section's fields padded with None to ``size`` (a non-list: all None)."""
    if type(values) is not list or not values:
        return _NONES
    if len(values) >= size:
        return values
    return values + [None] * (size - len(values))


# ---------------------------------------------------------------- annotations merge


def annotation_key(key: Any) -> Any:
    """Annotation keys are symbols or ulongs (spec 3.2.3); a plain ``str`` becomes a symbol."""
    if type(key) is str:
        return symbol(key)
    if type(key) is int:
        return ulong(key)
    return key


def with_message_annotations(encoded: bytes, annotations: dict, drop: tuple = ()) -> bytes:
    """Return ``encoded`` with ``annotations`` merged into its message-annotations
    section: existing entries are kept, and entries of the same key replaced; keys in
    ``drop`` are removed. Without
    such a section one is inserted where the spec puts it (after the header and
    delivery-annotations). Only that section is decoded and re-encoded; every other
    section is copied octet for octet. Raises ``TranslationError`` on a malformed
    encoding or a value proton cannot encode.
    """
    if not annotations and not drop:
        return encoded
    start, end, existing = annotations_place(encoded)
    return _merged(encoded, start, end, existing, annotations, drop)


def _merged(encoded: bytes, start: int, end: int, existing: Any, annotations: dict,
            drop: tuple) -> bytes:
    """``encoded`` with the message-annotations ``existing`` (at ``start:end``) merged
    with ``annotations`` and without the keys in ``drop``."""
    if existing is not None and not isinstance(existing, dict):
        raise TranslationError("message-annotations", "must be a map")
    merged: dict = dict(existing or {})
    for key, value in annotations.items():
        merged[annotation_key(key)] = owned_value(value)
    for key in drop:
        merged.pop(key, None)
    return _spliced(encoded, start, end, SectionCode.MESSAGE_ANNOTATIONS, merged,
                    "message-annotations")


_X_EXCHANGE, _X_ROUTING_KEY = Annotation.EXCHANGE, Annotation.ROUTING_KEY
#: the message-annotations sections of ``with_routing_annotations``, by (exchange, routing
#: key): a delivery of a message without annotations of its own encodes nothing
_ROUTING_SECTIONS: dict[tuple[str, str], bytes] = {}
#: distinct (exchange, routing key) pairs kept; the cache is emptied when it is full
ROUTING_SECTIONS_KEPT = 4096


#: the octets of the last message :func:`with_routing_annotations` placed, up to and with
#: its body's descriptor, and its message-annotations place (``annotations_place``)
_last_place: Optional[tuple[bytes, int, int, Any]] = None
_SHORT_DESCRIPTOR = b"\x00\x53"


def with_routing_annotations(encoded: bytes, exchange: str, routing_key: str) -> bytes:
    """``encoded`` with ``x-exchange`` and ``x-routing-key`` in its message-annotations, as
    RabbitMQ 4 delivers every message (merged as :func:`with_message_annotations` does; a
    message that has no such section gets one whose octets are made once per pair).
    Raises ``TranslationError`` on a malformed encoding.

    A sender repeats the sections before the body: where the last message's annotations
    were is kept with its octets up to its body's descriptor, and a message that starts
    with them is not scanned again (its sections before the body are those octets)."""
    last = _last_place
    if last is not None and encoded.startswith(last[0]):
        start, end, existing = last[1], last[2], last[3]
    else:
        start, end, existing = _routing_place(encoded)
    if start != end:  # a section of its own: merge into it
        return _merged(encoded, start, end, existing,
                       {_X_EXCHANGE: exchange, _X_ROUTING_KEY: routing_key}, ())
    key = (exchange, routing_key)
    section = _ROUTING_SECTIONS.get(key)
    if section is None:
        if len(_ROUTING_SECTIONS) >= ROUTING_SECTIONS_KEPT:
            _ROUTING_SECTIONS.clear()
        section = _ROUTING_SECTIONS[key] = _spliced(
            b"", 0, 0, SectionCode.MESSAGE_ANNOTATIONS,
            {_X_EXCHANGE: exchange, _X_ROUTING_KEY: routing_key}, "message-annotations")
    return encoded[:start] + section + encoded[start:]


def _routing_place(encoded: bytes) -> tuple[int, int, Any]:
    """``annotations_place`` of ``encoded``, kept in ``_last_place`` with the octets up to
    its body's descriptor (a short one: the octets then name the section)."""
    global _last_place
    spans = scan_sections(encoded)
    place = _place_in(encoded, spans)
    for span in spans:
        if span.code in BODY_CODES:
            if encoded[span.start:span.start + 2] == _SHORT_DESCRIPTOR:
                _last_place = (bytes(encoded[:span.start + 3]), *place)
            break
    return place


def annotations_place(encoded: bytes) -> tuple[int, int, Any]:
    """``(start, end, value)``: the message-annotations section's octets and its decoded
    value; without one, where the spec puts it (after the header and
    delivery-annotations) as ``start == end``, and None. Raises ``TranslationError`` on a
    malformed encoding."""
    return _place_in(encoded, scan_sections(encoded))


def _place_in(encoded: bytes, spans: Any) -> tuple[int, int, Any]:
    """``annotations_place`` from the sections ``scan_sections`` found in ``encoded``."""
    start = end = 0
    for span in spans:
        if span.code is SectionCode.MESSAGE_ANNOTATIONS:
            return span.start, span.end, decode_section_fast(encoded, span)
        if span.code in (SectionCode.HEADER, SectionCode.DELIVERY_ANNOTATIONS):
            start = end = span.end
        else:
            break
    return start, end, None


def _spliced(encoded: bytes, start: int, end: int, code: SectionCode, value: Any,
             name: str) -> bytes:
    """``encoded`` with octets ``start:end`` replaced by section ``code`` holding
    ``value`` (a map or a list). The pure-Python encoder writes proton's octets in a few
    microseconds (a forwarded message gets two splices); a value it leaves to proton (an
    array, an unknown type) goes through proton's ``Data``. Raises ``TranslationError``
    (naming ``name``) if proton cannot encode it either."""
    try:
        if type(value) is dict:
            section = encode_described_map(code, value)
        else:
            section = encode_described_list(code, value)
    except Unencodable:
        data = Data()
        try:
            data.put_object(Described(ulong(code), value))
        except (DataException, KeyError, TypeError, UnicodeEncodeError) as exc:
            raise TranslationError(name, f"cannot encode: {exc!r}") from None
        section = bytes(data.encode())
    return encoded[:start] + section + encoded[end:]


# ---------------------------------------------------------------- a missing 'to'

_TO_INDEX = PROPERTIES_FIELDS.index("to")


def with_to(encoded: bytes, to: str) -> bytes:
    """Return ``encoded`` with its properties' ``to`` set to ``to`` when it has none (the
    message unchanged when it has one). Only the properties section is decoded and
    re-encoded (or inserted, after the header and annotations); every other section is
    copied octet for octet. Why: a message sent on a link to ``node@container`` without
    ``to`` is forwarded with the link's address as its ``to`` (the remote's
    ``amqp$transfer`` reads it). Raises ``TranslationError`` on a malformed encoding."""
    spans = scan_sections(encoded)
    start = end = 0
    fields: list = [None] * len(PROPERTIES_FIELDS)
    for span in spans:
        if span.code is SectionCode.PROPERTIES:
            existing = decode_section_fast(encoded, span)
            if not isinstance(existing, list):
                raise TranslationError("properties", "must be a list")
            if len(existing) > _TO_INDEX and existing[_TO_INDEX] is not None:
                return encoded
            fields = list(_fields([owned_value(v) for v in existing], len(PROPERTIES_FIELDS)))
            start, end = span.start, span.end
            break
        if span.code in (SectionCode.HEADER, SectionCode.DELIVERY_ANNOTATIONS,
                         SectionCode.MESSAGE_ANNOTATIONS):
            start = end = span.end
        else:
            break
    fields[_TO_INDEX] = to
    while fields and fields[-1] is None:
        fields.pop()
    return _spliced(encoded, start, end, SectionCode.PROPERTIES, fields, "properties")
