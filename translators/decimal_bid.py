"""The value of an AMQP 1.0 decimal32/64/128: IEEE 754-2008 decimal floating point in the
binary integer decimal (BID) encoding (AMQP 1.0 part 1, 1.6.16-1.6.18).

Why: a 0-9-1 application reads a 1.0 decimal application property as a number it can use
(``D``, a ``decimal.Decimal``) or, where ``D`` cannot hold it, as the decimal's text
(``translators.plain_values``); and ``typed_values`` pairs the decimal64 values ``D`` holds
exactly. Both need the sign, coefficient and exponent the octets stand for.
"""
from __future__ import annotations

import decimal
from typing import NamedTuple, Optional

__all__ = ["BidFields", "bid_fields", "bid_to_decimal", "WIDTHS"]


class _Format(NamedTuple):
    exponent_bits: int
    bias: int
    digits: int  # the precision: a coefficient above 10**digits - 1 is not canonical


WIDTHS = {32: _Format(8, 101, 7), 64: _Format(10, 398, 16), 128: _Format(14, 6176, 34)}
"""BID parameters per width in bits (IEEE 754-2008, table 3.6)."""


class BidFields(NamedTuple):
    """``sign`` 0/1; ``coefficient`` and ``exponent`` (unbiased) of a finite value;
    ``large`` when the coefficient used the large-coefficient form; ``special`` is
    ``"inf"`` or ``"nan"`` (then the other fields but ``sign`` mean nothing)."""

    sign: int
    coefficient: int
    exponent: int
    large: bool
    special: Optional[str]


def bid_fields(bits: int, width: int) -> BidFields:
    """The fields of the BID value ``bits`` (an unsigned integer of ``width`` 32, 64 or
    128 bits, the octets of the AMQP encoding read big-endian). A non-canonical
    coefficient (above the precision) reads as 0, as the standard says."""
    exponent_bits, bias, digits = WIDTHS[width]
    small = width - 1 - exponent_bits  # coefficient bits in the small form
    sign = bits >> (width - 1)
    if (bits >> (width - 3)) & 3 == 3:
        top = (bits >> (width - 6)) & 0x1F
        if top == 0x1E:
            return BidFields(sign, 0, 0, True, "inf")
        if top == 0x1F:
            return BidFields(sign, 0, 0, True, "nan")
        exponent = (bits >> (small - 2)) & ((1 << exponent_bits) - 1)
        coefficient = (0b100 << (small - 2)) | (bits & ((1 << (small - 2)) - 1))
        large = True
    else:
        exponent = (bits >> small) & ((1 << exponent_bits) - 1)
        coefficient = bits & ((1 << small) - 1)
        large = False
    if coefficient > 10**digits - 1:
        coefficient = 0
    return BidFields(sign, coefficient, exponent - bias, large, None)


def bid_to_decimal(bits: int, width: int) -> decimal.Decimal:
    """The value as a ``decimal.Decimal`` (``Infinity``, ``NaN`` included), with the
    coefficient and exponent of the encoding."""
    sign, coefficient, exponent, _, special = bid_fields(bits, width)
    if special == "inf":
        return decimal.Decimal("-Infinity" if sign else "Infinity")
    if special == "nan":
        return decimal.Decimal("-NaN" if sign else "NaN")
    return decimal.Decimal((sign, tuple(int(c) for c in str(coefficient)), exponent))
