"""inspect_amqp10 agrees with proton's decoder; with_message_annotations keeps every other octet."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from proton import UNDESCRIBED, Array, Data, Described, Message, symbol, ulong

from tests.support.amqp_message_strategies import (amqp10_sections, bodies, encode_sections, outcome,
                                                   with_other_body)
from tests.support.example_counts import examples
from translators import TranslationError, decode_sections, inspect_amqp10, to_amqp091
from translators import amqp10_sections as sections_module
from translators.amqp10_sections import decode_section, with_message_annotations, with_routing_annotations
from translators.to_amqp091 import plain_body
from translators.section_scan import BODY_CODES, SectionCode, scan_sections


def _field(sections, code, index):
    value = dict(sections).get(code)
    return value[index] if value is not None and index < len(value) else None


@settings(max_examples=examples(300), deadline=None)
@given(amqp10_sections())
def test_inspect_agrees_with_generated_sections(sections):
    summary = inspect_amqp10(encode_sections(sections))
    header, props = SectionCode.HEADER, SectionCode.PROPERTIES
    assert summary.durable is (_field(sections, header, 0) is True)
    assert summary.priority == _field(sections, header, 1)
    assert summary.ttl_ms == _field(sections, header, 2)
    assert summary.first_acquirer is (_field(sections, header, 3) is True)
    assert summary.delivery_count == (_field(sections, header, 4) or 0)
    assert summary.message_id == _field(sections, props, 0)
    assert summary.user_id == _field(sections, props, 1)
    assert summary.to == _field(sections, props, 2)
    assert summary.subject == _field(sections, props, 3)
    assert summary.reply_to == _field(sections, props, 4)
    assert summary.correlation_id == _field(sections, props, 5)
    assert summary.absolute_expiry_time == _field(sections, props, 8)
    assert summary.creation_time == _field(sections, props, 9)
    assert summary.application_properties == dict(sections).get(SectionCode.APPLICATION_PROPERTIES, {})
    body = [(c, v) for c, v in sections if c in (SectionCode.DATA, SectionCode.AMQP_SEQUENCE, SectionCode.AMQP_VALUE)]
    if len(body) == 1 and body[0][0] is SectionCode.DATA:
        assert summary.body_size == len(body[0][1])
    else:
        assert summary.body_size == len(encode_sections(body))


def _uncached_inspect(encoded):
    saved, last = dict(sections_module._SUMMARIES), sections_module._last_plain
    sections_module._SUMMARIES.clear()
    sections_module._last_plain = None
    try:
        return outcome(inspect_amqp10, encoded)
    finally:
        sections_module._SUMMARIES.clear()
        sections_module._SUMMARIES.update(saved)
        sections_module._last_plain = last


@settings(max_examples=examples(300), deadline=None)
@given(amqp10_sections(), bodies)
def test_inspect_with_the_cache_is_inspect_without_it(sections, other_body):
    encoded = encode_sections(sections)
    expected = _uncached_inspect(encoded)
    assert outcome(inspect_amqp10, encoded) == expected
    assert outcome(inspect_amqp10, encoded) == expected  # the second time from the cache
    # the same sections before the body, another body: its own body_size
    sibling = with_other_body(sections, other_body)
    assert outcome(inspect_amqp10, sibling) == _uncached_inspect(sibling)


@settings(max_examples=examples(200), deadline=None)
@given(amqp10_sections(), st.binary(max_size=300), st.sampled_from(["same", "footer", "two data", "value", "short", "long"]))
def test_a_message_after_a_plain_one_with_its_prefix_is_inspected_as_without_it(sections, body, tail):
    """After a plain message (its prefix remembered), a message starting with the same
    prefix is summarised exactly as it would be from scratch, whatever follows the prefix."""
    plain = [(c, v) for c, v in sections if c not in BODY_CODES and c is not SectionCode.FOOTER
             and c is not SectionCode.MESSAGE_ANNOTATIONS] + [(SectionCode.DATA, b"first")]
    inspect_amqp10(encode_sections(plain))  # remembers the prefix
    head = plain[:-1]
    rest = {"same": [(SectionCode.DATA, body)],
            "footer": [(SectionCode.DATA, body), (SectionCode.FOOTER, {symbol("f"): 1})],
            "two data": [(SectionCode.DATA, body), (SectionCode.DATA, b"more")],
            "value": [(SectionCode.AMQP_VALUE, "text")],
            "short": [(SectionCode.DATA, b"")],
            "long": [(SectionCode.DATA, body * 300)]}[tail]
    encoded = encode_sections(head + rest)
    assert outcome(inspect_amqp10, encoded) == _uncached_inspect(encoded)
    inspect_amqp10(encode_sections(plain))
    # proton's Receiver.recv gives a bytearray
    assert outcome(inspect_amqp10, bytearray(encoded)) == _uncached_inspect(encoded)
    if tail == "same" and len(encoded) > 1:  # a truncated message is refused either way
        inspect_amqp10(encode_sections(plain))
        assert outcome(inspect_amqp10, encoded[:-1]) == _uncached_inspect(encoded[:-1])


def test_a_repeated_prefix_is_decoded_once(monkeypatch):
    calls = []
    real = sections_module._summary_fields
    monkeypatch.setattr(sections_module, "_summary_fields",
                        lambda *args: calls.append(1) or real(*args))
    monkeypatch.setattr(sections_module, "_SUMMARIES", {})
    one = inspect_amqp10(bytes(Message(body=b"one", inferred=True, subject="s", properties={"k": 1}).encode()))
    two = inspect_amqp10(bytes(Message(body=b"two!", inferred=True, subject="s", properties={"k": 1}).encode()))
    assert (one.body_size, two.body_size) == (3, 4)
    assert one._replace(body_size=0) == two._replace(body_size=0) and one.subject == "s"
    assert len(calls) == 1
    other = inspect_amqp10(bytes(Message(body=b"3", inferred=True, subject="t").encode()))
    assert other.subject == "t" and other.application_properties == {}
    assert len(calls) == 2


def test_the_summary_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(sections_module, "_SUMMARIES", {})
    for n in range(sections_module.SUMMARIES_MAX + 5):
        summary = inspect_amqp10(bytes(Message(body=b"x", id=f"m-{n}").encode()))
        assert summary.message_id == f"m-{n}"
        assert len(sections_module._SUMMARIES) <= sections_module.SUMMARIES_MAX


def test_inspect_agrees_with_proton_message():
    message = Message(body=b"payload", durable=True, priority=7, ttl=2.5, id="m1", subject="s",
                      address="/queue/q", reply_to="/queue/r", user_id=b"u", creation_time=12.345,
                      properties={"k": "v"})
    message.inferred = True
    encoded = bytes(message.encode())
    summary = inspect_amqp10(encoded)
    decoded = Message()
    decoded.decode(encoded)
    assert (summary.durable, summary.priority, summary.ttl_ms) == (decoded.durable, decoded.priority, 2500)
    assert (summary.message_id, summary.subject, summary.to, summary.reply_to) == (
        decoded.id, decoded.subject, decoded.address, decoded.reply_to)
    assert summary.user_id == bytes(decoded.user_id)
    assert summary.creation_time == 12345
    assert summary.application_properties == decoded.properties
    assert summary.body_size == 7


def test_inspect_rejects_garbage():
    with pytest.raises(TranslationError):
        inspect_amqp10(b"\x00\x53\x73\xc0\x05")


@pytest.mark.parametrize("size", [0, 10, 255, 256, 5000])
def test_data_size_is_the_payload_length_without_copying(size):
    from translators.amqp10_sections import data_payload, data_size
    encoded = encode_sections([(SectionCode.DATA, b"x" * size)])
    span = next(iter(scan_sections(encoded)))
    assert data_size(encoded, span) == len(data_payload(encoded, span)) == size


def test_data_size_rejects_a_non_binary_data_section():
    from translators.amqp10_sections import data_size
    encoded = b"\x00\x53\x75\xa1\x01x"  # data section holding a string
    span = next(iter(scan_sections(encoded)))
    with pytest.raises(TranslationError) as info:
        data_size(encoded, span)
    assert "binary" in str(info.value)


# ------------------------------------------------------------------ with_message_annotations

@settings(max_examples=examples(300), deadline=None)
@given(amqp10_sections(), st.dictionaries(st.text(st.characters(max_codepoint=127), min_size=1, max_size=10),
                                          st.integers(0, 99), min_size=1))
def test_with_message_annotations_rewrites_only_that_section(sections, added):
    encoded = encode_sections(sections)
    merged = with_message_annotations(encoded, added)
    old = [(span.code, encoded[span.start:span.end]) for span in scan_sections(encoded)
           if span.code is not SectionCode.MESSAGE_ANNOTATIONS]
    new_sections = decode_sections(merged)
    spans = scan_sections(merged)
    # every other section keeps its bytes and its place
    assert [(s.code, merged[s.start:s.end]) for s in spans
            if s.code is not SectionCode.MESSAGE_ANNOTATIONS] == old
    [annotations] = [v for c, v in new_sections if c is SectionCode.MESSAGE_ANNOTATIONS]
    expected = dict(dict(sections).get(SectionCode.MESSAGE_ANNOTATIONS) or {})
    expected.update({symbol(k): v for k, v in added.items()})
    assert annotations == expected
    assert all(type(annotations_key) is symbol for annotations_key in annotations if annotations_key in added)


@settings(max_examples=examples(200), deadline=None)
@given(amqp10_sections(), st.dictionaries(st.text(st.characters(max_codepoint=127), min_size=1, max_size=10),
                                          st.one_of(st.integers(-2**40, 2**40), st.text(max_size=20),
                                                    st.lists(st.text(max_size=8), max_size=3)),
                                          min_size=1))
def test_the_spliced_section_is_proton_s_octets(sections, added):
    """The pure-Python encoder writes the section; it must be what proton writes."""
    encoded = encode_sections(sections)
    merged = with_message_annotations(encoded, added)
    [span] = [s for s in scan_sections(merged) if s.code is SectionCode.MESSAGE_ANNOTATIONS]
    value = decode_section(merged, span)
    data = Data()
    data.put_object(Described(ulong(SectionCode.MESSAGE_ANNOTATIONS), value))
    assert merged[span.start:span.end] == bytes(data.encode())


def test_a_value_the_pure_encoder_leaves_to_proton_is_still_spliced():
    encoded = bytes(Message(body="x").encode())
    merged = with_message_annotations(encoded, {"x-opt-array": Array(UNDESCRIBED, Data.INT, 1, 2, 3)})
    [annotations] = [v for c, v in decode_sections(merged) if c is SectionCode.MESSAGE_ANNOTATIONS]
    assert list(annotations[symbol("x-opt-array")].elements) == [1, 2, 3]


def test_with_message_annotations_inserts_after_header_and_delivery_annotations():
    header = encode_sections([(SectionCode.HEADER, [True]),
                              (SectionCode.DELIVERY_ANNOTATIONS, {symbol("x-d"): 1})])
    rest = encode_sections([(SectionCode.PROPERTIES, ["id"]), (SectionCode.DATA, b"body")])
    merged = with_message_annotations(header + rest, {"x-opt-new": "v"})
    assert merged.startswith(header) and merged.endswith(rest)
    assert [c for c, _ in decode_sections(merged)] == [
        SectionCode.HEADER, SectionCode.DELIVERY_ANNOTATIONS, SectionCode.MESSAGE_ANNOTATIONS,
        SectionCode.PROPERTIES, SectionCode.DATA]


@pytest.mark.parametrize("own", [None, {symbol("x-opt-a"): 1, symbol("x-exchange"): "client's"}])
def test_with_routing_annotations_is_the_general_merge_with_fewer_steps(own):
    """RabbitMQ 4's pair: the same octets as ``with_message_annotations`` (after the
    header and delivery-annotations, or merged into the message's own section, where the
    broker's values win), every other section kept."""
    head = [(SectionCode.HEADER, [True]), (SectionCode.DELIVERY_ANNOTATIONS, {symbol("x-d"): 1})]
    own_section = [] if own is None else [(SectionCode.MESSAGE_ANNOTATIONS, own)]
    rest = encode_sections([(SectionCode.PROPERTIES, ["id"]), (SectionCode.DATA, b"body")])
    encoded = encode_sections(head + own_section) + rest
    routed = with_routing_annotations(encoded, "orders", "eu.new")
    assert routed == with_message_annotations(encoded, {"x-exchange": "orders", "x-routing-key": "eu.new"})
    assert routed.endswith(rest)
    annotations = dict(decode_sections(routed))[SectionCode.MESSAGE_ANNOTATIONS]
    assert (annotations["x-exchange"], annotations["x-routing-key"]) == ("orders", "eu.new")
    assert with_routing_annotations(rest, "", "q") == with_message_annotations(
        rest, {"x-exchange": "", "x-routing-key": "q"})


