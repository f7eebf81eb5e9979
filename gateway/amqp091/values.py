"""Codecs for 0-9-1 primitives, field tables and field arrays.

Decoders take ``(buf, offset)`` and return ``(value, new_offset)`` (pamqp style), where
``buf`` is exactly one frame payload: every length is checked against ``len(buf)`` before
slicing, and a short or malformed input raises :class:`~gateway.amqp091.errors.DecodeError`
(the caller turns it into a 502/501 connection exception with the method named).

Field values decode into the typed values of :mod:`translators.field_types` and encode back to the
same letter (RabbitMQ's letter set, REQUIREMENTS 2.4). The 0-9-1 spec letters that do not
clash with RabbitMQ's are decoded too: ``U`` (int16, as ``Int16``) and ``L`` (int64, as a plain
``int``); they re-encode as ``s`` and ``l``. Nesting is bounded by :data:`MAX_DEPTH`.
"""
from __future__ import annotations

import logging
import struct
from decimal import Decimal, InvalidOperation
from typing import Any, Callable

from gateway.amqp091.errors import DecodeError
from translators.field_types import (
    Float32,
    Int8,
    Int16,
    Int32,
    LongStrBytes,
    Timestamp,
    UInt8,
    UInt16,
    UInt32,
)

__all__ = [
    "MAX_DEPTH",
    "decode_shortstr",
    "decode_longstr",
    "decode_table",
    "decode_array",
    "decode_field_value",
    "encode_shortstr",
    "encode_longstr",
    "encode_table",
    "encode_array",
    "encode_field_value",
]

log = logging.getLogger(__name__)

MAX_DEPTH = 64
"""Deepest nesting of tables/arrays accepted, so a hostile peer cannot exhaust the stack."""

_B = struct.Struct(">B")
_b = struct.Struct(">b")
_H = struct.Struct(">H")
_h = struct.Struct(">h")
_I = struct.Struct(">I")
_i = struct.Struct(">i")
_Q = struct.Struct(">Q")
_q = struct.Struct(">q")
_f = struct.Struct(">f")
_d = struct.Struct(">d")
_Bi = struct.Struct(">Bi")


# --- strings -----------------------------------------------------------------------------


def decode_shortstr(buf: bytes, o: int) -> tuple[str, int]:
    """A 1-octet length then UTF-8 text. Raises DecodeError if short or not UTF-8."""
    try:
        n = buf[o]
    except IndexError:
        raise DecodeError("short string length missing") from None
    o += 1
    end = o + n
    if end > len(buf):
        raise DecodeError(f"short string of {n} octets overruns the frame")
    try:
        return buf[o:end].decode("utf-8"), end
    except UnicodeDecodeError:
        raise DecodeError("short string is not valid UTF-8") from None


def decode_longstr(buf: bytes, o: int) -> tuple[bytes, int]:
    """A 4-octet length then opaque octets (returned as ``bytes``)."""
    if o + 4 > len(buf):
        raise DecodeError("long string length missing")
    (n,) = _I.unpack_from(buf, o)
    o += 4
    end = o + n
    if end > len(buf):
        raise DecodeError(f"long string of {n} octets overruns the frame")
    return bytes(buf[o:end]), end


def encode_shortstr(value: str) -> bytes:
    """Raises ValueError when the UTF-8 form is longer than 255 octets (a local bug)."""
    raw = value.encode("utf-8")
    if len(raw) > 255:
        raise ValueError(f"short string too long ({len(raw)} octets > 255)")
    return _B.pack(len(raw)) + raw


def encode_longstr(value: bytes | str) -> bytes:
    raw = value.encode("utf-8") if isinstance(value, str) else bytes(value)
    return _I.pack(len(raw)) + raw


# --- field values ------------------------------------------------------------------------


def _fixed(st: struct.Struct, wrap: Callable[[Any], Any]) -> Callable[[bytes, int, int], tuple[Any, int]]:
    size = st.size
    unpack_from = st.unpack_from

    def decode(buf: bytes, o: int, depth: int) -> tuple[Any, int]:
        if o + size > len(buf):
            raise DecodeError("field value overruns the frame")
        return wrap(unpack_from(buf, o)[0]), o + size

    return decode


def _decode_bool(buf: bytes, o: int, depth: int) -> tuple[bool, int]:
    if o >= len(buf):
        raise DecodeError("field value overruns the frame")
    return buf[o] != 0, o + 1


