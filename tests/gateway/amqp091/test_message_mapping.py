"""message_mapping: the properties a 0-9-1 consumer gets for a 1.0 message, rendered once
per distinct sections-before-the-body and then reused."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from proton import Message, symbol

from gateway.amqp091 import message_mapping
from gateway.amqp091.content import encode_properties
from tests.support.amqp_message_strategies import (amqp10_sections, bodies, encode_sections, outcome,
                                                   with_other_body)
from tests.support.example_counts import examples
from translators import inspect_amqp10, to_amqp091


def _uncached(encoded: bytes) -> tuple[bytes, bytes]:
    props, body = to_amqp091(encoded)
    return encode_properties(props), body


def _as_received(encoded: bytes) -> object:
    """Rendered as a message taken in on a 1.0 link is: with its summary's ``body_at``."""
    summary = outcome(inspect_amqp10, encoded)
    body_at = summary.body_at if isinstance(summary, tuple) else None
    return outcome(message_mapping._render_amqp10, encoded, body_at)


@settings(max_examples=examples(300), deadline=None)
@given(amqp10_sections(), bodies)
def test_rendering_with_the_cache_is_rendering_without_it(sections, other_body):
    encoded = encode_sections(sections)
    expected = outcome(_uncached, encoded)
    assert outcome(message_mapping._render_amqp10, encoded) == expected
    # the second time from the cache, then as received (no scan on a hit)
    assert outcome(message_mapping._render_amqp10, encoded) == expected
    assert _as_received(encoded) == expected
    # the same sections before the body, another body (labelled or not): its own result
    sibling = with_other_body(sections, other_body)
    assert _as_received(sibling) == outcome(_uncached, sibling)
    assert outcome(message_mapping._render_amqp10, sibling) == outcome(_uncached, sibling)


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


def test_a_forwarded_message_carries_the_forwarding_annotations_as_headers():
    from gateway.amqp091.content import decode_properties
    from gateway.broker.message import Encoding, MessageContainer
    from translators.basic_properties import BasicProperties

    annotations = {symbol("x-opt-origin-container"): "org-a", "x-opt-hops": ["org-a"], "x-k": 7}
    raw = encode_properties(BasicProperties(content_type="text/plain", headers={"app": "v", "x-k": 1}))
    from_091 = MessageContainer(Encoding.AMQP091, (raw, b"body"), "", "orders@org-b")
    props_bytes, body = message_mapping.forwarded_payload(from_091, annotations)
    props = decode_properties(props_bytes)
    assert body == b"body" and props.content_type == "text/plain"
    assert props.headers == {"app": "v", "x-k": 1, "x-opt-origin-container": "org-a", "x-opt-hops": ["org-a"]}
    assert message_mapping.forwarded_payload(from_091, {}) == (raw, b"body")   # sent as published
    # a 1.0 message: what a 0-9-1 consumer of ours gets, plus the headers
    encoded = bytes(Message(body=b"x", inferred=True, id="m-1", properties={"p": 2}).encode())
    from_10 = MessageContainer(Encoding.AMQP10, encoded)
    expected_props, expected_body = _uncached(encoded)
    props_bytes, body = message_mapping.forwarded_payload(from_10, annotations)
    props = decode_properties(props_bytes)
    assert body == expected_body and props.message_id == "m-1"
    assert props.headers == {**decode_properties(expected_props).headers, "x-opt-origin-container": "org-a",
                             "x-opt-hops": ["org-a"], "x-k": 7}