def test_with_routing_annotations_reuses_the_place_only_for_the_same_sections_before_the_body():
    """Issue 43: the place of the last message's annotations is kept with its octets up to
    its body's descriptor; a message with other sections there (its own annotations, no
    header) is scanned anew, and each gets what the general merge gives."""
    header = encode_sections([(SectionCode.HEADER, [True])])
    annotated = encode_sections([(SectionCode.MESSAGE_ANNOTATIONS, {symbol("x-opt-a"): 1})])
    messages = [header + encode_sections([(SectionCode.DATA, b"one")]),
                header + encode_sections([(SectionCode.DATA, b"a longer body")]),
                header + annotated + encode_sections([(SectionCode.DATA, b"one")]),
                encode_sections([(SectionCode.DATA, b"one")]),
                header + encode_sections([(SectionCode.AMQP_VALUE, "v")])]
    for encoded in messages + messages[::-1]:
        assert with_routing_annotations(encoded, "x", "k") == with_message_annotations(
            encoded, {"x-exchange": "x", "x-routing-key": "k"})


def test_with_message_annotations_keeps_several_data_sections_and_the_footer():
    head = encode_sections([(SectionCode.MESSAGE_ANNOTATIONS, {symbol("x-opt-a"): "old"})])
    tail = encode_sections([(SectionCode.DATA, b"one"), (SectionCode.DATA, b"two"),
                            (SectionCode.FOOTER, {symbol("x-f"): "sig"})])
    merged = with_message_annotations(head + tail, {symbol("x-opt-a"): "new", "x-opt-b": b"\x01"})
    assert merged.endswith(tail)
    assert decode_sections(merged)[0] == (SectionCode.MESSAGE_ANNOTATIONS,
                                          {symbol("x-opt-a"): "new", symbol("x-opt-b"): b"\x01"})


