"""1.0 application properties as the 0-9-1 headers an application reads: plain values.

Why: a 0-9-1 application reads its headers with its client library (pika, py-amqp,
aio-pika ...). A typed wrapper table (``translators.typed_values``) keeps a 1.0 type no
0-9-1 type has, but an application that wants the uuid in a header would have to know
our wrapper to read it. So each application property becomes a header holding a value
the library gives as an ordinary string, number, ``Decimal``, timestamp, list or table
(:func:`plain_field_value`); where that is not the exact 1.0 value, or where a client
library may re-type it when it decodes and re-encodes the header (pika 1.4 reads ``f``
and ``d`` as integers, clients re-pick integer widths, py-amqp sends a binary as a
string), the encoded application-properties section travels too, in
``x-amqp-1.0-app-properties`` (:func:`carriage` says which; ``translators.carried_sections``
restores the exact values).

1.0 value -> plain 0-9-1 value:

======================================= ==========================================
null, boolean, string, binary            V, t, S, x
byte ... long, float, double             b, B, s, u, I, i, l, f, d (same width)
ulong                                    l, or its decimal text (S) above 2**63 - 1
symbol, char                             S (the text)
uuid                                     S (canonical 8-4-4-4-12 text)
timestamp                                T (whole seconds, ms // 1000); before 1970:
                                         l (seconds, rounded down)
decimal32/64/128                         D when it holds the value (any exponent that
                                         keeps it exact), else the decimal's text (S):
                                         ``1.5E+300``, ``NaN``, ``-Infinity``
list, array                              A of the elements' plain values
map                                      F keyed by the key text when every key is a
                                         string, symbol or char of at most 255 octets,
                                         the texts distinct; else A of key, value, ...
described                                its value's plain value (the descriptor is in
                                         the carried section)
described ``x-amqp-0-9-1:longstr`` /     the 0-9-1 value they stand for (S, T), as in
``x-amqp-0-9-1:timestamp``               ``typed_values``
======================================= ==========================================
"""
from __future__ import annotations

import decimal
import enum
import uuid
from typing import Any, Callable, Optional

from proton import (Array, Described, byte, char, decimal32, decimal64, decimal128, float32, int32,
                    short, symbol, timestamp, ubyte, uint, ulong, ushort)

from translators.decimal_bid import bid_to_decimal
from translators.mapping import RESERVED_NAMES, SHORTSTR_MAX
from translators.typed_values import (LONGSTR_DESCRIPTOR, TIMESTAMP_DESCRIPTOR, TO_FIELD,
                                     WRAPPER_TYPE_KEY, WRAPPER_VALUE_KEY, decimal64_to_decimal,
                                     to_field_value)
from translators.field_types import Timestamp

__all__ = ["Carriage", "carriage", "name_carriage", "is_header_name", "plain_field_value"]

_INT64_MAX = 2**63 - 1
_INT32_MAX = 2**31 - 1
_WRAPPER_KEYS = frozenset({WRAPPER_TYPE_KEY, WRAPPER_VALUE_KEY})
_FIELD_NAME_MAX = 128
_T_ROBUST_MAX = (2**32 - 1) * 1000
_EXACT_KINDS = frozenset({type(None), bool, byte, ubyte, short, ushort, int32, uint, int, float32,
                          float, str, bytes})


def is_header_name(key: Any) -> bool:
    """True if an application-property key can be a 0-9-1 header name: a string of at
    most 255 octets that is not one of our reserved names."""
    return name_carriage(key) is not None


# ---------------------------------------------------------------- plain values


def _timestamp(v: timestamp) -> Any:
    seconds = int(v) // 1000
    return Timestamp(seconds) if seconds >= 0 else seconds


def _ulong(v: ulong) -> Any:
    return int(v) if v <= _INT64_MAX else str(int(v))


def _decimal(value: decimal.Decimal) -> Any:
    """``D`` for a finite value it holds exactly (scale 0..255, coefficient an int32),
    whatever the exponent the value was written with; else the decimal's text."""
    if not value.is_finite():
        return str(value)
    sign, digits, exponent = value.as_tuple()
    coefficient = int("".join(map(str, digits)) or "0")
    if exponent > 0:
        coefficient, exponent = coefficient * 10**int(exponent), 0
    while exponent < -255 and coefficient % 10 == 0 and coefficient:
        coefficient, exponent = coefficient // 10, exponent + 1
    if coefficient == 0:
        return decimal.Decimal(0)
    if exponent < -255 or coefficient > _INT32_MAX:
        return str(value)
    return decimal.Decimal((sign, tuple(int(c) for c in str(coefficient)), exponent))


def _decimal64(v: decimal64) -> Any:
    exact = decimal64_to_decimal(int(v))
    return exact if exact is not None else _decimal(bid_to_decimal(int(v), 64))


def _key_text(key: Any) -> Any:
    kind = type(key)
    if kind is str or kind is symbol or kind is char:
        text = str(key)
        if len(text.encode("utf-8")) <= SHORTSTR_MAX:
            return text
    return None


