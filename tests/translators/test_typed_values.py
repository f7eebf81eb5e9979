"""Typed value conversion: lossless both ways, wrappers for values without a counterpart."""
from __future__ import annotations

import decimal
import uuid

import pytest
from hypothesis import given, settings
from proton import Array, Data, Described, UNDESCRIBED, char, decimal32, decimal64, symbol, timestamp, ulong

from tests.support.amqp_message_strategies import amqp10_values, field_values, typed
from tests.support.example_counts import examples
from translators import TranslationError
from translators.typed_values import (
    decimal64_to_decimal,
    decimal_to_decimal64,
    from_field_value,
    map_from_field,
    map_to_field,
    to_field_value,
)
from translators.field_types import Int32, LongStrBytes, Timestamp, UInt32


def _through_proton(value):
    data = Data()
    data.put_object(value)
    decoded = Data()
    decoded.decode(bytes(data.encode()))
    decoded.next()
    # proton's binaries are views into the decoder's buffer: copy before it is freed.
    return _owned(decoded.get_object())


@settings(max_examples=examples(500), deadline=None)
@given(amqp10_values)
def test_amqp10_value_round_trip(value):
    assert typed(from_field_value(to_field_value(value))) == typed(value)


@settings(max_examples=examples(500), deadline=None)
@given(field_values)
def test_field_value_round_trip_through_proton_encoding(value):
    amqp10 = _through_proton(from_field_value(value))
    assert typed(to_field_value(amqp10)) == typed(value)


def _owned(value):
    if isinstance(value, memoryview):
        return value.tobytes()
    if isinstance(value, list):
        return [_owned(v) for v in value]
    if isinstance(value, dict):
        return {k: _owned(v) for k, v in value.items()}
    if isinstance(value, Described):
        return Described(value.descriptor, _owned(value.value))
    return value


@pytest.mark.parametrize(
    "value, expected",
    [
        (ulong(2**64 - 1), {"x-amqp-1.0-type": "ulong", "x-amqp-1.0-value": str(2**64 - 1)}),
        (symbol("s"), {"x-amqp-1.0-type": "symbol", "x-amqp-1.0-value": "s"}),
        (char("é"), {"x-amqp-1.0-type": "char", "x-amqp-1.0-value": "é"}),
        (uuid.UUID(int=1), {"x-amqp-1.0-type": "uuid", "x-amqp-1.0-value": str(uuid.UUID(int=1))}),
        (timestamp(1500), {"x-amqp-1.0-type": "timestamp", "x-amqp-1.0-value": 1500}),
        (timestamp(-1000), {"x-amqp-1.0-type": "timestamp", "x-amqp-1.0-value": -1000}),
        (decimal32(7), {"x-amqp-1.0-type": "decimal32", "x-amqp-1.0-value": b"\x00\x00\x00\x07"}),
        ({1: "a"}, {"x-amqp-1.0-type": "map", "x-amqp-1.0-value": [1, "a"]}),
        (Described(symbol("d"), 1), {"x-amqp-1.0-type": "described",
                                     "x-amqp-1.0-value": {"descriptor": {"x-amqp-1.0-type": "symbol", "x-amqp-1.0-value": "d"}, "value": 1}}),
        (Array(UNDESCRIBED, Data.UINT), {"x-amqp-1.0-type": "array", "x-amqp-1.0-value": {"type": "uint", "elements": []}}),
    ],
)
def test_wrappers(value, expected):
    assert to_field_value(value) == expected
    assert typed(from_field_value(expected)) == typed(value)


def test_natural_counterparts():
    assert type(to_field_value(timestamp(5000))) is Timestamp
    assert to_field_value(timestamp(5000)) == 5
    assert type(from_field_value(Int32(3))).__name__ == "int32"
    assert type(from_field_value(UInt32(3))).__name__ == "uint"
    assert from_field_value(LongStrBytes(b"\xff")) == Described(symbol("x-amqp-0-9-1:longstr"), b"\xff")
    assert from_field_value(Timestamp(2**63)) == Described(symbol("x-amqp-0-9-1:timestamp"), ulong(2**63))