def test_with_message_annotations_without_annotations_is_the_same_bytes():
    encoded = bytes(Message(body="x").encode())
    assert with_message_annotations(encoded, {}) is encoded


def test_body_at_names_a_body_a_rendering_can_take_without_scanning():
    plain = bytes(Message(body=b"payload", inferred=True, subject="s").encode())
    at = inspect_amqp10(plain).body_at
    assert at is not None and plain[at:at + 3] == b"\x00\x53\x75"
    assert plain_body(plain, at) == to_amqp091(plain)[1] == b"payload"
    big = bytes(Message(body=b"x" * 300, inferred=True).encode())  # vbin32
    assert plain_body(big, inspect_amqp10(big).body_at) == b"x" * 300
    data = (SectionCode.DATA, b"d")
    for sections in ([(SectionCode.MESSAGE_ANNOTATIONS, {symbol("x-opt-a"): 1}), data],
                     [data, (SectionCode.FOOTER, {symbol("f"): 1})],
                     [data, data],
                     [(SectionCode.AMQP_VALUE, "v")],
                     []):
        assert inspect_amqp10(encode_sections(sections)).body_at is None, sections
    assert inspect_amqp10(encode_sections([data])).body_at == 0  # a body with nothing before


def test_with_to_fills_a_missing_to_and_keeps_every_other_section() -> None:
    from proton import Message as _Message

    from translators.amqp10_sections import with_to
    from translators.section_scan import SectionCode, scan_sections

    m = _Message(body=b"payload", id="m-1", subject="s", properties={"k": 1},
                 annotations={"x-opt-a": "b"})
    m.durable = True
    encoded = m.encode()
    filled = with_to(encoded, "orders@org-b")
    out = _Message()
    out.decode(filled)
    assert (out.address, out.id, out.subject, out.properties, out.annotations, out.durable) == (
        "orders@org-b", "m-1", "s", {"k": 1}, {"x-opt-a": "b"}, True)
    old = {s.code: encoded[s.start:s.end] for s in scan_sections(encoded)}
    new = {s.code: filled[s.start:s.end] for s in scan_sections(filled)}
    for code in (SectionCode.HEADER, SectionCode.MESSAGE_ANNOTATIONS,
                 SectionCode.APPLICATION_PROPERTIES):
        assert new[code] == old[code]
    assert filled.endswith(encoded[[s for s in scan_sections(encoded)][-1].start:])


def test_with_to_inserts_properties_and_leaves_a_present_to_alone() -> None:
    from proton import Message as _Message

    from translators.amqp10_sections import with_to

    bare = _Message(body="x").encode()
    out = _Message()
    out.decode(with_to(bare, "a@b"))
    assert (out.address, out.body) == ("a@b", "x")
    addressed = _Message(body="x", address="q@c").encode()
    assert with_to(addressed, "other@d") is addressed
