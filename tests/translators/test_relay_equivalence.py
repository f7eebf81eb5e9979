"""unchanged_by_relay: what a 0-9-1 library's decoding and re-encoding may do to a header
value we wrote is not an edit; anything else is. The libraries' own table codecs
(``tests/support/lossy_relays.py``) are the oracle for the first half."""
from __future__ import annotations

import decimal

import pytest
from hypothesis import HealthCheck, given, settings

from gateway.amqp091.values import decode_table, encode_table
from tests.support.amqp_message_strategies import amqp10_values
from tests.support.example_counts import examples
from tests.support.lossy_relays import TABLE_RELAYS, ClientCannot
from translators.plain_values import plain_field_value
from translators.relay_equivalence import relayed_name, unchanged_by_relay
from translators.typed_values import to_field_value
from translators.field_types import Float32, Int8, Int32, LongStrBytes, Timestamp, UInt8


@pytest.mark.parametrize(
    "sent, got",
    [
        (None, None), (True, True), ("text", "text"), ("tëxt", "tëxt".encode()),
        (Int8(-5), Int32(-5)), (UInt8(5), 5), (Timestamp(17), Timestamp(17)), (2**40, 2**40),
        (1.25, 1), (-2.75, -2), (1.25, 1.25), (1.1, Float32(1.100000023841858)), (Float32(1.5), 1.5),
        (float("nan"), float("nan")),
        (decimal.Decimal("1.50"), decimal.Decimal("1.5")), (b"\x00\xff", b"\x00\xff"),
        (b"abc", "abc"), (b"\xff", LongStrBytes(b"\xff")), (LongStrBytes(b"\xff"), b"\xff"),
        ([1.5, "x"], [1, "x"]), ({"k": 2.5, "j": [True]}, {"j": [True], "k": 2}),
        ({"k" * 200: 1}, {relayed_name("k" * 200): 1}),
    ],
)
def test_what_a_library_may_do_is_not_an_edit(sent, got):
    assert unchanged_by_relay(sent, got)


@pytest.mark.parametrize(
    "sent, got",
    [
        (None, 0), (True, 1), (1, True), ("text", "other"), ("5", 5), (5, "5"), (Int8(5), Int8(6)),
        (1.25, 2), (1.25, 1.5), (float("inf"), 0), (decimal.Decimal("1.5"), decimal.Decimal("1.6")),
        (decimal.Decimal("1.5"), 1.5), (b"\x00", b"\x01"), (b"abc", "abd"), ([1], [1, 2]), ([1], (2,)),
        ({"k": 1}, {"k": 1, "j": 2}), ({"k": 1}, {"j": 1}), ({"k": 1}, [1]), (Timestamp(1), 2),
        ({"x-amqp-1.0-type": "uuid", "x-amqp-1.0-value": "a"}, "a"),
    ],
)
def test_anything_else_is_an_edit(sent, got):
    assert not unchanged_by_relay(sent, got)


def test_relayed_name_cuts_at_128_octets_without_splitting_a_character():
    assert relayed_name("k" * 128) == "k" * 128
    assert relayed_name("k" * 127 + "é") == "k" * 127
    assert len(relayed_name("é" * 100).encode()) == 128


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(amqp10_values)
def test_every_library_gives_back_what_counts_as_unchanged(value):
    """Our plain and typed values of any 1.0 value, through pika's, py-amqp's and pamqp's
    own table decoders and encoders, still count as unchanged."""
    for sent in (plain_field_value(value), to_field_value(value)):
        raw = encode_table({"k": sent})
        for name, relay in TABLE_RELAYS.items():
            try:
                relayed = relay(raw)
            except ClientCannot:
                continue  # the library cannot hold the value at all
            got = decode_table(relayed, 0)[0]["k"]
            assert unchanged_by_relay(sent, got), (name, sent, got)
