"""Did a 0-9-1 client change a header value, or only decode and re-encode it?

Why: a 0-9-1 application that relays a message (gets it, publishes its body, properties
and headers again) republishes what its client library decoded, and libraries decode some
field types lossily. A 1.0 message's exact values travel with it (``translators.
carried_sections``), and on the way back to 1.0 each header is compared with the value
we sent: a value a library could have turned ours into is unchanged (the exact 1.0 value
is restored); anything else is the application's edit (its value wins).

What the libraries do when they decode and re-encode a field value (checked on pika
1.4, py-amqp 5.4 and pamqp 4, aio-pika's codec):

- integers of any width come back as integers of the same value in a width the library
  picks (pika ``I``/``l``, py-amqp ``I``/``L``, pamqp the smallest letter);
- a float (``f``) or double (``d``) comes back as the integer the value truncates to
  (pika reads both as ``int``), as a double of the same value (py-amqp), or as a float
  (``f``) of the value rounded to 32 bits (pamqp writes every float as ``f``);
- a ``D`` comes back as a decimal of the same value, perhaps with another exponent;
- a string comes back as a string, or as bytes of its UTF-8 encoding; a binary (``x``)
  as bytes (``x``), or as a string (py-amqp writes bytes as ``S``, which we read as text
  when it is UTF-8);
- a timestamp (``T``) as a timestamp of the same second; one after 2106 (above
  2**32 - 1 seconds) also as a thousandth of it (pamqp takes it for milliseconds);
- lists and tables element by element, in any order; a table key longer than 128 octets
  cut to its first 128 (pamqp, after the 0-9-1 spec's limit for field names; a character
  the cut splits is dropped).

So an edit that gives a value one of those could also give (a double 1.25 set to the
integer 1) cannot be told from the library's decoding, and does not count as an edit.
"""
from __future__ import annotations

import decimal
import math
import struct
from typing import Any

from translators.field_types import Timestamp

__all__ = ["unchanged_by_relay", "relayed_name"]

_FIELD_NAME_MAX = 128
_UINT32_MAX = 2**32 - 1

_F32 = struct.Struct(">f")


def _as_float32(value: float) -> float | None:
    try:
        return _F32.unpack(_F32.pack(value))[0]
    except (OverflowError, struct.error):
        return None


def _float_unchanged(sent: float, got: Any) -> bool:
    if isinstance(got, float):
        if got == sent or (math.isnan(got) and math.isnan(sent)):
            return True
        return got == _as_float32(sent)
    if isinstance(got, int) and not isinstance(got, bool):
        return math.isfinite(sent) and got == math.trunc(sent)
    return False


def _text_unchanged(sent: str, got: Any) -> bool:
    if isinstance(got, str):
        return got == sent
    return isinstance(got, (bytes, bytearray)) and got == sent.encode("utf-8")


def _octets_unchanged(sent: bytes, got: Any) -> bool:
    if isinstance(got, (bytes, bytearray)):
        return got == sent
    if isinstance(got, str):
        return got.encode("utf-8", "surrogatepass") == sent
    return False


def relayed_name(name: str) -> str:
    """``name`` as a table key may come back: cut to 128 octets (pamqp), else itself."""
    raw = name.encode("utf-8")
    if len(raw) <= _FIELD_NAME_MAX:
        return name
    return raw[:_FIELD_NAME_MAX].decode("utf-8", "ignore")


def _table_unchanged(sent: dict, got: dict) -> bool:
    if len(got) != len(sent):
        return False
    for key, value in sent.items():
        item = got.get(key, _NONE)
        if item is _NONE:
            item = got.get(relayed_name(key), _NONE) if type(key) is str else _NONE
            if item is _NONE:
                return False
        if not unchanged_by_relay(value, item):
            return False
    return True


_NONE: Any = object()


def unchanged_by_relay(sent: Any, got: Any) -> bool:
    """True if ``got`` (a 0-9-1 field value as our codec decoded it) is ``sent`` (the
    field value we wrote), or what a client library's decoding and re-encoding of
    ``sent`` could give (the module docstring)."""
    if sent is None or got is None:
        return sent is got
    if isinstance(sent, bool) or isinstance(got, bool):
        return type(sent) is bool and type(got) is bool and sent == got
    if isinstance(sent, int):
        return isinstance(got, int) and (got == sent or (
            type(sent) is Timestamp and sent > _UINT32_MAX and got == sent // 1000))
    if isinstance(sent, float):
        return _float_unchanged(sent, got)
    if isinstance(sent, str):
        return _text_unchanged(sent, got)
    if isinstance(sent, (bytes, bytearray)):
        return _octets_unchanged(bytes(sent), got)
    if isinstance(sent, decimal.Decimal):
        return isinstance(got, decimal.Decimal) and got == sent
    if isinstance(sent, list):
        return (isinstance(got, (list, tuple)) and len(got) == len(sent)
                and all(unchanged_by_relay(s, g) for s, g in zip(sent, got)))
    if isinstance(sent, dict):
        return isinstance(got, dict) and _table_unchanged(sent, got)
    return False
