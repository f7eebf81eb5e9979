"""with_delivery_header keeps every octet but the header's; delivery_header gives the
same header in two parts, or none when the message already says it."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from proton import Data, Described, Message, symbol, uint

from tests.support.amqp_message_strategies import amqp10_sections, encode_sections
from tests.support.example_counts import examples
from translators import TranslationError, decode_sections, with_delivery_header
from translators.delivery_header import delivered_before, delivery_header
from translators.section_scan import SectionCode, scan_sections


@settings(max_examples=examples(300), deadline=None)
@given(amqp10_sections(), st.integers(0, 2**32 - 1), st.booleans())
def test_with_delivery_header_keeps_everything_else(sections, count, first):
    encoded = encode_sections(sections)
    rewritten = with_delivery_header(encoded, delivery_count=count, first_acquirer=first)
    new_spans = scan_sections(rewritten)
    old_spans = scan_sections(encoded)
    assert new_spans[0].code is SectionCode.HEADER
    old_rest = encoded[old_spans[0].end:] if old_spans and old_spans[0].code is SectionCode.HEADER else encoded
    assert rewritten[new_spans[0].end:] == old_rest
    header = decode_sections(rewritten)[0][1]
    original = dict(sections).get(SectionCode.HEADER, [])
    original = (list(original) + [None] * 5)[:3]
    assert header[:3] == original and [type(v) for v in header[:3]] == [type(v) for v in original]
    assert header[3] is first and header[4] == count and type(header[4]) is uint
    # proton's full decoder agrees on everything after the header.
    assert decode_sections(rewritten)[1:] == decode_sections(old_rest)


def _header_says(encoded: bytes) -> tuple:
    """first-acquirer and delivery-count as a receiver reads them (absent: false, 0)."""
    message = Message()
    message.decode(encoded)
    return message.first_acquirer, message.delivery_count


@settings(max_examples=examples(300), deadline=None)
@given(amqp10_sections(), st.sampled_from([0, 0, 1, 7, 2**32 - 1]), st.booleans(),
       st.sampled_from([[], [None], [True, None, None], [None, None, None, True, uint(0)],
                        [None, None, None, False], [False, None, None, None, uint(3)]]))
def test_delivery_header_is_with_delivery_header_in_two_parts(sections, count, first, header):
    """``header + encoded[rest:]`` says what ``with_delivery_header`` says and keeps the
    rest; ``(b"", 0)`` only when the message already says it. Asked twice (the second
    answer comes from the cache of headers), it answers the same."""
    if header:
        sections = [(c, v) for c, v in sections if c is not SectionCode.HEADER]
        sections.insert(0, (SectionCode.HEADER, header))
    encoded = encode_sections(sections)
    whole = with_delivery_header(encoded, delivery_count=count, first_acquirer=first)
    for _ in range(2):
        new, rest = delivery_header(encoded, delivery_count=count, first_acquirer=first)
        sent = new + encoded[rest:]
        if new:
            assert sent == whole
        else:
            assert rest == 0 and sent == encoded
        assert ([s for s in decode_sections(sent) if s[0] is not SectionCode.HEADER]
                == [s for s in decode_sections(encoded) if s[0] is not SectionCode.HEADER])
        assert _header_says(sent) == _header_says(whole) == (first, count)


def test_delivery_header_sends_a_message_that_already_says_it_unchanged():
    plain = encode_sections([(SectionCode.DATA, b"x")])
    assert delivery_header(plain, delivery_count=0, first_acquirer=False) == (b"", 0)
    first = with_delivery_header(plain, delivery_count=0, first_acquirer=True)
    assert delivery_header(first, delivery_count=0, first_acquirer=True) == (b"", 0)
    new, rest = delivery_header(plain, delivery_count=0, first_acquirer=True)
    assert (new + plain[rest:], rest) == (first, 0)
    new, rest = delivery_header(first, delivery_count=2, first_acquirer=False)
    assert rest == len(first) - len(plain) and _header_says(new + first[rest:]) == (False, 2)


def test_delivery_header_rejects_a_bad_count_and_a_broken_header():
    with pytest.raises(TranslationError):
        delivery_header(b"\x00\x53\x75\xa0\x00", delivery_count=-1, first_acquirer=True)
    with pytest.raises(TranslationError):  # a list8 header whose element runs past its end
        delivery_header(b"\x00\x53\x70\xc0\x02\x01\xa1\x00\x53\x75\xa0\x00",
                                        delivery_count=0, first_acquirer=True)


def test_with_delivery_header_on_proton_message_and_twice():
    message = Message(body="x", durable=True, priority=9)
    encoded = bytes(message.encode())
    once = with_delivery_header(encoded, delivery_count=1, first_acquirer=True)
    twice = with_delivery_header(once, delivery_count=300, first_acquirer=False)
    decoded = Message()
    decoded.decode(twice)
    assert (decoded.durable, decoded.priority, decoded.delivery_count, decoded.first_acquirer) == (True, 9, 300, False)
    assert decoded.body == "x"


def test_with_delivery_header_symbolic_descriptor():
    data = Data()
    data.put_object(Described(symbol("amqp:header:list"), [True]))
    data.put_object(Described(symbol("amqp:amqp-value:*"), "v"))
    encoded = bytes(data.encode())
    rewritten = with_delivery_header(encoded, delivery_count=2, first_acquirer=True)
    assert [c for c, _ in decode_sections(rewritten)] == [SectionCode.HEADER, SectionCode.AMQP_VALUE]
    assert decode_sections(rewritten)[0][1] == [True, None, None, True, 2]


def test_with_delivery_header_rejects_bad_count():
    with pytest.raises(TranslationError) as caught:
        with_delivery_header(b"", delivery_count=-1, first_acquirer=False)
    assert caught.value.field == "delivery-count"


def test_delivered_before_reads_the_count_and_a_first_acquirer_written_false():
    plain = encode_sections([(SectionCode.DATA, b"x")])
    assert not delivered_before(plain)   # no header: a sender's message
    assert not delivered_before(bytes(Message(body="x", durable=True).encode()))   # fields left out
    assert not delivered_before(with_delivery_header(plain, delivery_count=0, first_acquirer=True))
    assert delivered_before(with_delivery_header(plain, delivery_count=0, first_acquirer=False))
    assert delivered_before(with_delivery_header(plain, delivery_count=3, first_acquirer=True))
