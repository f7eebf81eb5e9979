"""Find the sections of an encoded AMQP 1.0 message without decoding them.

Why: the 1.0 engine and the broker need section boundaries (to rewrite the header, to
measure the body, to pass bytes through untouched) far more often than they need values.
Every AMQP 1.0 constructor says how long its value is from the first one to five octets
(AMQP 1.0 part 1 section 1.6 "Encodings"): the high nibble of the format code gives the
width category, and variable, compound and array encodings carry a 1- or 4-octet size.
So one pass over the top-level constructors yields every section as a byte range.

A section is a described value: ``0x00``, a descriptor (``smallulong 0x53 0x70..0x78``,
``ulong 0x80``, or the symbolic name ``amqp:header:list`` ...), then the value.
"""
from __future__ import annotations

import struct
from enum import IntEnum
from typing import NamedTuple

from translators.errors import TranslationError

__all__ = [
    "SectionCode",
    "SectionSpan",
    "BODY_CODES",
    "value_end",
    "scan_sections",
    "ends_with_body",
    "binary_section_head",
    "encode_binary_section",
]


class SectionCode(IntEnum):
    """Descriptor codes of the message sections (AMQP 1.0 part 3 section 3.2)."""

    HEADER = 0x70
    DELIVERY_ANNOTATIONS = 0x71
    MESSAGE_ANNOTATIONS = 0x72
    PROPERTIES = 0x73
    APPLICATION_PROPERTIES = 0x74
    DATA = 0x75
    AMQP_SEQUENCE = 0x76
    AMQP_VALUE = 0x77
    FOOTER = 0x78


BODY_CODES = frozenset({SectionCode.DATA, SectionCode.AMQP_SEQUENCE, SectionCode.AMQP_VALUE})
_BY_NUMBER: dict[int, SectionCode] = {int(c): c for c in SectionCode}
#: a member read through its class costs an enum lookup: the hot paths use this global
_MESSAGE_ANNOTATIONS = SectionCode.MESSAGE_ANNOTATIONS

_SYMBOLIC_NAMES: dict[bytes, SectionCode] = {
    b"amqp:header:list": SectionCode.HEADER,
    b"amqp:delivery-annotations:map": SectionCode.DELIVERY_ANNOTATIONS,
    b"amqp:message-annotations:map": SectionCode.MESSAGE_ANNOTATIONS,
    b"amqp:properties:list": SectionCode.PROPERTIES,
    b"amqp:application-properties:map": SectionCode.APPLICATION_PROPERTIES,
    b"amqp:data:binary": SectionCode.DATA,
    b"amqp:amqp-sequence:list": SectionCode.AMQP_SEQUENCE,
    b"amqp:amqp-value:*": SectionCode.AMQP_VALUE,
    b"amqp:footer:map": SectionCode.FOOTER,
}

# Order rank of each section; body sections share a rank and may repeat.
_RANK = {
    SectionCode.HEADER: 0,
    SectionCode.DELIVERY_ANNOTATIONS: 1,
    SectionCode.MESSAGE_ANNOTATIONS: 2,
    SectionCode.PROPERTIES: 3,
    SectionCode.APPLICATION_PROPERTIES: 4,
    SectionCode.DATA: 5,
    SectionCode.AMQP_SEQUENCE: 5,
    SectionCode.AMQP_VALUE: 5,
    SectionCode.FOOTER: 6,
}

# Fixed-width format codes and their value widths; everything else is sized or invalid.
_FIXED: dict[int, int] = {}
for _codes, _width in (
    ((0x40, 0x41, 0x42, 0x43, 0x44, 0x45), 0),
    ((0x50, 0x51, 0x52, 0x53, 0x54, 0x55, 0x56), 1),
    ((0x60, 0x61), 2),
    ((0x70, 0x71, 0x72, 0x73, 0x74), 4),
    ((0x80, 0x81, 0x82, 0x83, 0x84), 8),
    ((0x94, 0x98), 16),
):
    for _code in _codes:
        _FIXED[_code] = _width
_SIZE1 = frozenset({0xA0, 0xA1, 0xA3, 0xC0, 0xC1, 0xE0})
_SIZE4 = frozenset({0xB0, 0xB1, 0xB3, 0xD0, 0xD1, 0xF0})


class SectionSpan(NamedTuple):
    """One top-level section: ``encoded[start:end]`` is the whole described value and
    ``encoded[value_start:end]`` its value (after the descriptor).

    A named tuple, not a frozen dataclass: as immutable, and made in a tenth of the time
    (every 1.0 message in or out is scanned)."""

    code: SectionCode
    start: int
    value_start: int
    end: int


#: ``SectionSpan`` without its Python-level ``__new__`` (the scan's inner loop)
_new_span = tuple.__new__


def value_end(buf: bytes, pos: int) -> int:
    """Return the offset just past the encoded value that starts at ``pos``.

    Raises ``TranslationError`` for an unknown format code or a value that runs past the
    end of ``buf`` (incomplete input is an error here: a transfer is always whole).
    """
    try:
        code = buf[pos]
    except IndexError:
        raise TranslationError("encoding", f"value expected at offset {pos}") from None
    if code == 0x00:
        return value_end(buf, value_end(buf, pos + 1))
    width = _FIXED.get(code)
    if width is not None:
        end = pos + 1 + width
    elif code in _SIZE1:
        if pos + 2 > len(buf):
            raise TranslationError("encoding", f"truncated size at offset {pos}")
        end = pos + 2 + buf[pos + 1]
    elif code in _SIZE4:
        if pos + 5 > len(buf):
            raise TranslationError("encoding", f"truncated size at offset {pos}")
        end = pos + 5 + int.from_bytes(buf[pos + 1 : pos + 5], "big")
    else:
        raise TranslationError("encoding", f"invalid format code 0x{code:02x} at offset {pos}")
    if end > len(buf):
        raise TranslationError("encoding", f"value at offset {pos} runs past the end")
    return end


