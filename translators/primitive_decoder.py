"""A pure-Python decoder for the AMQP 1.0 primitive encodings, lists and maps.

Why: decoding the header, properties and application-properties through proton's
``Data`` walks a C tree from Python one node at a time; for the few small sections the
broker needs per message, reading the octets directly is several times faster. It returns
the same proton types as ``Data.get_object`` (``ubyte``, ``uint``, ``symbol``,
``timestamp`` ...; binaries as ``bytes``). Described values, arrays and decimals are rare
in these sections and are left to proton: :func:`decode_value` raises
:class:`Unsupported` and the caller falls back.
"""
from __future__ import annotations

import struct
import uuid
from typing import Any

from proton import byte, char, float32, int32, short, symbol, timestamp, ubyte, uint, ulong, ushort

from translators.errors import TranslationError

__all__ = ["Unsupported", "decode_value"]


class Unsupported(Exception):
    """The value uses an encoding this decoder leaves to proton."""


_FLOAT = struct.Struct(">f")
_DOUBLE = struct.Struct(">d")


def _int(buf: bytes, start: int, width: int, signed: bool) -> int:
    raw = buf[start : start + width]
    if len(raw) != width:
        raise IndexError("truncated")
    return int.from_bytes(raw, "big", signed=signed)


def decode_value(buf: bytes, pos: int) -> tuple[Any, int]:
    """Decode the value at ``buf[pos]``; returns ``(value, end offset)``.

    Raises :class:`Unsupported` for described values, arrays and decimals, and
    ``TranslationError`` for truncated input or an invalid format code.
    """
    try:
        code = buf[pos]
        if code == 0x40:
            return None, pos + 1
        if code == 0x41:
            return True, pos + 1
        if code == 0x42:
            return False, pos + 1
        if code == 0x43:
            return uint(0), pos + 1
        if code == 0x44:
            return ulong(0), pos + 1
        if code == 0x45:
            return [], pos + 1
        if code == 0x50:
            return ubyte(buf[pos + 1]), pos + 2
        if code == 0x51:
            return byte(_int(buf, pos + 1, 1, True)), pos + 2
        if code == 0x52:
            return uint(buf[pos + 1]), pos + 2
        if code == 0x53:
            return ulong(buf[pos + 1]), pos + 2
        if code == 0x54:
            return int32(_int(buf, pos + 1, 1, True)), pos + 2
        if code == 0x55:
            return _int(buf, pos + 1, 1, True), pos + 2
        if code == 0x56:
            return buf[pos + 1] != 0, pos + 2
        if code == 0x60:
            return ushort(_int(buf, pos + 1, 2, False)), pos + 3
        if code == 0x61:
            return short(_int(buf, pos + 1, 2, True)), pos + 3
        if code == 0x70:
            return uint(_int(buf, pos + 1, 4, False)), pos + 5
        if code == 0x71:
            return int32(_int(buf, pos + 1, 4, True)), pos + 5
        if code == 0x72:
            return float32(_FLOAT.unpack_from(buf, pos + 1)[0]), pos + 5
        if code == 0x73:
            return char(chr(_int(buf, pos + 1, 4, False))), pos + 5
        if code == 0x80:
            return ulong(_int(buf, pos + 1, 8, False)), pos + 9
        if code == 0x81:
            return _int(buf, pos + 1, 8, True), pos + 9
        if code == 0x82:
            return _DOUBLE.unpack_from(buf, pos + 1)[0], pos + 9
        if code == 0x83:
            return timestamp(_int(buf, pos + 1, 8, True)), pos + 9
        if code == 0x98:
            return uuid.UUID(bytes=bytes(buf[pos + 1 : pos + 17])), pos + 17
        if code in (0xA0, 0xA1, 0xA3):
            start, size = pos + 2, buf[pos + 1]
        elif code in (0xB0, 0xB1, 0xB3):
            start, size = pos + 5, _int(buf, pos + 1, 4, False)
        elif code in (0xC0, 0xC1):
            return _compound(buf, code == 0xC1, pos + 3, buf[pos + 2], pos + 2 + buf[pos + 1])
        elif code in (0xD0, 0xD1):
            count = _int(buf, pos + 5, 4, False)
            return _compound(buf, code == 0xD1, pos + 9, count, pos + 5 + _int(buf, pos + 1, 4, False))
        else:
            raise Unsupported(code)
    except (IndexError, struct.error, ValueError) as exc:
        raise TranslationError("encoding", f"truncated or invalid value at offset {pos}: {exc}") from None
    end = start + size
    if end > len(buf):
        raise TranslationError("encoding", f"value at offset {pos} runs past the end")
    raw = buf[start:end]
    try:
        if code & 0x0F == 0x00:
            return bytes(raw), end
        if code & 0x0F == 0x01:
            return str(raw, "utf-8"), end
        return symbol(str(raw, "ascii")), end
    except UnicodeDecodeError as exc:
        raise TranslationError("encoding", f"bad text at offset {pos}: {exc.reason}") from None


def _compound(buf: bytes, is_map: bool, pos: int, count: int, end: int) -> tuple[Any, int]:
    items = []
    for _ in range(count):
        value, pos = decode_value(buf, pos)
        items.append(value)
    if pos != end:
        raise TranslationError("encoding", "compound size does not match its elements")
    if not is_map:
        return items, end
    if count % 2:
        raise TranslationError("encoding", "a map needs an even number of elements")
    return dict(zip(items[0::2], items[1::2])), end
