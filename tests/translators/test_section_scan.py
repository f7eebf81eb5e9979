"""The section scanner against proton's encoder, in all the encodings proton produces."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from proton import Data, Described, Message, symbol, ulong

from tests.support.amqp_message_strategies import amqp10_sections, amqp10_values, encode_sections
from tests.support.example_counts import examples
from translators import TranslationError
from translators.section_scan import (BODY_CODES, SectionCode, encode_binary_section, ends_with_body,
                                      scan_sections, value_end)


@settings(max_examples=examples(300), deadline=None)
@given(amqp10_values)
def test_value_end_matches_proton_decode(value):
    data = Data()
    data.put_object(value)
    encoded = bytes(data.encode())
    assert value_end(encoded + b"\x40trailing", 0) == len(encoded)


@settings(max_examples=examples(300), deadline=None)
@given(amqp10_sections())
def test_scan_finds_every_section(sections):
    encoded = encode_sections(sections)
    spans = scan_sections(encoded)
    assert [span.code for span in spans] == [code for code, _ in sections]
    assert spans[0].start == 0 if spans else encoded == b""
    for before, after in zip(spans, spans[1:]):
        assert before.end == after.start
    if spans:
        assert spans[-1].end == len(encoded)
    for span, (code, value) in zip(spans, sections):
        data = Data()
        assert data.decode(encoded[span.start : span.end]) == span.end - span.start


def test_compact_encodings_from_proton_message():
    message = Message(body="hi", durable=True, id=5, properties={"a": 1}, annotations={"x-opt-a": 1})
    encoded = bytes(message.encode())
    codes = [span.code for span in scan_sections(encoded)]
    assert codes == [SectionCode.HEADER, SectionCode.MESSAGE_ANNOTATIONS, SectionCode.PROPERTIES,
                     SectionCode.APPLICATION_PROPERTIES, SectionCode.AMQP_VALUE]


def test_symbolic_and_long_descriptors():
    data = Data()
    data.put_object(Described(symbol("amqp:header:list"), [True]))
    data.put_object(Described(symbol("amqp:data:binary"), b"abc"))
    encoded = bytes(data.encode())
    long_form = b"\x00\x80" + (0x75).to_bytes(8, "big") + b"\xa0\x01z"
    spans = scan_sections(encoded + long_form)
    assert [s.code for s in spans] == [SectionCode.HEADER, SectionCode.DATA, SectionCode.DATA]


def test_every_truncation_is_an_error():
    encoded = encode_sections([(SectionCode.HEADER, [True]), (SectionCode.DATA, b"abcdef")])
    boundary = scan_sections(encoded)[0].end  # a cut here is a whole (header-only) message
    for cut in [c for c in range(1, len(encoded)) if c != boundary]:
        with pytest.raises(TranslationError):
            scan_sections(encoded[:cut])


@pytest.mark.parametrize(
    "encoded, reason",
    [
        (b"\x40", "section expected"),
        (b"\x00\x53\x79\x40", "not a message section"),
        (b"\x00\x53\x77\x1f", "invalid format code"),
        (encode_binary_section(SectionCode.DATA, b"x") + b"\x00\x53\x70\x45", "out of order"),
        (b"\x00\x53\x73\x45\x00\x53\x73\x45", "out of order"),
        (b"\x00\x53\x75\xa0\x05ab", "runs past the end"),
    ],
)
def test_malformed_input(encoded, reason):
    with pytest.raises(TranslationError) as caught:
        scan_sections(encoded)
    assert reason in caught.value.reason


def test_body_only_rejects_other_sections():
    with pytest.raises(TranslationError) as caught:
        scan_sections(b"\x00\x53\x70\x45", body_only=True)
    assert "not a body section" in caught.value.reason


@pytest.mark.parametrize("size", [0, 1, 255, 256, 70000])
def test_encode_binary_section_matches_proton(size):
    payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
    data = Data()
    data.put_object(Described(ulong(0x75), payload))
    ours = encode_binary_section(SectionCode.DATA, payload)
    decoded = Data()
    decoded.decode(ours)
    decoded.next()
    value = decoded.get_object()
    assert bytes(value.value) == payload and value.descriptor == 0x75
    assert len(ours) <= len(bytes(data.encode()))


def test_ends_with_body_names_the_layout_a_prefix_decides():
    def layout(*codes):
        spans = scan_sections(encode_sections([(c, b"" if c is SectionCode.DATA else {})
                                               for c in codes]))
        return ends_with_body(spans, [s for s in spans if s.code in BODY_CODES])

    assert layout(SectionCode.APPLICATION_PROPERTIES, SectionCode.DATA, SectionCode.DATA)
    assert not layout(SectionCode.MESSAGE_ANNOTATIONS, SectionCode.DATA)
    assert not layout(SectionCode.DATA, SectionCode.FOOTER)
    assert not layout(SectionCode.APPLICATION_PROPERTIES)
