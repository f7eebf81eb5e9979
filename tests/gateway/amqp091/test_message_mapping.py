"""message_mapping: the properties a 0-9-1 consumer gets for a 1.0 message, rendered once
per distinct sections-before-the-body and then reused."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from proton import Message, symbol

from gateway.amqp091 import message_mapping
from gateway.amqp091.content import encode_properties
from tests.support.amqp_message_strategies import amqp10_sections, bodies, encode_sections
from translators import TranslationError, to_amqp091
from translators.section_scan import SectionCode as S


def _uncached(encoded: bytes) -> tuple[bytes, bytes]:
    props, body = to_amqp091(encoded)
    return encode_properties(props), body


def _rendered(encoded: bytes) -> object:
    try:
        return message_mapping._render_amqp10(encoded)
    except TranslationError as exc:
        return type(exc)


@settings(max_examples=300, deadline=None)
@given(amqp10_sections(), bodies)
def test_rendering_with_the_cache_is_rendering_without_it(sections, other_body):
    encoded = encode_sections(sections)
    try:
        expected: object = _uncached(encoded)
    except TranslationError as exc:
        expected = type(exc)
    assert _rendered(encoded) == expected
    assert _rendered(encoded) == expected  # the second time from the cache
    # the same sections before the body, another body (labelled or not): its own result
    head = [(code, value) for code, value in sections if code not in (S.DATA, S.AMQP_SEQUENCE,
                                                                      S.AMQP_VALUE, S.FOOTER)]
    sibling = encode_sections(head + list(other_body))
    try:
        expected = _uncached(sibling)
    except TranslationError as exc:
        expected = type(exc)
    assert _rendered(sibling) == expected


def test_a_sender_repeating_its_properties_is_translated_once(monkeypatch):
    calls = []
    real = message_mapping.amqp091_properties
    monkeypatch.setattr(message_mapping, "amqp091_properties",
                        lambda e, *rest: calls.append(e) or real(e, *rest))
    monkeypatch.setattr(message_mapping, "_RENDERED", {})
    first = bytes(Message(body=b"one", inferred=True, content_type="text/plain", properties={"k": 1}).encode())
    second = bytes(Message(body=b"two!", inferred=True, content_type="text/plain", properties={"k": 1}).encode())
    props_one, body_one = message_mapping._render_amqp10(first)
    props_two, body_two = message_mapping._render_amqp10(second)
    assert (body_one, body_two) == (b"one", b"two!") and props_one == props_two
    assert len(calls) == 1
    # another property value: translated again
    third = bytes(Message(body=b"3", inferred=True, content_type="text/plain", properties={"k": 2}).encode())
    assert message_mapping._render_amqp10(third) == _uncached(third) != (props_one, b"3")
    assert len(calls) == 2


def test_the_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(message_mapping, "_RENDERED", {})
    for n in range(message_mapping.RENDERED_MAX + 5):
        encoded = bytes(Message(body=b"x", id=f"m-{n}").encode())
        assert message_mapping._render_amqp10(encoded) == _uncached(encoded)
        assert len(message_mapping._RENDERED) <= message_mapping.RENDERED_MAX


def test_annotated_messages_are_not_cached(monkeypatch):
    monkeypatch.setattr(message_mapping, "_RENDERED", {})
    encoded = bytes(Message(body=b"x", annotations={symbol("x-opt-a"): 1}).encode())
    assert message_mapping._render_amqp10(encoded) == _uncached(encoded)
    assert message_mapping._RENDERED == {}
