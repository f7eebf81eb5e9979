"""A pure-Python encoder for AMQP 1.0 values, byte for byte as proton's ``Data`` does.

Why: every 0-9-1 message bound for a 1.0 receiver needs its header, properties,
annotations and application-properties sections encoded. Through ``Data.put_object`` each
value is a walk of proton's C tree from Python, which made translation cost more than
the whole rest of a message's path. Writing the octets here takes a few microseconds.

The choices are proton's (checked value by value against it in the tests): the smallest
form for ``uint``/``ulong``/``int32``/``long`` and for strings, symbols and binaries;
``list32``/``map32`` for every non-empty list and map and ``list0`` for an empty list.
Values are the proton types ``Data.get_object`` returns (``ubyte``, ``uint``, ``symbol``,
``timestamp`` ...; Python ``int`` is a long, ``float`` a double). Arrays are left to
proton: :func:`encode_value` raises :class:`Unencodable` and the caller falls back, as
it does for any type it does not know.
"""
from __future__ import annotations

import struct
import uuid
from typing import Any, Callable

from proton import (Described, byte, char, decimal32, decimal64, decimal128, float32, int32, short,
                    symbol, timestamp, ubyte, uint, ulong, ushort)

__all__ = ["Unencodable", "encode_described_list", "encode_described_map", "encode_value"]


class Unencodable(Exception):
    """A value this encoder leaves to proton (an array, or a type it does not know)."""


_U32 = struct.Struct(">I").pack
_U16 = struct.Struct(">H").pack
_I16 = struct.Struct(">h").pack
_I32 = struct.Struct(">i").pack
_I64 = struct.Struct(">q").pack
_U64 = struct.Struct(">Q").pack
_F32 = struct.Struct(">f").pack
_F64 = struct.Struct(">d").pack
_BYTE = [bytes((i,)) for i in range(256)]


def _variable(small: int, large: int, raw: bytes) -> bytes:
    n = len(raw)
    if n < 256:
        return bytes((small, n)) + raw
    return bytes((large,)) + _U32(n) + raw


def _str(v: str) -> bytes:
    return _variable(0xA1, 0xB1, v.encode("utf-8"))


def _symbol(v: str) -> bytes:
    return _variable(0xA3, 0xB3, v.encode("utf-8"))


def _binary(v: bytes) -> bytes:
    return _variable(0xA0, 0xB0, bytes(v))


def _long(v: int) -> bytes:
    if -128 <= v <= 127:
        return b"\x55" + _BYTE[v & 0xFF]
    if not -(1 << 63) <= v < (1 << 63):
        raise Unencodable(f"integer {v} does not fit a long")
    return b"\x81" + _I64(v)


def _unsigned(zero: bytes, small: bytes, large: bytes,
              pack: Callable[[int], bytes]) -> Callable[[int], bytes]:
    """uint/ulong: a zero form, a one-octet form below 256, else the full width."""
    def encode(v: int) -> bytes:
        if v == 0:
            return zero
        if v < 256:
            return small + _BYTE[v]
        return large + pack(v)
    return encode


_uint = _unsigned(b"\x43", b"\x52", b"\x70", _U32)
_ulong = _unsigned(b"\x44", b"\x53", b"\x80", _U64)


def _int32(v: int) -> bytes:
    if -128 <= v <= 127:
        return b"\x54" + _BYTE[v & 0xFF]
    return b"\x71" + _I32(v)


def _list(v: list) -> bytes:
    if not v:
        return b"\x45"
    body = b"".join([encode_value(x) for x in v])
    return b"\xd0" + _U32(len(body) + 4) + _U32(len(v)) + body


def _map(v: dict) -> bytes:
    body = b"".join([encode_value(k) + encode_value(x) for k, x in v.items()])
    return b"\xd1" + _U32(len(body) + 4) + _U32(2 * len(v)) + body


def _described(v: Described) -> bytes:
    return b"\x00" + encode_value(v.descriptor) + encode_value(v.value)


_ENCODERS: dict[type, Callable[[Any], bytes]] = {
    type(None): lambda v: b"\x40",
    bool: lambda v: b"\x41" if v else b"\x42",
    ubyte: lambda v: b"\x50" + _BYTE[v],
    byte: lambda v: b"\x51" + _BYTE[v & 0xFF],
    ushort: lambda v: b"\x60" + _U16(v),
    short: lambda v: b"\x61" + _I16(v),
    uint: _uint,
    ulong: _ulong,
    int32: _int32,
    int: _long,
    float32: lambda v: b"\x72" + _F32(v),
    float: lambda v: b"\x82" + _F64(v),
    char: lambda v: b"\x73" + _U32(ord(v)),
    timestamp: lambda v: b"\x83" + _I64(v),
    decimal32: lambda v: b"\x74" + _U32(v),
    decimal64: lambda v: b"\x84" + _U64(v),
    decimal128: lambda v: b"\x94" + bytes(v),
    uuid.UUID: lambda v: b"\x98" + v.bytes,
    bytes: _binary,
    str: _str,
    symbol: _symbol,
    list: _list,
    dict: _map,
    Described: _described,
}


def encode_value(value: Any) -> bytes:
    """The encoding of ``value`` (a proton type, or a plain Python one).

    Raises :class:`Unencodable` for arrays, unknown types and out-of-range values.
    """
    try:
        return _ENCODERS[type(value)](value)
    except KeyError:
        raise Unencodable(f"no encoding here for {type(value).__name__}") from None
    except (struct.error, ValueError, OverflowError, TypeError, IndexError) as exc:
        raise Unencodable(f"{type(value).__name__} {value!r}: {exc}") from None


def encode_described_list(code: int, fields: list) -> bytes:
    """A section whose value is a list (header, properties), descriptor ``code`` (< 256)."""
    return b"\x00\x53" + _BYTE[code] + _list(fields)


def encode_described_map(code: int, value: dict) -> bytes:
    """A section whose value is a map (annotations, application-properties, footer)."""
    return b"\x00\x53" + _BYTE[code] + _map(value)