def _descriptor_code(buf: bytes, pos: int, end: int) -> SectionCode:
    """The section code of the descriptor encoded in ``buf[pos:end]``."""
    code = buf[pos]
    number: int | None = None
    if code == 0x53 and end == pos + 2:
        number = buf[pos + 1]
    elif code == 0x80 and end == pos + 9:
        number = int.from_bytes(buf[pos + 1 : end], "big")
    elif code == 0xA3:
        name = _SYMBOLIC_NAMES.get(bytes(buf[pos + 2 : end]))
        if name is not None:
            return name
    elif code == 0xB3:
        name = _SYMBOLIC_NAMES.get(bytes(buf[pos + 5 : end]))
        if name is not None:
            return name
    section = _BY_NUMBER.get(number)  # type: ignore[arg-type]
    if section is None:
        raise TranslationError("encoding", f"not a message section at offset {pos - 1}")
    return section


_LIST0, _NULL_CODE = 0x45, 0x40
_U32 = struct.Struct(">I")
_VBIN8_HEAD = struct.Struct(">BBBBB")
_VBIN32_HEAD = struct.Struct(">BBBBI")


def scan_sections(encoded: bytes, *, body_only: bool = False) -> list[SectionSpan]:
    """Split ``encoded`` into its top-level sections, in order.

    Checks the section order of AMQP 1.0 part 3 section 3.2 (header, delivery-annotations,
    message-annotations, properties, application-properties, body sections, footer; each
    non-body section at most once). With ``body_only`` every section must be a body section
    (used for a labelled 0-9-1 body). Empty input gives an empty list. Raises
    ``TranslationError`` on anything else; it does not validate the inside of a value.

    Runs on every 1.0 message received and every one delivered to 0-9-1, so the usual
    encodings (a ``smallulong`` descriptor; a sized value or ``list0``) are measured
    inline and everything else goes through ``value_end``.
    """
    spans: list[SectionSpan] = []
    append = spans.append
    pos = 0
    rank = -1
    size = len(encoded)
    while pos < size:
        if encoded[pos] != 0x00:
            raise TranslationError("encoding", f"section expected at offset {pos}")
        if pos + 3 < size and encoded[pos + 1] == 0x53:  # smallulong descriptor: the usual
            value_start = pos + 3
            code = _BY_NUMBER.get(encoded[pos + 2])  # type: ignore[assignment]
            if code is None:
                raise TranslationError("encoding", f"not a message section at offset {pos}")
        else:
            value_start = value_end(encoded, pos + 1)
            code = _descriptor_code(encoded, pos + 1, value_start)
            if value_start >= size:
                raise TranslationError("encoding", f"value expected at offset {value_start}")
        fmt = encoded[value_start]
        if fmt in _SIZE1 and value_start + 2 <= size:
            end = value_start + 2 + encoded[value_start + 1]
            if end > size:
                raise TranslationError("encoding", f"value at offset {value_start} runs past the end")
        elif fmt in _SIZE4 and value_start + 5 <= size:
            end = value_start + 5 + _U32.unpack_from(encoded, value_start + 1)[0]
            if end > size:
                raise TranslationError("encoding", f"value at offset {value_start} runs past the end")
        elif fmt == _LIST0 or fmt == _NULL_CODE:
            end = value_start + 1
        else:
            end = value_end(encoded, value_start)
        new_rank = _RANK[code]
        if new_rank <= rank and (new_rank < rank or code not in BODY_CODES):
            raise TranslationError("encoding", f"section {code.name} out of order")
        if body_only and code not in BODY_CODES:
            raise TranslationError("encoding", f"{code.name} is not a body section")
        rank = new_rank
        append(_new_span(SectionSpan, (code, pos, value_start, end)))
        pos = end
    return spans


def ends_with_body(spans: list[SectionSpan], body_spans: list[SectionSpan]) -> bool:
    """A body ends the message (no footer after it) and no message-annotations section
    precedes it: the layout in which the sections before the body decide a 0-9-1
    rendering's properties (``to_amqp091.properties_source``, ``inspect_amqp10``'s
    ``body_at``). ``body_spans`` are the body sections of ``spans``."""
    if not body_spans or spans[-1] is not body_spans[-1]:
        return False
    # by the section order, only a header and delivery-annotations can come before it
    for span in spans[:3]:
        if span.code is _MESSAGE_ANNOTATIONS:
            return False
    return True


def binary_section_head(code: SectionCode, size: int) -> bytes:
    """The octets before the payload in ``encode_binary_section(code, payload)`` for a
    payload of ``size`` octets: a caller can join head, payload and other sections in one
    copy."""
    if size <= 0xFF:
        return _VBIN8_HEAD.pack(0x00, 0x53, code, 0xA0, size)
    return _VBIN32_HEAD.pack(0x00, 0x53, code, 0xB0, size)


def encode_binary_section(code: SectionCode, payload: bytes) -> bytes:
    """Encode a ``data`` section (or any section whose value is ``binary``) around
    ``payload``, choosing vbin8 or vbin32 by size."""
    return binary_section_head(code, len(payload)) + payload
