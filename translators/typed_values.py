"""Typed value conversion between 0-9-1 field values and AMQP 1.0 (proton) values.

Why: both protocols type every header value, and a round trip must keep the type, not
only the number. The natural pairs are in ``translators.field_types`` (``b``<->byte,
``u``<->ushort, ...). Values with no counterpart travel in a *typed wrapper*: a 0-9-1
table with exactly the two keys ``x-amqp-1.0-type`` and ``x-amqp-1.0-value``.

1.0 -> 0-9-1 (:func:`to_field_value`):

=================================== ==================================================
1.0 value (proton type)             0-9-1 field value
=================================== ==================================================
null, boolean                       V, t
byte, ubyte, short, ushort          b, B, s, u  (``Int8`` ... ``UInt16``)
int, uint, long                     I, i, l     (``Int32``, ``UInt32``, ``int``)
float, double                       f, d        (``Float32``, ``float``)
string, binary                      S, x
timestamp, whole seconds >= 0       T (``Timestamp``: ms // 1000)
timestamp, other                    wrapper ``timestamp``: l (milliseconds)
ulong                               wrapper ``ulong``: S (decimal digits)
symbol, char                        wrapper ``symbol`` / ``char``: S
uuid                                wrapper ``uuid``: S (canonical 8-4-4-4-12 form)
decimal64 that fits 0-9-1 ``D``     D (``decimal.Decimal``)  -- see below
decimal32/64/128, other             wrapper ``decimal32/64/128``: x (raw IEEE bits, big end)
list                                A (elements converted)
map, all keys strings <= 255 octets F (values converted)
map, other keys                     wrapper ``map``: A of alternating key, value
array                               wrapper ``array``: F {type, elements[, descriptor]}
described (other)                   wrapper ``described``: F {descriptor, value}
described ``x-amqp-0-9-1:longstr``  S (``LongStrBytes``) -- the 0-9-1 value restored
described ``x-amqp-0-9-1:timestamp`` T (``Timestamp``) -- the 0-9-1 value restored
=================================== ==================================================

0-9-1 -> 1.0 (:func:`from_field_value`) is the inverse, plus: ``D`` becomes a decimal64 with
the same coefficient and exponent (binary-integer-decimal encoding, which is exact for every
``D`` because its coefficient is an int32); ``S`` that is not UTF-8 (``LongStrBytes``) and a
``T`` whose milliseconds overflow a 1.0 timestamp become the two described values above.

A decimal64 goes back to ``D`` only when it is finite, not negative zero, uses the small
coefficient form, has exponent -255..0 and a coefficient below 2**31: exactly the values
``D`` can hold, so the pairing is a bijection. A 0-9-1 table whose keys are exactly the two
wrapper keys is always read as a wrapper; that name space is reserved.
"""
from __future__ import annotations

import decimal
import uuid
from typing import Any, Callable

from proton import (
    UNDESCRIBED,
    Array,
    Data,
    Described,
    byte,
    char,
    decimal32,
    decimal64,
    decimal128,
    float32,
    int32,
    short,
    symbol,
    timestamp,
    ubyte,
    uint,
    ulong,
    ushort,
)

from translators.decimal_bid import bid_fields
from translators.errors import TranslationError
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
    "TO_FIELD",
    "WRAPPER_TYPE_KEY",
    "WRAPPER_VALUE_KEY",
    "LONGSTR_DESCRIPTOR",
    "TIMESTAMP_DESCRIPTOR",
    "to_field_value",
    "from_field_value",
    "decimal64_to_decimal",
    "decimal_to_decimal64",
    "is_wrapper",
    "map_to_field",
    "map_from_field",
    "wrap_map",
]

WRAPPER_TYPE_KEY = "x-amqp-1.0-type"
WRAPPER_VALUE_KEY = "x-amqp-1.0-value"
_WRAPPER_KEYS = frozenset({WRAPPER_TYPE_KEY, WRAPPER_VALUE_KEY})
LONGSTR_DESCRIPTOR = symbol("x-amqp-0-9-1:longstr")
TIMESTAMP_DESCRIPTOR = symbol("x-amqp-0-9-1:timestamp")

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_SHORTSTR_MAX = 255

