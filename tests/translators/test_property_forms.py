"""The per-field forms: what 0-9-1 shows for a 1.0 value, and what comes back."""
from __future__ import annotations

import uuid

import pytest
from proton import symbol, timestamp, uint, ulong

from translators import BasicProperties, decode_sections, to_amqp10
from translators.mapping import Reserved
from translators.property_forms import CARRIED_PROPERTIES, amqp10_field_value, expiration_ttl, same_typed
from translators.section_scan import SectionCode
from translators.field_types import Int8, Int32, UInt32

RULES = {rule.reserved: rule for rule in CARRIED_PROPERTIES}


@pytest.mark.parametrize(
    "reserved, value, form, exact",
    [
        (Reserved.MESSAGE_ID, "m", "m", True),
        (Reserved.MESSAGE_ID, ulong(7), "7", False),
        (Reserved.MESSAGE_ID, uuid.UUID(int=0), "00000000-0000-0000-0000-000000000000", False),
        (Reserved.MESSAGE_ID, b"\xab", "ab", False),
        (Reserved.MESSAGE_ID, "x" * 256, None, False),
        (Reserved.USER_ID, b"bob", "bob", True),
        (Reserved.USER_ID, b"\xff", None, False),
        (Reserved.REPLY_TO, "/queue/q", "q", True),
        (Reserved.REPLY_TO, "q", "q", False),
        (Reserved.CONTENT_TYPE, symbol("a/b"), "a/b", True),
        (Reserved.CONTENT_TYPE, "a/b", "a/b", False),  # a string where a symbol belongs
        (Reserved.CREATION_TIME, timestamp(3000), 3, True),
        (Reserved.CREATION_TIME, timestamp(3001), 3, False),
        (Reserved.TO, "/queue/q", None, False),
    ],
)
def test_forms(reserved, value, form, exact):
    rule = RULES[reserved]
    assert rule.form(value) == form
    assert (form is not None and same_typed(rule.inverse(form), value)) is exact


def test_every_properties_field_has_one_rule():
    assert sorted(rule.index for rule in CARRIED_PROPERTIES) == list(range(13))


@pytest.mark.parametrize("text, ttl", [("0", 0), ("10", 10), ("007", 7), ("4294967296", None), ("x", None), ("²", None)])
def test_expiration_ttl(text, ttl):
    assert expiration_ttl(text) == ttl


def test_same_typed_distinguishes_symbol_from_str():
    assert not same_typed(symbol("a"), "a") and same_typed("a", "a")


@pytest.mark.parametrize("value", [Int32(7), Int8(7), 7, UInt32(7)])
def test_group_sequence_header_of_any_integer_letter_becomes_a_uint(value):
    """pika can only write 'I'/'l' integers: the 1.0 field is still a uint."""
    props = BasicProperties(headers={Reserved.GROUP_SEQUENCE.value: value})
    fields = dict(decode_sections(to_amqp10(props, b"")))[SectionCode.PROPERTIES]
    assert fields[11] == 7 and type(fields[11]) is uint


@pytest.mark.parametrize("value", [-1, 2**32, "7"])
def test_group_sequence_header_out_of_uint_range_is_kept_as_sent(value):
    assert amqp10_field_value(Reserved.GROUP_SEQUENCE, value) == value
    assert same_typed(amqp10_field_value(Reserved.SUBJECT, "s"), "s")