def test_a_forwarded_message_renders_from_its_annotations_decoded_at_receipt() -> None:
    """``received_annotations`` (decoded by ``amqp$transfer``) spare the decoding of every
    section on each render (issue 45): the properties and body are those of a full
    translation, for messages whose annotations differ every time."""
    from gateway.broker.message import Encoding, MessageContainer
    from gateway.forward.annotations import annotations_section
    from translators import to_amqp10
    from translators.forwarded_form import forwarded_form
    from translators.basic_properties import BasicProperties

    sources = [to_amqp10(BasicProperties(delivery_mode=2), b"x" * 100, exchange="", routing_key="q@b"),
               to_amqp10(BasicProperties(delivery_mode=2, headers={"a": 1}, message_id="m"), b"y",
                         exchange="e", routing_key="k")]
    message = Message(body=b"z" * 50, address="q@b", properties={"p": 1})
    message.annotations = {"x-opt-a": 1}
    message.inferred = True
    sources.append(message.encode())
    for n in range(3):
        for i, source in enumerate(sources):
            encoded = forwarded_form(source, "q@b", {"x-opt-forward-origin": "a",
                                                     "x-opt-forward-id": 10 * n + i,
                                                     "x-opt-forward-hops": ["a"]})
            plain = MessageContainer(Encoding.AMQP10, encoded)
            received = MessageContainer(Encoding.AMQP10, encoded,
                                        received_annotations=annotations_section(encoded))
            assert message_mapping.delivery_payload(received) == message_mapping.delivery_payload(plain)
            assert b"x-opt-forward-id" in message_mapping.delivery_payload(received)[0]


def test_a_forwarded_message_taken_in_renders_as_in_full_translation() -> None:
    """As ``amqp$transfer`` takes a forwarded message in (``container_from_transfer``,
    the annotations decoded once): only the annotations header
    is encoded per message (``HeaderSlot``), the first and the later messages of a
    sender alike, and the result is the full translation's; annotations that go back
    into 0-9-1 properties (``x-amqp-0-9-1-*``) still translate in full."""
    from gateway.amqp10.payloads import container_from_transfer
    from gateway.broker.message import Encoding, MessageContainer
    from gateway.forward.annotations import annotations_section
    from translators import to_amqp10
    from translators.forwarded_form import forwarded_form
    from translators.basic_properties import BasicProperties

    message_mapping._RENDERED_BASE.clear()
    sources = [to_amqp10(BasicProperties(delivery_mode=2, headers={"a": 1, "z": "last"},
                                         content_type="text/plain", priority=3),
                         b"x" * 4096, exchange="", routing_key="q@b")]
    proton_message = Message(body=b"z" * 50, address="q@b", properties={"p": 1})
    proton_message.annotations = {"x-opt-a": 1}
    proton_message.inferred = True
    sources.append(proton_message.encode())
    extras = ({}, {"x-opt-more": ["x", 2]}, {"x-amqp-0-9-1-priority": 9})
    for n in range(3):
        for i, source in enumerate(sources):
            for extra in extras:
                annotations = {"x-opt-forward-origin": "a", "x-opt-forward-id": 100 * n + i,
                               "x-opt-forward-hops": ["a", "c"], **extra}
                encoded = forwarded_form(source, "q@b", annotations)
                taken, _ = container_from_transfer(encoded, 0.0)
                taken.received_annotations = annotations_section(encoded)
                plain = MessageContainer(Encoding.AMQP10, encoded)
                assert message_mapping.delivery_payload(taken) == message_mapping.delivery_payload(plain)
                assert message_mapping.delivery_payload(taken) == _uncached(encoded)


