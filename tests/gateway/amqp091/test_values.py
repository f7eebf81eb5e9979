"""Field tables and primitives: round trips of every type, spec letters, malformed input."""
from __future__ import annotations

import struct
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from pamqp import decode as pamqp_decode
from pamqp import encode as pamqp_encode

from gateway.amqp091.errors import DecodeError
from gateway.amqp091.values import (
    MAX_DEPTH,
    decode_array,
    decode_field_value,
    decode_longstr,
    decode_shortstr,
    decode_table,
    encode_array,
    encode_field_value,
    encode_longstr,
    encode_shortstr,
    encode_table,
)
from tests.support.amqp091_strategies import field_tables, field_values
from translators.field_types import Float32, Int8, Int16, Int32, LongStrBytes, Timestamp, UInt8, UInt16, UInt32


def typed(value: Any) -> Any:
    """The value with its exact type kept at every level, so 1 != True != Int8(1)."""
    if isinstance(value, dict):
        return ("dict", [(k, typed(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [typed(v) for v in value])
    if isinstance(value, Decimal):
        return ("Decimal", str(value))
    return (type(value).__name__, value)


@given(field_tables)
def test_table_round_trip_keeps_every_type(table: dict) -> None:
    raw = encode_table(table)
    decoded, offset = decode_table(raw, 0)
    assert offset == len(raw)
    assert typed(decoded) == typed(table)


@given(field_values)
def test_field_value_round_trip(value: Any) -> None:
    raw = encode_field_value(value)
    decoded, offset = decode_field_value(raw, 0)
    assert offset == len(raw)
    assert typed(decoded) == typed(value)


@given(field_tables)
def test_table_decodes_at_an_offset_and_leaves_trailing_bytes(table: dict) -> None:
    raw = b"junk" + encode_table(table) + b"tail"
    decoded, offset = decode_table(raw, 4)
    assert offset == len(raw) - 4
    assert typed(decoded) == typed(table)


@pytest.mark.parametrize(
    ("value", "letter"),
    [
        (True, b"t"), (Int8(-1), b"b"), (UInt8(255), b"B"), (Int16(-2), b"s"), (UInt16(2), b"u"),
        (Int32(-3), b"I"), (UInt32(3), b"i"), (7, b"l"), (Float32(1.5), b"f"), (2.5, b"d"),
        (Decimal("1.23"), b"D"), ("text", b"S"), (LongStrBytes(b"\xff"), b"S"), (b"\x00", b"x"),
        ([1], b"A"), (Timestamp(5), b"T"), ({"a": 1}, b"F"), (None, b"V"),
    ],
)
def test_each_type_encodes_to_its_rabbitmq_letter(value: Any, letter: bytes) -> None:
    assert encode_field_value(value)[:1] == letter


def test_decimal_wire_form() -> None:
    assert encode_field_value(Decimal("-1.23")) == b"D" + struct.pack(">Bi", 2, -123)
    assert encode_field_value(Decimal("1E+2")) == b"D" + struct.pack(">Bi", 0, 100)
    with pytest.raises(ValueError):
        encode_field_value(Decimal("NaN"))


def test_spec_letters_without_a_clash_are_decoded() -> None:
    value, _ = decode_field_value(b"U" + struct.pack(">h", -5), 0)
    assert type(value) is Int16 and value == -5
    value, _ = decode_field_value(b"L" + struct.pack(">q", -(2**40)), 0)
    assert type(value) is int and value == -(2**40)


def test_invalid_utf8_long_string_decodes_as_longstrbytes_and_re_encodes_as_S() -> None:
    raw = b"S" + encode_longstr(b"\xff\xfe")
    value, _ = decode_field_value(raw, 0)
    assert type(value) is LongStrBytes
    assert encode_field_value(value) == raw


def test_duplicate_names_keep_the_first() -> None:
    body = encode_shortstr("a") + b"l" + struct.pack(">q", 1) + encode_shortstr("a") + b"l" + struct.pack(">q", 2)
    table, _ = decode_table(struct.pack(">I", len(body)) + body, 0)
    assert table == {"a": 1}


def test_nesting_is_bounded() -> None:
    value: Any = 1
    for _ in range(MAX_DEPTH + 2):
        value = [value]
    raw = b"l" + struct.pack(">q", 1)
    for _ in range(MAX_DEPTH + 2):
        raw = b"A" + struct.pack(">I", len(raw)) + raw
    with pytest.raises(DecodeError) as info:
        decode_field_value(raw, 0)
    assert "nested deeper" in str(info.value)
    with pytest.raises(ValueError):
        encode_field_value(value)


@pytest.mark.parametrize(
    "raw",
    [
        b"\x00\x00",  # size missing
        struct.pack(">I", 10) + b"\x01a",  # size overruns the buffer
        struct.pack(">I", 3) + b"\x01ab",  # name runs past the table into nothing
        struct.pack(">I", 3) + b"\x01aZ",  # unknown type letter
        struct.pack(">I", 4) + b"\x01aI\x00",  # int32 truncated
        struct.pack(">I", 7) + b"\x01aS\x00\x00\x00\x09",  # long string overruns
        struct.pack(">I", 3) + b"\x01al" + b"\x00" * 8,  # value runs past the table size
    ],
)
def test_malformed_tables_raise_decode_error(raw: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_table(raw, 0)


def test_unknown_letter_is_named() -> None:
    with pytest.raises(DecodeError) as info:
        decode_field_value(b"Z", 0)
    assert "'Z'" in str(info.value)


def test_strings() -> None:
    assert decode_shortstr(encode_shortstr("héllo") + b"x", 0) == ("héllo", 7)
    assert decode_longstr(encode_longstr(b"abc"), 0) == (b"abc", 7)
    with pytest.raises(ValueError):
        encode_shortstr("x" * 256)
    with pytest.raises(DecodeError):
        decode_shortstr(b"\x05abc", 0)
    with pytest.raises(DecodeError):
        decode_shortstr(b"\x01\xff", 0)
    with pytest.raises(DecodeError):
        decode_longstr(b"\x00\x00\x00\x05abc", 0)


def test_array_round_trip() -> None:
    items = [1, "a", [Int8(2)], {"k": None}]
    raw = encode_array(items)
    assert decode_array(raw, 0) == (items, len(raw))


def test_int_beyond_int64_is_refused() -> None:
    with pytest.raises(ValueError):
        encode_field_value(2**63)


def test_cross_check_with_pamqp() -> None:
    table = {"s": "text", "l": 2**40, "t": True, "F": {"n": 1.5}, "A": [1, "x"], "V": None}
    ours = encode_table(table)
    assert pamqp_decode.field_table(ours)[1] == table
    # pamqp picks the narrowest integer letter; we decode whatever it chose
    theirs = pamqp_encode.field_table(table)
    assert decode_table(theirs, 0) == (table, len(theirs))