def _map(v: dict) -> Any:
    texts = [_key_text(k) for k in v]
    if None not in texts and len(set(texts)) == len(texts):
        return {text: plain_field_value(item) for text, item in zip(texts, v.values())}
    pairs: list[Any] = []
    for k, item in v.items():
        pairs.append(plain_field_value(k))
        pairs.append(plain_field_value(item))
    return pairs


def _stands_for_0_9_1(v: Described) -> bool:
    """A described value ``typed_values`` writes for a 0-9-1 value 1.0 has no type for."""
    return type(v.descriptor) is symbol and (
        (v.descriptor == LONGSTR_DESCRIPTOR and type(v.value) is bytes)
        or (v.descriptor == TIMESTAMP_DESCRIPTOR and type(v.value) is ulong))


def _described(v: Described) -> Any:
    return to_field_value(v) if _stands_for_0_9_1(v) else plain_field_value(v.value)


#: the types whose plain value is their typed value (typed_values' converters), then ours
_PLAIN: dict[type, Callable[[Any], Any]] = {kind: convert for kind, convert in TO_FIELD.items()
                                            if kind in _EXACT_KINDS}
_PLAIN.update({
    ulong: _ulong,
    symbol: str,
    char: str,
    uuid.UUID: str,
    timestamp: _timestamp,
    decimal32: lambda v: _decimal(bid_to_decimal(int(v), 32)),
    decimal64: _decimal64,
    decimal128: lambda v: _decimal(bid_to_decimal(int.from_bytes(bytes(v), "big"), 128)),
    list: lambda v: [plain_field_value(e) for e in v],
    Array: lambda v: [plain_field_value(e) for e in v.elements],
    dict: _map,
    Described: _described,
})


def plain_field_value(value: Any) -> Any:
    """The 0-9-1 header value a 0-9-1 application reads for one 1.0 value (the module
    table); the same as ``to_field_value(value)`` wherever that needs no wrapper.
    Raises ``TranslationError`` for a Python type proton would not produce."""
    convert = _PLAIN.get(type(value))
    if convert is not None:
        return convert(value)
    if isinstance(value, dict):  # proton's AnnotationDict / PropertyDict
        return _map(dict(value))
    if type(value) is not list and isinstance(value, list):  # proton's SymbolList
        return [plain_field_value(e) for e in value]
    return to_field_value(value)


# ---------------------------------------------------------------- carriage


class Carriage(enum.IntEnum):
    """What the plain value of a 1.0 value is worth on the way back to 1.0 (ordered: a
    list or map is worth its worst element)."""

    #: any client gives it back as it got it, and it translates back to the 1.0 value
    ROBUST = 0
    #: it translates back to the exact 1.0 value, but a client may re-type it
    FRAGILE = 1
    #: it does not translate back to the 1.0 value (a uuid read back is a string)
    INEXACT = 2


_ROBUST_TYPES = frozenset({type(None), bool, str})
_FRAGILE_TYPES = _EXACT_KINDS - _ROBUST_TYPES


def name_carriage(key: Any) -> Optional[Carriage]:
    """``None`` if an application-property key cannot be a header name (not a string,
    longer than 255 octets, or a reserved name); else its :class:`Carriage` as a header
    name or table key: fragile above 128 octets, as pamqp cuts it to 128 (the 0-9-1
    spec's limit for field names)."""
    if type(key) is not str or key in RESERVED_NAMES:
        return None
    if len(key) <= _FIELD_NAME_MAX // 4:  # at most 4 octets a character
        return Carriage.ROBUST
    size = len(key.encode("utf-8"))
    if size > SHORTSTR_MAX:
        return None
    return Carriage.ROBUST if size <= _FIELD_NAME_MAX else Carriage.FRAGILE


def carriage(value: Any) -> Carriage:
    """The :class:`Carriage` of ``value``'s plain value. Timestamps in whole seconds
    from 1970 to 2106 are robust (``T`` is read and written as a date by every client)."""
    kind = type(value)
    if kind in _ROBUST_TYPES:
        return Carriage.ROBUST
    if kind in _FRAGILE_TYPES:
        return Carriage.FRAGILE
    if kind is timestamp:
        if value < 0 or value % 1000:
            return Carriage.INEXACT
        # pamqp reads a T after 2106 as milliseconds
        return Carriage.ROBUST if value <= _T_ROBUST_MAX else Carriage.FRAGILE
    if kind is decimal64:
        return Carriage.FRAGILE if decimal64_to_decimal(int(value)) is not None else Carriage.INEXACT
    if kind is list:
        return max(map(carriage, value), default=Carriage.ROBUST)
    if isinstance(value, dict):
        if value.keys() == _WRAPPER_KEYS or not all(
                type(k) is str and len(k.encode("utf-8")) <= SHORTSTR_MAX for k in value):
            return Carriage.INEXACT
        worst = max(map(carriage, value.values()), default=Carriage.ROBUST)
        if any(len(k) > _FIELD_NAME_MAX // 4 and len(k.encode("utf-8")) > _FIELD_NAME_MAX for k in value):
            return max(worst, Carriage.FRAGILE)  # pamqp cuts the key (see name_carriage)
        return worst
    if kind is Described and _stands_for_0_9_1(value):
        return Carriage.FRAGILE
    return Carriage.INEXACT