# proton array element type codes <-> stable names used inside the ``array`` wrapper.
_ARRAY_TYPE_NAMES: dict[int, str] = {
    Data.NULL: "null", Data.BOOL: "boolean", Data.UBYTE: "ubyte", Data.BYTE: "byte",
    Data.USHORT: "ushort", Data.SHORT: "short", Data.UINT: "uint", Data.INT: "int",
    Data.CHAR: "char", Data.ULONG: "ulong", Data.LONG: "long", Data.TIMESTAMP: "timestamp",
    Data.FLOAT: "float", Data.DOUBLE: "double", Data.DECIMAL32: "decimal32",
    Data.DECIMAL64: "decimal64", Data.DECIMAL128: "decimal128", Data.UUID: "uuid",
    Data.BINARY: "binary", Data.STRING: "string", Data.SYMBOL: "symbol",
    Data.DESCRIBED: "described", Data.ARRAY: "array", Data.LIST: "list", Data.MAP: "map",
}
_ARRAY_TYPE_CODES = {name: code for code, name in _ARRAY_TYPE_NAMES.items()}


def is_wrapper(value: Any) -> bool:
    """True if ``value`` is a 0-9-1 table in the typed-wrapper shape."""
    return type(value) is dict and value.keys() == _WRAPPER_KEYS


def _wrap(type_name: str, value: Any) -> dict:
    return {WRAPPER_TYPE_KEY: type_name, WRAPPER_VALUE_KEY: value}


# ---------------------------------------------------------------- decimal64 <-> D

_COEFF_SMALL = (1 << 53) - 1
_BIAS = 398


def decimal64_to_decimal(bits: int) -> decimal.Decimal | None:
    """The ``decimal.Decimal`` that 0-9-1 ``D`` can carry for these decimal64 bits, or
    ``None`` when ``D`` cannot hold the value exactly (see the module docstring)."""
    sign, coefficient, exponent, large, special = bid_fields(bits, 64)
    if (large or special is not None or not -255 <= exponent <= 0 or coefficient > 2**31 - 1
            or (sign and coefficient == 0)):
        return None
    digits = tuple(int(c) for c in str(coefficient))
    return decimal.Decimal((sign, digits, exponent))


def decimal_to_decimal64(value: decimal.Decimal) -> decimal64:
    """Encode ``value`` as decimal64 with the same coefficient and exponent.

    Raises ``TranslationError`` if it is not finite or does not fit decimal64's small
    coefficient form (every value a 0-9-1 ``D`` can carry fits)."""
    if not value.is_finite():
        raise TranslationError("decimal", f"{value} is not finite")
    sign, digits, exponent = value.as_tuple()
    coefficient = int("".join(map(str, digits)) or "0")
    if coefficient > _COEFF_SMALL or not -_BIAS <= int(exponent) <= 369:
        raise TranslationError("decimal", f"{value} does not fit decimal64")
    return decimal64((sign << 63) | ((int(exponent) + _BIAS) << 53) | coefficient)


# ---------------------------------------------------------------- 1.0 -> 0-9-1


def _long_to_field(v: int) -> int:
    return int(v)


