"""The pure-Python decoder returns exactly what proton's decoder returns."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from proton import Data, Message

from tests.support.amqp_message_strategies import amqp10_sections, amqp10_values, encode_sections, typed
from tests.support.example_counts import examples
from translators import TranslationError
from translators.amqp10_sections import decode_section, decode_section_fast
from translators.primitive_decoder import Unsupported, decode_value
from translators.section_scan import scan_sections


@settings(max_examples=examples(500), deadline=None)
@given(amqp10_values)
def test_agrees_with_proton(value):
    data = Data()
    data.put_object(value)
    encoded = bytes(data.encode())
    try:
        ours, end = decode_value(encoded + b"\x40", 0)
    except Unsupported:
        return
    assert end == len(encoded)
    decoded = Data()
    decoded.decode(encoded)
    decoded.next()
    theirs = decoded.get_object()
    assert typed(ours) == typed(theirs)


@settings(max_examples=examples(200), deadline=None)
@given(amqp10_sections())
def test_sections_agree_with_proton(sections):
    encoded = encode_sections(sections)
    for span in scan_sections(encoded):
        assert typed(decode_section_fast(encoded, span)) == typed(decode_section(encoded, span))


def test_compact_encodings_agree():
    message = Message(body="x", durable=True, priority=5, ttl=1, id=7, subject="s", user_id=b"u",
                      creation_time=1.5, properties={"a": 1, "b": -1, "c": 300, "d": 2.5, "e": True})
    encoded = bytes(message.encode())
    for span in scan_sections(encoded):
        assert typed(decode_section_fast(encoded, span)) == typed(decode_section(encoded, span))


@pytest.mark.parametrize("encoded", [b"\xa1\x05ab", b"\xc0\x03\x02\x40", b"\x70\x00", b"\xa1\x01\xff", b"\xc1\x02\x01\x40"])
def test_malformed(encoded):
    with pytest.raises(TranslationError):
        decode_value(encoded, 0)