def test_a_forwarded_stream_renders_from_the_slot_of_its_first_message(monkeypatch) -> None:
    """Messages read from a link's ``ForwardedPrefix`` (the same sections but for the
    gateway id) render as in full translation; after the first of a slot, the properties
    are that render with the id put in: no annotations header is made again (issue 45).
    A stream whose annotations go back into 0-9-1 properties renders in full each time."""
    from gateway.amqp10.payloads import container_from_summary
    from gateway.forward import annotations as fa
    from translators import to_amqp10
    from translators.amqp10_sections import inspect_amqp10
    from translators.forwarded_form import forwarded_form
    from translators.basic_properties import BasicProperties

    first = 1_750_000_000_000_000_000
    source = to_amqp10(BasicProperties(delivery_mode=2, headers={"a": 1}, priority=3), b"x" * 300,
                       exchange="", routing_key="q@b")
    real = message_mapping.annotations_header
    for extra, kept in (({}, True), ({"x-amqp-0-9-1-priority": 9}, False)):
        prefix = fa.ForwardedPrefix()
        made = []
        monkeypatch.setattr(message_mapping, "annotations_header",
                            lambda annotations: made.append(1) or real(annotations))
        for gid in (first, first + 1, -first, first + 1000):
            encoded = forwarded_form(source, "q@b", {**fa.forward_annotations("a", gid, None), **extra})
            read = prefix.read(encoded)
            if read is None:
                summary = inspect_amqp10(encoded)
                read = summary, prefix.learn(encoded, summary, fa.annotations_section(encoded))
            taken = container_from_summary(encoded, read[0], 0.0)
            taken.received_annotations = read[1]
            assert read[1].slot is not None
            assert message_mapping.delivery_payload(taken) == _uncached(encoded)
        assert len(made) == (2 if kept else 4)  # kept: the first, and its check


_ANNOTATION_VALUES = st.one_of(st.text(max_size=8), st.lists(st.text(max_size=8), max_size=3),
                               st.integers(-3, 3), st.booleans(), st.none())


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["org-a", "org-b"]),
                          st.integers(-(1 << 63), (1 << 63) - 1) | st.integers(-300, 300) | st.text(max_size=3),
                          st.lists(st.sampled_from(["org-a", "org-b", "c"]), max_size=3),
                          st.dictionaries(st.sampled_from(["x-a", "x-b"]), _ANNOTATION_VALUES, max_size=2)),
                min_size=1, max_size=8))
def test_forwarded_headers_are_the_annotations_encoded_whatever_came_before(stream) -> None:
    """``ForwardedHeaders`` keeps the table with the gateway id in a slot (issue 45): for a
    stream of annotations, each table is ``encode_table`` of them, whether only the id
    changed, other values or their order changed, or a value that an equal one of
    another type would encode apart (``1`` and ``True``) came in."""
    from gateway.amqp091.values import encode_table
    from gateway.forward.annotations import GATEWAY_ID, HOPS, ORIGIN

    headers = message_mapping.ForwardedHeaders()
    for origin, gateway_id, hops, extra in stream:
        annotations = {ORIGIN: origin, GATEWAY_ID: gateway_id, HOPS: hops, **extra}
        assert outcome(lambda: headers.table(annotations)[0]) == outcome(encode_table, annotations)
        reordered = {HOPS: hops, **extra, GATEWAY_ID: gateway_id, ORIGIN: origin}
        assert outcome(lambda: headers.table(reordered)[0]) == outcome(encode_table, reordered)


@settings(max_examples=examples(200), deadline=None)
@given(st.dictionaries(st.sampled_from(["app", "x-opt-forward-id", "x-opt-forward-originx", "k"]),
                       _ANNOTATION_VALUES, max_size=3) | st.none(),
       st.sampled_from(["", "text/plain"]), st.integers(0, 1 << 62))
def test_forwarded_properties_are_the_merge_of_annotations_and_own_headers(own, content_type, gateway_id):
    """``ForwardedHeaders.properties`` splices the annotations' table in (before the
    message's own headers, if it has any): the headers are those of the merge, the
    message's own values winning, and the other properties are kept."""
    from gateway.amqp091.content import decode_properties
    from gateway.forward.annotations import GATEWAY_ID, HOPS, ORIGIN
    from translators.basic_properties import BasicProperties

    raw = encode_properties(BasicProperties(content_type=content_type or None, delivery_mode=2, headers=own))
    annotations = {ORIGIN: "org-a", GATEWAY_ID: gateway_id, HOPS: ["org-a"]}
    props = decode_properties(message_mapping.ForwardedHeaders().properties(raw, annotations))
    assert props.headers == {**annotations, **(own or {})}
    assert list(props.headers) == list({**annotations, **(own or {})})
    assert (props.content_type, props.delivery_mode) == (content_type or None, 2)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(st.sampled_from([None, {"app": 1}, {"x-opt-forward-id": "own"}, {"k": -7}]),
                          st.sampled_from(["", "text/plain"]), st.sampled_from(["org-a", "org-b"]),
                          st.integers(-(1 << 63), (1 << 63) - 1) | st.integers(-300, 300) | st.text(max_size=2)),
                min_size=1, max_size=10))
