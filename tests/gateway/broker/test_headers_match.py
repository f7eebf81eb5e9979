"""Headers matching: all/any/with-x, void values, type-class equality."""
from __future__ import annotations

from decimal import Decimal

import pytest

from gateway.broker import InvalidArgument, MatchKind
from gateway.broker.headers_match import headers_match, parse_x_match, values_equal
from translators.field_types import Float32, Int8, Int32, LongStrBytes, Timestamp, UInt16


@pytest.mark.parametrize(
    ("arguments", "headers", "expected"),
    [
        ({"x-match": "all", "a": 1, "b": "x"}, {"a": 1, "b": "x", "c": 3}, True),
        ({"x-match": "all", "a": 1, "b": "x"}, {"a": 1}, False),
        ({"x-match": "all", "a": 1, "b": "x"}, {"a": 1, "b": "y"}, False),
        ({"a": 1, "b": "x"}, {"a": 1}, False),  # missing x-match = all
        ({"a": 1}, {"a": 1}, True),
        ({"x-match": "any", "a": 1, "b": "x"}, {"b": "x"}, True),
        ({"x-match": "any", "a": 1, "b": "x"}, {"b": "y", "a": 2}, False),
        ({"x-match": "any", "a": 1}, None, False),
        ({"x-match": "all"}, {"anything": 1}, True),  # no fields: all matches everything
        ({"x-match": "all"}, None, True),
        ({"x-match": "any"}, {"anything": 1}, False),  # ... and any matches nothing
        ({"x-match": "all", "a": None}, {"a": "whatever"}, True),  # void: presence only
        ({"x-match": "all", "a": None}, {"b": 1}, False),
        ({"x-match": "any", "a": None, "b": 2}, {"a": None}, True),
        # x- fields are ignored for all/any ...
        ({"x-match": "all", "x-foo": "bar", "a": 1}, {"a": 1}, True),
        ({"x-match": "any", "x-foo": "bar"}, {"x-foo": "bar"}, False),
        # ... and count for the with-x kinds
        ({"x-match": "all-with-x", "x-foo": "bar", "a": 1}, {"a": 1}, False),
        ({"x-match": "all-with-x", "x-foo": "bar", "a": 1}, {"a": 1, "x-foo": "bar"}, True),
        ({"x-match": "any-with-x", "x-foo": "bar"}, {"x-foo": "bar"}, True),
        ({"x-match": "any-with-x", "x-foo": "bar"}, {"x-foo": "baz"}, False),
    ],
)
def test_match_rules(arguments: dict, headers: dict, expected: bool) -> None:
    assert headers_match(arguments, headers) is expected


@pytest.mark.parametrize(
    ("pattern", "value", "expected"),
    [
        (1, Int8(1), True),  # all integer widths are one class
        (Int32(5), UInt16(5), True),
        (1, 1.0, False),  # int never equals float
        (Float32(1.5), 1.5, True),
        (True, 1, False),  # bool is its own class
        (1, True, False),
        ("abc", LongStrBytes(b"abc"), True),
        ("abc", b"abc", False),  # longstr vs binary
        (b"abc", b"abc", True),
        (Timestamp(5), 5, False),
        (Decimal("1.5"), Decimal("1.50"), True),
        ([1, "a"], [Int8(1), "a"], True),
        ([1], [1.0], False),
        ({"k": 1}, {"k": Int8(1)}, True),
        ({"k": 1}, {"j": 1}, False),
        ("abc", "abd", False),
    ],
)
def test_values_equal_is_type_class_strict(pattern: object, value: object, expected: bool) -> None:
    assert values_equal(pattern, value) is expected


def test_parse_x_match() -> None:
    assert parse_x_match(None) is MatchKind.ALL
    assert parse_x_match({}) is MatchKind.ALL
    assert parse_x_match({"x-match": "any"}) is MatchKind.ANY
    assert parse_x_match({"x-match": b"any-with-x"}) is MatchKind.ANY_WITH_X
    with pytest.raises(InvalidArgument) as info:
        parse_x_match({"x-match": "some"})
    assert "x-match" in info.value.text
