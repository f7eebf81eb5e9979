"""BID decimals (AMQP 1.0 decimal32/64/128) read as decimal.Decimal."""
from __future__ import annotations

import decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from translators.decimal_bid import bid_fields, bid_to_decimal
from translators.typed_values import decimal_to_decimal64

D = decimal.Decimal


@pytest.mark.parametrize(
    "bits, width, value",
    [
        (0x3280007B, 32, D("123")),
        (0x77F8967F, 32, D("9999999E+90")),  # the largest decimal32 (large-coefficient form)
        (0x00000001, 32, D("1E-101")),
        (0xB280007B, 32, D("-123")),
        ((397 << 53) | 15, 64, D("1.5")),
        ((1 << 63) | (398 << 53), 64, D("-0")),
        (0x6C7386F26FC0FFFF, 64, D("9999999999999999")),  # large form, 16 digits
        (int.from_bytes(b"\x30\x40" + b"\x00" * 13 + b"\x7b", "big"), 128, D("123")),
        (0x30400000000000000000000000000001, 128, D("1")),
    ],
)
def test_known_encodings(bits, width, value):
    got = bid_to_decimal(bits, width)
    assert got == value and got.as_tuple() == value.as_tuple()


@pytest.mark.parametrize("width", [32, 64, 128])
def test_infinities_and_nans(width):
    top = width - 1
    assert bid_to_decimal(0b11110 << (top - 5), width) == D("Infinity")
    assert bid_to_decimal((1 << top) | (0b11110 << (top - 5)), width) == D("-Infinity")
    assert bid_to_decimal(0b11111 << (top - 5), width).is_nan()
    assert bid_fields(0b11111 << (top - 5), width).special == "nan"


def test_a_coefficient_beyond_the_precision_reads_as_zero():
    # decimal64 large form with the largest coefficient field: above 10**16 - 1
    assert bid_to_decimal((0b11 << 61) | (398 << 51) | ((1 << 51) - 1), 64) == 0


@given(st.integers(0, 1), st.integers(0, 2**53 - 1), st.integers(-398, 369))
def test_decimal64_small_form_round_trips_with_our_encoder(sign, coefficient, exponent):
    value = D((sign, tuple(int(c) for c in str(coefficient)), exponent))
    got = bid_to_decimal(int(decimal_to_decimal64(value)), 64)
    assert got.as_tuple() == value.as_tuple()