def _decode_decimal(buf: bytes, o: int, depth: int) -> tuple[Decimal, int]:
    if o + 5 > len(buf):
        raise DecodeError("decimal overruns the frame")
    places, unscaled = _Bi.unpack_from(buf, o)
    return Decimal(unscaled).scaleb(-places), o + 5


def _decode_long_string(buf: bytes, o: int, depth: int) -> tuple[str | LongStrBytes, int]:
    raw, o = decode_longstr(buf, o)
    try:
        return raw.decode("utf-8"), o
    except UnicodeDecodeError:
        return LongStrBytes(raw), o


def _decode_bytes(buf: bytes, o: int, depth: int) -> tuple[bytes, int]:
    return decode_longstr(buf, o)


def _decode_void(buf: bytes, o: int, depth: int) -> tuple[None, int]:
    return None, o


def _decode_nested_table(buf: bytes, o: int, depth: int) -> tuple[dict, int]:
    return decode_table(buf, o, depth + 1)


def _decode_nested_array(buf: bytes, o: int, depth: int) -> tuple[list, int]:
    return decode_array(buf, o, depth + 1)


_DECODERS: dict[int, Callable[[bytes, int, int], tuple[Any, int]]] = {
    ord("t"): _decode_bool,
    ord("b"): _fixed(_b, Int8),
    ord("B"): _fixed(_B, UInt8),
    ord("s"): _fixed(_h, Int16),
    ord("U"): _fixed(_h, Int16),  # 0-9-1 spec letter for int16; no clash with RabbitMQ
    ord("u"): _fixed(_H, UInt16),
    ord("I"): _fixed(_i, Int32),
    ord("i"): _fixed(_I, UInt32),
    ord("l"): _fixed(_q, int),
    ord("L"): _fixed(_q, int),  # 0-9-1 spec letter for int64; no clash with RabbitMQ
    ord("f"): _fixed(_f, Float32),
    ord("d"): _fixed(_d, float),
    ord("D"): _decode_decimal,
    ord("S"): _decode_long_string,
    ord("x"): _decode_bytes,
    ord("A"): _decode_nested_array,
    ord("T"): _fixed(_Q, Timestamp),
    ord("F"): _decode_nested_table,
    ord("V"): _decode_void,
}


def decode_field_value(buf: bytes, o: int, depth: int = 0) -> tuple[Any, int]:
    """One type letter and its value. Unknown letters raise DecodeError naming the letter."""
    if o >= len(buf):
        raise DecodeError("field type missing")
    letter = buf[o]
    decoder = _DECODERS.get(letter)
    if decoder is None:
        raise DecodeError(f"unknown field type {chr(letter)!r} (0x{letter:02x})")
    return decoder(buf, o + 1, depth)


#: decoded small top-level tables of plain values, by their octets (see decode_table)
_TABLES: dict[bytes, dict[str, Any]] = {}
TABLES_MAX = 256
#: the largest table (in octets) kept in ``_TABLES``
TABLE_KEPT_MAX = 512


def decode_table(buf: bytes, o: int, depth: int = 0) -> tuple[dict[str, Any], int]:
    """A 4-octet size then name/value pairs. Duplicate names: the first wins (REQUIREMENTS
    2.4) and the duplicate is logged.

    A small top-level table whose values are all immutable (no nested table or array) and
    whose names are unique is kept by its octets (at most ``TABLES_MAX``, forgotten all
    at once when full), and the next one with the same octets is a copy of it: the same
    dict a decode gives, made in C. Why: publishers send the same few headers on every
    message, and decoding them was four Python calls for each header of every publish.
    """
    if depth > MAX_DEPTH:
        raise DecodeError(f"field tables nested deeper than {MAX_DEPTH}")
    if o + 4 > len(buf):
        raise DecodeError("table size missing")
    (n,) = _I.unpack_from(buf, o)
    o += 4
    end = o + n
    if end > len(buf):
        raise DecodeError(f"table of {n} octets overruns the frame")
    key = buf[o:end] if not depth and n <= TABLE_KEPT_MAX and type(buf) is bytes else None
    if key is not None:
        kept = _TABLES.get(key)
        if kept is not None:
            return dict(kept), end
    table: dict[str, Any] = {}
    plain = key is not None
    while o < end:
        name, o = decode_shortstr(buf, o)
        value, o = decode_field_value(buf, o, depth)
        if name in table:
            log.warning("duplicate field-table name %r: keeping the first value", name)
            plain = False  # the next copy would not be logged
            continue
        if value.__class__ is dict or value.__class__ is list:
            plain = False  # a nested table or array: each message has its own
        table[name] = value
    if o != end:
        raise DecodeError("field table entries overrun the table size")
    if plain:
        if len(_TABLES) >= TABLES_MAX:
            _TABLES.clear()
        _TABLES[key] = dict(table)  # type: ignore[index]
    return table, o