def test_map_that_looks_like_a_wrapper_is_wrapped():
    value = {"x-amqp-1.0-type": "ulong", "x-amqp-1.0-value": "1"}
    assert to_field_value(value)["x-amqp-1.0-type"] == "map"
    assert from_field_value(to_field_value(value)) == value


@pytest.mark.parametrize(
    "places, unscaled",
    [(0, 0), (2, 12345), (255, 2**31 - 1), (3, -(2**31) + 1), (1, -5)],
)
def test_decimal_d_to_decimal64_is_exact(places, unscaled):
    value = decimal.Decimal(unscaled).scaleb(-places)
    bits = decimal_to_decimal64(value)
    assert type(bits) is decimal64
    back = decimal64_to_decimal(int(bits))
    assert back == value and back.as_tuple().exponent == -places


@pytest.mark.parametrize(
    "bits",
    [0x7800000000000000,  # infinity
     0x7C00000000000000,  # NaN
     (1 << 63) | (398 << 53),  # -0
     ((398 + 5) << 53) | 1,  # positive exponent
     (398 << 53) | 2**31],  # coefficient beyond int32
)
def test_decimal64_outside_d_stays_wrapped(bits):
    assert decimal64_to_decimal(bits) is None
    wrapped = to_field_value(decimal64(bits))
    assert wrapped["x-amqp-1.0-type"] == "decimal64"
    assert from_field_value(wrapped) == bits


@pytest.mark.parametrize(
    "value, field",
    [
        ({"x-amqp-1.0-type": "nonsense", "x-amqp-1.0-value": 1}, "x-amqp-1.0-type"),
        ({"x-amqp-1.0-type": "ulong", "x-amqp-1.0-value": "x"}, "x-amqp-1.0-value"),
        ({"x-amqp-1.0-type": "char", "x-amqp-1.0-value": "ab"}, "x-amqp-1.0-value"),
        ({"x-amqp-1.0-type": "decimal64", "x-amqp-1.0-value": b"\x00"}, "x-amqp-1.0-value"),
        ({"x-amqp-1.0-type": "map", "x-amqp-1.0-value": [1]}, "x-amqp-1.0-value"),
        (2**64, "value"),
        (decimal.Decimal("NaN"), "decimal"),
        (object(), "value"),
    ],
)
def test_malformed_values_raise(value, field):
    with pytest.raises(TranslationError) as caught:
        from_field_value(value)
    assert caught.value.field == field


def test_annotation_maps():
    annotations = {symbol("x-opt-a"): 1, symbol("b"): "c"}
    table = map_to_field(annotations, symbol)
    assert table == {"x-opt-a": 1, "b": "c"}
    assert typed(map_from_field(table, symbol, "f")) == typed(annotations)
    mixed = {symbol("a"): 1, ulong(7): 2}
    assert map_to_field(mixed, symbol)["x-amqp-1.0-type"] == "map"
    assert typed(map_from_field(map_to_field(mixed, symbol), symbol, "f")) == typed(mixed)
    with pytest.raises(TranslationError) as caught:
        map_from_field("not a table", symbol, "x-amqp-1.0-footer")
    assert caught.value.field == "x-amqp-1.0-footer"


def test_a_described_binary_a_library_sent_back_as_a_long_string_decodes_in_proton():
    """py-amqp sends a binary back as a long string; inside a ``described`` wrapper that
    came back as a described value of a described value, which proton's decoder cannot
    read (found by test_relay_round_trips)."""
    wrapped = to_field_value(Described(symbol("d"), b"\x80"))
    relayed = dict(wrapped)
    relayed["x-amqp-1.0-value"] = dict(wrapped["x-amqp-1.0-value"], value=LongStrBytes(b"\x80"))
    back = from_field_value(relayed)
    assert back == Described(symbol("d"), b"\x80") and type(back.value) is bytes
    data = Data()
    data.put_object({symbol("k"): {"0": back, "": []}})
    decoded = Data()
    decoded.decode(bytes(data.encode()))
    decoded.rewind()
    decoded.next()
    assert decoded.get_object() == {symbol("k"): {"0": back, "": []}}