def test_a_stream_of_property_lists_gets_what_each_would_get_alone(stream) -> None:
    """``ForwardedHeaders.properties`` keeps a slot per property list (issue 45): through
    a stream of lists, origins and ids, each result is what a new ``ForwardedHeaders``
    makes of that message alone."""
    from gateway.forward.annotations import GATEWAY_ID, HOPS, ORIGIN
    from translators.basic_properties import BasicProperties

    headers = message_mapping.ForwardedHeaders()
    for own, content_type, origin, gateway_id in stream:
        raw = encode_properties(BasicProperties(content_type=content_type or None, delivery_mode=2, headers=own))
        annotations = {ORIGIN: origin, GATEWAY_ID: gateway_id, HOPS: [origin]}
        assert outcome(headers.properties, raw, annotations) == \
            outcome(message_mapping.ForwardedHeaders().properties, raw, annotations)


def test_forwarded_headers_encode_a_stream_of_ids_from_one_slot() -> None:
    from gateway.amqp091.values import encode_table
    from gateway.forward.annotations import GATEWAY_ID, HOPS, ORIGIN

    headers = message_mapping.ForwardedHeaders()
    for gateway_id in (1, 2, 1 << 40, -5):
        annotations = {ORIGIN: "org-a", GATEWAY_ID: gateway_id, HOPS: ["org-a"]}
        assert headers.table(annotations)[0] == encode_table(annotations)
    slot = headers._slot
    assert slot is not None
    headers.table({ORIGIN: "org-a", GATEWAY_ID: 9, HOPS: ["org-a"]})
    assert headers._slot is slot                     # the same origin and hops: no learning
    hops = ["org-a", "org-c"]
    assert headers.table({ORIGIN: "org-c", GATEWAY_ID: 9, HOPS: hops})[0] == \
        encode_table({ORIGIN: "org-c", GATEWAY_ID: 9, HOPS: hops})
    assert headers._slot is not slot
    hops.append("org-d")                             # the caller's list changed: not the learnt one
    assert headers.table({ORIGIN: "org-c", GATEWAY_ID: 9, HOPS: hops})[0] == \
        encode_table({ORIGIN: "org-c", GATEWAY_ID: 9, HOPS: hops})


def test_origins_that_take_turns_cost_one_splice_a_message(monkeypatch) -> None:
    """A hub forwarding two origins' messages in turn relearns the table's slot each time;
    it learns no property-list slot then (that was two more splices a message, forgotten
    at the next relearning), and the result is as before."""
    from gateway.forward.annotations import GATEWAY_ID, HOPS, ORIGIN
    from translators.basic_properties import BasicProperties

    splices = []
    real = message_mapping.with_headers_first
    monkeypatch.setattr(message_mapping, "with_headers_first",
                        lambda *args: splices.append(1) or real(*args))
    headers = message_mapping.ForwardedHeaders()
    raw = encode_properties(BasicProperties(delivery_mode=2))
    for i in range(100):
        origin = ("org-a", "org-c")[i % 2]
        annotations = {ORIGIN: origin, GATEWAY_ID: 1000 + i, HOPS: [origin]}
        assert headers.properties(raw, annotations) == \
            message_mapping.ForwardedHeaders().properties(raw, annotations)
    ours = len(splices) - 100   # (less the fresh ``ForwardedHeaders`` of each comparison: one each)
    assert ours <= 100, ours    # (the old code: 500)