def _timestamp_to_field(v: int) -> Any:
    ms = int(v)
    if ms >= 0 and ms % 1000 == 0:
        return Timestamp(ms // 1000)
    return _wrap("timestamp", ms)


def _decimal64_to_field(v: int) -> Any:
    as_decimal = decimal64_to_decimal(int(v))
    if as_decimal is not None:
        return as_decimal
    return _wrap("decimal64", int(v).to_bytes(8, "big"))


def _map_to_field(v: dict) -> Any:
    if v.keys() != _WRAPPER_KEYS and all(
        type(k) is str and len(k.encode("utf-8")) <= _SHORTSTR_MAX for k in v
    ):
        return {k: to_field_value(item) for k, item in v.items()}
    pairs: list[Any] = []
    for k, item in v.items():
        pairs.append(to_field_value(k))
        pairs.append(to_field_value(item))
    return _wrap("map", pairs)


def _described_to_field(v: Described) -> Any:
    if v.descriptor == LONGSTR_DESCRIPTOR and type(v.descriptor) is symbol and type(v.value) is bytes:
        return LongStrBytes(v.value)
    if v.descriptor == TIMESTAMP_DESCRIPTOR and type(v.descriptor) is symbol and type(v.value) is ulong:
        return Timestamp(int(v.value))
    return _wrap(
        "described",
        {"descriptor": to_field_value(v.descriptor), "value": to_field_value(v.value)},
    )


def _array_to_field(v: Array) -> Any:
    body: dict[str, Any] = {
        "type": _ARRAY_TYPE_NAMES[v.type],
        "elements": [to_field_value(e) for e in v.elements],
    }
    if v.descriptor is not UNDESCRIBED:
        body["descriptor"] = to_field_value(v.descriptor)
    return _wrap("array", body)


#: a 1.0 value's type -> its field-table form (``translators.plain_values`` builds on it)
TO_FIELD: dict[type, Callable[[Any], Any]] = {
    type(None): lambda v: None,
    bool: bool,
    byte: lambda v: Int8(v),
    ubyte: lambda v: UInt8(v),
    short: lambda v: Int16(v),
    ushort: lambda v: UInt16(v),
    int32: lambda v: Int32(v),
    uint: lambda v: UInt32(v),
    int: _long_to_field,
    ulong: lambda v: _wrap("ulong", str(int(v))),
    float32: lambda v: Float32(v),
    float: float,
    str: str,
    bytes: bytes,
    symbol: lambda v: _wrap("symbol", str(v)),
    char: lambda v: _wrap("char", str(v)),
    uuid.UUID: lambda v: _wrap("uuid", str(v)),
    timestamp: _timestamp_to_field,
    decimal32: lambda v: _wrap("decimal32", int(v).to_bytes(4, "big")),
    decimal64: _decimal64_to_field,
    decimal128: lambda v: _wrap("decimal128", bytes(v)),
    list: lambda v: [to_field_value(e) for e in v],
    dict: _map_to_field,
    Described: _described_to_field,
    Array: _array_to_field,
}


def to_field_value(value: Any) -> Any:
    """Convert one AMQP 1.0 value, as proton decodes it, to a 0-9-1 field value.

    Lossless: ``from_field_value(to_field_value(v))`` equals ``v`` with the same proton
    types. Raises ``TranslationError`` for a Python type proton would not produce.
    """
    convert = TO_FIELD.get(type(value))
    if convert is None:
        if isinstance(value, dict):  # proton's AnnotationDict / PropertyDict
            return _map_to_field(dict(value))
        if isinstance(value, list):  # proton's SymbolList
            return [to_field_value(e) for e in value]
        raise TranslationError("value", f"no 0-9-1 form for {type(value).__name__}")
    return convert(value)


# ---------------------------------------------------------------- 0-9-1 -> 1.0


def _int_from_field(v: int) -> int:
    if not _INT64_MIN <= v <= _INT64_MAX:
        raise TranslationError("value", f"integer {v} does not fit a 64-bit long")
    return int(v)


def _timestamp_from_field(v: int) -> Any:
    ms = int(v) * 1000
    if ms <= _INT64_MAX:
        return timestamp(ms)
    return Described(TIMESTAMP_DESCRIPTOR, ulong(int(v)))


def _table_from_field(v: dict) -> Any:
    if v.keys() == _WRAPPER_KEYS:
        return _unwrap(v[WRAPPER_TYPE_KEY], v[WRAPPER_VALUE_KEY])
    return {str(k): from_field_value(item) for k, item in v.items()}


_FROM_FIELD: dict[type, Callable[[Any], Any]] = {
    type(None): lambda v: None,
    bool: bool,
    Int8: lambda v: byte(v),
    UInt8: lambda v: ubyte(v),
    Int16: lambda v: short(v),
    UInt16: lambda v: ushort(v),
    Int32: lambda v: int32(v),
    UInt32: lambda v: uint(v),
    int: _int_from_field,
    Float32: lambda v: float32(v),
    float: float,
    str: str,
    bytes: bytes,
    bytearray: bytes,
    LongStrBytes: lambda v: Described(LONGSTR_DESCRIPTOR, bytes(v)),
    Timestamp: _timestamp_from_field,
    decimal.Decimal: decimal_to_decimal64,
    list: lambda v: [from_field_value(e) for e in v],
    tuple: lambda v: [from_field_value(e) for e in v],
    dict: _table_from_field,
}


def from_field_value(value: Any) -> Any:
    """Convert one 0-9-1 field value (the types of ``translators.field_types``) to the proton
    value that encodes its 1.0 counterpart; typed wrappers are unwrapped.

    Raises ``TranslationError`` for a malformed wrapper or a value no 0-9-1 peer could
    have sent (an ``int`` beyond 64 bits, a non-finite ``Decimal``).
    """
    convert = _FROM_FIELD.get(type(value))
    if convert is None:
        raise TranslationError("value", f"not a 0-9-1 field value: {type(value).__name__}")
    return convert(value)


def _unwrap(type_name: Any, inner: Any) -> Any:
    """Inverse of ``_wrap``; raises ``TranslationError`` when the wrapper is malformed."""
    try:
        if type_name == "ulong":
            return ulong(int(_expect(inner, str)))
        if type_name == "symbol":
            return symbol(_expect(inner, str))
        if type_name == "char":
            text = _expect(inner, str)
            if len(text) != 1:
                raise ValueError("a char is one code point")
            return char(text)
        if type_name == "uuid":
            return uuid.UUID(_expect(inner, str))
        if type_name == "timestamp":
            return timestamp(_int_from_field(_expect(inner, int)))
        if type_name in ("decimal32", "decimal64", "decimal128"):
            # py-amqp sends bytes back as a string (we read text when it is UTF-8)
            raw = inner.encode("utf-8", "surrogatepass") if isinstance(inner, str) else _expect(inner, bytes)
            width = {"decimal32": 4, "decimal64": 8, "decimal128": 16}[type_name]
            if len(raw) != width:
                raise ValueError(f"{type_name} needs {width} octets")
            if type_name == "decimal128":
                return decimal128(raw)
            cls = {"decimal32": decimal32, "decimal64": decimal64}
            return cls[type_name](int.from_bytes(raw, "big"))
        if type_name == "map":
            pairs = [from_field_value(e) for e in _expect(inner, list)]
            if len(pairs) % 2:
                raise ValueError("odd number of key/value items")
            return dict(zip(pairs[0::2], pairs[1::2]))
        if type_name == "described":
            parts = _expect(inner, dict)
            value = from_field_value(parts["value"])
            if type(value) is Described and value.descriptor == LONGSTR_DESCRIPTOR:
                # a 1.0 binary a 0-9-1 library sent back as a long string (py-amqp): its
                # 1.0 form again, as a described value inside a described value is one
                # that proton's decoder cannot read back
                value = value.value
            return Described(from_field_value(parts["descriptor"]), value)
        if type_name == "array":
            parts = _expect(inner, dict)
            code = _ARRAY_TYPE_CODES[parts["type"]]
            descriptor = (
                from_field_value(parts["descriptor"]) if "descriptor" in parts else UNDESCRIBED
            )
            elements = [from_field_value(e) for e in _expect(parts["elements"], list)]
            return Array(descriptor, code, *elements)
    except (ValueError, KeyError, OverflowError, TypeError) as exc:
        raise TranslationError(WRAPPER_VALUE_KEY, f"bad {type_name!r} wrapper: {exc}") from None
    raise TranslationError(WRAPPER_TYPE_KEY, f"unknown wrapped type {type_name!r}")


def _expect(value: Any, kind: type) -> Any:
    # bool is an int subclass, and Int32 etc. are too; only exclude bool for ints.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"expected {kind.__name__}, got {type(value).__name__}")
    return value



def map_to_field(value: dict, key_type: type) -> Any:
    """A 1.0 map whose keys should all be ``key_type`` (``symbol`` for annotations and
    footers) as a 0-9-1 table keyed by the key text; any other key makes it a ``map``
    wrapper so the key types survive."""
    if value.keys() != _WRAPPER_KEYS and all(
        type(k) is key_type and len(k.encode("utf-8")) <= _SHORTSTR_MAX for k in value
    ):
        return {str(k): to_field_value(item) for k, item in value.items()}
    return wrap_map(value)


def wrap_map(value: dict) -> dict:
    """``value`` as a ``map`` wrapper, whatever its keys."""
    pairs: list[Any] = []
    for k, item in value.items():
        pairs.append(to_field_value(k))
        pairs.append(to_field_value(item))
    return _wrap("map", pairs)


def map_from_field(value: Any, key_type: type, field: str) -> dict:
    """Inverse of :func:`map_to_field`; raises ``TranslationError`` naming ``field`` if
    ``value`` is not a table."""
    if type(value) is not dict:
        raise TranslationError(field, "must be a field table")
    if value.keys() == _WRAPPER_KEYS:
        restored = from_field_value(value)
        if type(restored) is not dict:
            raise TranslationError(field, "must hold a map")
        return restored
    return {key_type(k): from_field_value(item) for k, item in value.items()}
