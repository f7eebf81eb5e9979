"""Plain 0-9-1 values of 1.0 application properties (MAPPING.md table D), and which of
them need the carried section (carriage)."""
from __future__ import annotations

import datetime
import decimal
import uuid

import pytest
from hypothesis import given, settings
from proton import (UNDESCRIBED, Array, Data, Described, byte, char, decimal32, decimal64, decimal128,
                    float32, int32, short, symbol, timestamp, ubyte, uint, ulong, ushort)

from tests.support.amqp_message_strategies import amqp10_values, typed
from tests.support.example_counts import examples
from translators.mapping import Reserved
from translators.plain_values import Carriage, carriage, is_header_name, name_carriage, plain_field_value
from translators.typed_values import LONGSTR_DESCRIPTOR, TIMESTAMP_DESCRIPTOR, from_field_value, to_field_value
from translators.field_types import Float32, Int8, Int16, Int32, LongStrBytes, Timestamp, UInt8, UInt16, UInt32

U = uuid.UUID("12345678-1234-5678-1234-567812345678")
D = decimal.Decimal

TABLE = [
    (None, None), (True, True), ("text", "text"), (b"\x00", b"\x00"),
    (byte(-1), Int8(-1)), (ubyte(1), UInt8(1)), (short(-2), Int16(-2)), (ushort(2), UInt16(2)),
    (int32(-3), Int32(-3)), (uint(3), UInt32(3)), (-(2**40), -(2**40)),
    (float32(1.5), Float32(1.5)), (1.25, 1.25),
    (ulong(5), 5), (ulong(2**64 - 1), str(2**64 - 1)),
    (symbol("sym"), "sym"), (char("é"), "é"), (U, str(U)),
    (timestamp(1700000000123), Timestamp(1700000000)), (timestamp(-1500), -2),
    (decimal64((397 << 53) | 15), D("1.5")),
    (decimal32(0x3280007B), D("123")),
    (decimal32(0x77F8967F), "9.999999E+96"),  # beyond D
    (decimal64((399 << 53) | 15), D("150")),  # the exponent moved where D holds it
    (decimal128(b"\x30\x40" + b"\x00" * 13 + b"\x7b"), D("123")),
    (decimal32(0x78000000), "Infinity"),
    (["a", U], ["a", str(U)]), (Array(UNDESCRIBED, Data.INT, int32(1)), [Int32(1)]),
    ({"k": U, symbol("s"): 1}, {"k": str(U), "s": 1}),
    ({ulong(1): "one"}, [1, "one"]), ({"k" * 256: 1}, ["k" * 256, 1]),
    (Described(symbol("x-d"), U), str(U)),
    (Described(LONGSTR_DESCRIPTOR, b"\xff"), LongStrBytes(b"\xff")),
    (Described(TIMESTAMP_DESCRIPTOR, ulong(2**63)), Timestamp(2**63)),
]


@pytest.mark.parametrize(("value", "plain"), TABLE)
def test_plain_values(value, plain):
    assert typed(plain_field_value(value)) == typed(plain)


def test_a_date_reads_as_a_date_in_pika():
    import pika.data

    from gateway.amqp091.values import encode_table

    pika_value = pika.data.decode_table(encode_table({"t": plain_field_value(timestamp(1700000000000))}), 0)[0]
    assert pika_value["t"] == datetime.datetime(2023, 11, 14, 22, 13, 20, tzinfo=datetime.timezone.utc)


@settings(max_examples=examples(300), deadline=None)
@given(amqp10_values)
def test_a_value_that_needs_no_wrapper_is_its_typed_value_and_comes_back(value):
    """Below INEXACT the plain value is exactly what the typed translation writes, and
    translates back to the 1.0 value; INEXACT is exactly where a wrapper is needed."""
    plain = plain_field_value(value)
    if carriage(value) is Carriage.INEXACT:
        assert typed(from_field_value(to_field_value(value))) == typed(value)
        assert "x-amqp-1.0-type" in repr(to_field_value(value)) or typed(from_field_value(plain)) != typed(value)
    else:
        assert typed(plain) == typed(to_field_value(value))
        assert typed(from_field_value(plain)) == typed(value)


@pytest.mark.parametrize(
    ("value", "level"),
    [
        ("s", Carriage.ROBUST), (True, Carriage.ROBUST), (None, Carriage.ROBUST),
        (timestamp(5000), Carriage.ROBUST), (["a", {"k": None}], Carriage.ROBUST),
        (timestamp(2**32 * 1000), Carriage.FRAGILE),  # after 2106: pamqp reads milliseconds
        (int32(1), Carriage.FRAGILE), (1.5, Carriage.FRAGILE), (b"x", Carriage.FRAGILE),
        (decimal64((397 << 53) | 15), Carriage.FRAGILE), (["a", 1], Carriage.FRAGILE),
        ({"k" * 129: "v"}, Carriage.FRAGILE),  # pamqp cuts the key
        (Described(LONGSTR_DESCRIPTOR, b"\xff"), Carriage.FRAGILE),
        (U, Carriage.INEXACT), (symbol("s"), Carriage.INEXACT), (ulong(1), Carriage.INEXACT),
        (timestamp(1), Carriage.INEXACT), (["a", U], Carriage.INEXACT),
        ({symbol("k"): 1}, Carriage.INEXACT), ({"x-amqp-1.0-type": "a", "x-amqp-1.0-value": "b"}, Carriage.INEXACT),
        (decimal32(0x3280007B), Carriage.INEXACT), (Described(symbol("d"), "v"), Carriage.INEXACT),
    ],
)
def test_carriage(value, level):
    assert carriage(value) is level


def test_header_names_and_their_carriage():
    assert is_header_name("k") and is_header_name("é" * 127)
    assert not is_header_name("é" * 128) and not is_header_name(symbol("k"))
    assert not is_header_name(Reserved.APP_PROPERTIES.value) and not is_header_name(Reserved.TO.value)
    assert name_carriage("k" * 128) is Carriage.ROBUST and name_carriage("é" * 65) is Carriage.FRAGILE
    assert name_carriage("é" * 128) is None and name_carriage(Reserved.TO.value) is None