def decode_array(buf: bytes, o: int, depth: int = 0) -> tuple[list[Any], int]:
    """A 4-octet size then typed values (RabbitMQ's ``A``)."""
    if depth > MAX_DEPTH:
        raise DecodeError(f"field arrays nested deeper than {MAX_DEPTH}")
    if o + 4 > len(buf):
        raise DecodeError("array size missing")
    (n,) = _I.unpack_from(buf, o)
    o += 4
    end = o + n
    if end > len(buf):
        raise DecodeError(f"array of {n} octets overruns the frame")
    items: list[Any] = []
    while o < end:
        value, o = decode_field_value(buf, o, depth)
        items.append(value)
    if o != end:
        raise DecodeError("field array entries overrun the array size")
    return items, o


def _encode_decimal(value: Decimal) -> bytes:
    try:
        sign, _digits, exponent = value.as_tuple()
        if not isinstance(exponent, int):
            raise ValueError(f"decimal {value} is not finite")
        places = max(0, -exponent)
        unscaled = int(value.scaleb(places))
    except InvalidOperation as exc:
        raise ValueError(f"decimal {value} cannot be encoded") from exc
    if places > 255 or not -(2**31) <= unscaled < 2**31:
        raise ValueError(f"decimal {value} does not fit places octet + int32")
    return b"D" + _Bi.pack(places, unscaled)


def encode_field_value(value: Any, depth: int = 0) -> bytes:
    """Type letter plus encoded value. Raises ValueError/TypeError for values with no
    0-9-1 encoding (e.g. an int beyond int64, a set) -- a local bug, never a peer fault."""
    if depth > MAX_DEPTH:
        raise ValueError(f"field values nested deeper than {MAX_DEPTH}")
    # order matters: bool and the sized ints are int subclasses, LongStrBytes is bytes
    if value is None:
        return b"V"
    if value is True or value is False:
        return b"t\x01" if value else b"t\x00"
    cls = type(value)
    letter = getattr(cls, "LETTER", None)
    if letter is not None:
        return letter.encode("ascii") + _SIZED[letter].pack(value)
    if cls is int or isinstance(value, int):
        if not -(2**63) <= value < 2**63:
            raise ValueError(f"integer {value} does not fit int64")
        return b"l" + _q.pack(value)
    if isinstance(value, float):
        return b"d" + _d.pack(value)
    if isinstance(value, str):
        return b"S" + encode_longstr(value)
    if isinstance(value, LongStrBytes):
        return b"S" + encode_longstr(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return b"x" + encode_longstr(bytes(value))
    if isinstance(value, Decimal):
        return _encode_decimal(value)
    if isinstance(value, dict):
        return b"F" + encode_table(value, depth + 1)
    if isinstance(value, (list, tuple)):
        return b"A" + encode_array(value, depth + 1)
    raise TypeError(f"no 0-9-1 field type for {cls.__name__}")


_SIZED: dict[str, struct.Struct] = {
    "b": _b,
    "B": _B,
    "s": _h,
    "u": _H,
    "I": _i,
    "i": _I,
    "T": _Q,
    "f": _f,
}


def encode_table(table: dict[str, Any] | None, depth: int = 0) -> bytes:
    """Size-prefixed table; ``None`` encodes as the empty table."""
    if not table:
        return b"\x00\x00\x00\x00"
    if depth > MAX_DEPTH:
        raise ValueError(f"field tables nested deeper than {MAX_DEPTH}")
    parts = []
    for name, value in table.items():
        parts.append(encode_shortstr(name))
        parts.append(encode_field_value(value, depth))
    body = b"".join(parts)
    return _I.pack(len(body)) + body


def encode_array(items: list[Any] | tuple[Any, ...], depth: int = 0) -> bytes:
    body = b"".join(encode_field_value(v, depth) for v in items)
    return _I.pack(len(body)) + body
