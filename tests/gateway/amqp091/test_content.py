"""Property flag codec and the content assembler's ordering and size rules."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from pamqp import commands as pamqp_commands
from pamqp import header as pamqp_header

from gateway.amqp091 import methods as m
from gateway.amqp091.content import (Content, ContentAssembler, decode_properties, encode_properties,
                                     header_slot)
from gateway.amqp091.errors import ChannelException, ConnectionException
from gateway.amqp091.frames import BodyFrame, HeaderFrame, HeartbeatFrame, MethodFrame
from gateway.amqp091.spec import PROPERTY_DOMAINS, ReplyCode
from tests.support.amqp091_strategies import basic_properties
from tests.support.example_counts import examples
from translators.basic_properties import PROPERTY_NAMES, BasicProperties
from translators.field_types import Int8

ALL = BasicProperties(
    content_type="text/plain", content_encoding="gzip", headers={"a": 1, "b": Int8(-1), "n": [None]},
    delivery_mode=2, priority=9, correlation_id="c", reply_to="r", expiration="60000", message_id="m",
    timestamp=1_700_000_000, type="t", user_id="u", app_id="app", cluster_id="cl",
)


def test_property_table_matches_basic_properties() -> None:
    assert tuple(name for name, _ in PROPERTY_DOMAINS) == PROPERTY_NAMES


def test_all_fourteen_properties_round_trip() -> None:
    raw = encode_properties(ALL)
    assert raw[:2] == struct.pack(">H", 0xFFFC)
    assert decode_properties(raw) == ALL


@pytest.mark.parametrize("name", PROPERTY_NAMES)
def test_each_single_property_sets_its_own_flag(name) -> None:
    props = BasicProperties(**{name: getattr(ALL, name)})
    raw = encode_properties(props)
    (flags,) = struct.unpack_from(">H", raw)
    assert flags == 1 << (15 - PROPERTY_NAMES.index(name))
    assert decode_properties(raw) == props


@given(basic_properties)
def test_any_subset_round_trips(props) -> None:
    assert decode_properties(encode_properties(props)) == props


def test_empty_properties() -> None:
    assert encode_properties(BasicProperties()) == b"\x00\x00"
    assert decode_properties(b"\x00\x00") == BasicProperties()


def test_property_lists_without_headers_are_decoded_once_and_shared() -> None:
    raw = encode_properties(BasicProperties(content_type="text/plain", delivery_mode=2,
                                            message_id="fixed"))
    first = decode_properties(raw)
    assert decode_properties(bytes(bytearray(raw))) is first  # equal bytes, another object
    assert first == BasicProperties(content_type="text/plain", delivery_mode=2, message_id="fixed")


def test_property_lists_with_headers_give_each_message_its_own_headers() -> None:
    raw = encode_properties(BasicProperties(headers={"k": "v"}, delivery_mode=1))
    one, two = decode_properties(raw), decode_properties(raw)
    assert one == two and one is not two and one.headers is not two.headers
    one.headers["k"] = "changed"
    assert two.headers == {"k": "v"}


def test_the_shared_property_lists_are_bounded() -> None:
    from gateway.amqp091 import content

    for i in range(content.SHARED_MAX * 3):
        raw = encode_properties(BasicProperties(message_id=f"id-{i}"))
        assert decode_properties(raw).message_id == f"id-{i}"
        assert len(content._SHARED) <= content.SHARED_MAX


def test_matches_pamqp_header() -> None:
    pamqp_props = pamqp_commands.Basic.Properties(
        content_type="text/plain", delivery_mode=2, priority=9, message_id="m", app_id="app",
        headers={"a": "b"})
    theirs = pamqp_header.ContentHeader(0, 5, pamqp_props).marshal()
    ours = encode_properties(BasicProperties(content_type="text/plain", delivery_mode=2, priority=9,
                                             message_id="m", app_id="app", headers={"a": "b"}))
    assert theirs[12:] == ours


def test_empty_continuation_word_is_accepted() -> None:
    assert decode_properties(b"\x80\x01\x00\x00\x01x") == BasicProperties(content_type="x")


@pytest.mark.parametrize("raw", [
    b"",  # no flags
    b"\x80\x00",  # content-type flagged but missing
    b"\x00\x02",  # fifteenth property
    b"\x00\x01\x80\x00",  # a property in the continuation word
    b"\x00\x01",  # continuation word missing
    b"\x00\x00extra",  # trailing octets
    b"\x10\x00",  # delivery-mode missing
    b"\x00\x40\x00\x00",  # timestamp truncated
])
def test_malformed_properties_are_502(raw) -> None:
    with pytest.raises(ConnectionException) as info:
        decode_properties(raw)
    assert info.value.code is ReplyCode.SYNTAX_ERROR


# ---- assembler ---------------------------------------------------------------------------

PUBLISH = m.BasicPublish(exchange="", routing_key="q")
PROPS = encode_properties(BasicProperties(content_type="text/plain"))


def header(size: int, class_id: int = 60, weight: int = 0) -> HeaderFrame:
    return HeaderFrame(1, class_id, weight, size, PROPS)


def test_method_header_bodies_make_one_content() -> None:
    asm = ContentAssembler(1000)
    assert asm.accept(MethodFrame(1, PUBLISH)) is None
    assert asm.busy
    assert asm.accept(header(5)) is None
    assert asm.accept(BodyFrame(1, b"he")) is None
    assert asm.accept(BodyFrame(1, b"")) is None  # empty body frames are dropped
    method, content = asm.accept(BodyFrame(1, b"llo"))
    assert method == PUBLISH
    assert content == Content(BasicProperties(content_type="text/plain"), PROPS, b"hello")
    assert not asm.busy


def test_zero_body_size_completes_at_the_header() -> None:
    asm = ContentAssembler(1000)
    asm.accept(MethodFrame(1, PUBLISH))
    method, content = asm.accept(header(0))
    assert content.body == b"" and not asm.busy


def test_raw_property_bytes_are_kept() -> None:
    asm = ContentAssembler(1000)
    asm.accept(MethodFrame(1, PUBLISH))
    _, content = asm.accept(header(0))
    assert content.properties_bytes is PROPS


@pytest.mark.parametrize("frame", [HeaderFrame(1, 60, 0, 1, b"\x00\x00"), BodyFrame(1, b"x")])
def test_header_or_body_without_a_method_is_505(frame) -> None:
    with pytest.raises(ConnectionException) as info:
        ContentAssembler(10).accept(frame)
    assert info.value.code is ReplyCode.UNEXPECTED_FRAME


def test_body_before_header_is_505() -> None:
    asm = ContentAssembler(10)
    asm.accept(MethodFrame(1, PUBLISH))
    with pytest.raises(ConnectionException) as info:
        asm.accept(BodyFrame(1, b"x"))
    assert info.value.code is ReplyCode.UNEXPECTED_FRAME
    assert "basic.publish" in info.value.text


@pytest.mark.parametrize("intruder", [
    MethodFrame(1, m.BasicAck(delivery_tag=1)), MethodFrame(1, PUBLISH), HeartbeatFrame(0)])
def test_other_frame_before_completion_is_505(intruder) -> None:
    asm = ContentAssembler(10)
    asm.accept(MethodFrame(1, PUBLISH))
    asm.accept(header(3))
    with pytest.raises(ConnectionException) as info:
        asm.accept(intruder)
    assert info.value.code is ReplyCode.UNEXPECTED_FRAME
    assert (info.value.class_id, info.value.method_id) == (60, 40)


def test_second_header_is_505() -> None:
    asm = ContentAssembler(10)
    asm.accept(MethodFrame(1, PUBLISH))
    asm.accept(header(3))
    with pytest.raises(ConnectionException) as info:
        asm.accept(header(3))
    assert info.value.code is ReplyCode.UNEXPECTED_FRAME


def test_header_class_mismatch_is_501() -> None:
    asm = ContentAssembler(10)
    asm.accept(MethodFrame(1, PUBLISH))
    with pytest.raises(ConnectionException) as info:
        asm.accept(header(3, class_id=50))
    assert info.value.code is ReplyCode.FRAME_ERROR


def test_non_zero_weight_is_501() -> None:
    asm = ContentAssembler(10)
    asm.accept(MethodFrame(1, PUBLISH))
    with pytest.raises(ConnectionException) as info:
        asm.accept(header(3, weight=1))
    assert info.value.code is ReplyCode.FRAME_ERROR


def test_overshooting_body_frame_is_501() -> None:
    asm = ContentAssembler(10)
    asm.accept(MethodFrame(1, PUBLISH))
    asm.accept(header(3))
    with pytest.raises(ConnectionException) as info:
        asm.accept(BodyFrame(1, b"toolong"))
    assert info.value.code is ReplyCode.FRAME_ERROR
    assert "7 octets" in info.value.text


def test_message_over_max_size_is_a_406_channel_error() -> None:
    asm = ContentAssembler(100)
    asm.accept(MethodFrame(1, PUBLISH))
    with pytest.raises(ChannelException) as info:
        asm.accept(header(101))
    assert info.value.code is ReplyCode.PRECONDITION_FAILED
    assert info.value.text == "message size 101 is larger than configured max size 100"
    assert not asm.busy


def test_bad_properties_name_the_method() -> None:
    asm = ContentAssembler(100)
    asm.accept(MethodFrame(1, PUBLISH))
    with pytest.raises(ConnectionException) as info:
        asm.accept(HeaderFrame(1, 60, 0, 0, b"\x80\x00"))
    assert info.value.code is ReplyCode.SYNTAX_ERROR
    assert (info.value.class_id, info.value.method_id) == (60, 40)


@pytest.mark.parametrize("frame, body", [
    (HeaderFrame(1, 60, 0, 5, PROPS), b"hello"),
    (HeaderFrame(1, 60, 0, 0, PROPS), b""),
    (HeaderFrame(1, 50, 0, 3, PROPS), b"abc"),  # class
    (HeaderFrame(1, 60, 1, 3, PROPS), b"abc"),  # weight
    (HeaderFrame(1, 60, 0, 11, PROPS), b"x" * 11),  # size
    (HeaderFrame(1, 60, 0, 0, b"\x80\x00"), b""),  # properties
])
def test_content_of_a_whole_publish_is_checked_as_frame_by_frame(frame, body) -> None:
    """The one-step path (``content_of``) gives the same content, or the same error, as
    the three frames fed one by one."""
    def outcome(run):
        try:
            return run()
        except (ConnectionException, ChannelException) as exc:
            return type(exc), exc.code, exc.text, exc.class_id, exc.method_id

    def by_frames():
        asm = ContentAssembler(10)
        asm.accept(MethodFrame(1, PUBLISH))
        done = asm.accept(frame)
        return done[1] if done is not None else asm.accept(BodyFrame(1, body))[1]

    asm = ContentAssembler(10)
    assert outcome(lambda: asm.content_of(PUBLISH, frame, body)) == outcome(by_frames)
    assert not asm.busy


@given(basic_properties)
def test_with_headers_is_the_encoding_of_the_list_with_those_headers(props) -> None:
    """The splice forwarding uses: the same octets as encoding the whole list again, or
    None when the list has headers of its own (the caller merges)."""
    import dataclasses

    from gateway.amqp091.content import with_headers

    raw = encode_properties(props)
    added = {"x-opt-forward-origin": "org-a", "x-opt-forward-id": 1 << 60, "x-opt-forward-hops": ["org-a"]}
    spliced = with_headers(raw, added)
    if props.headers is not None:
        assert spliced is None
    else:
        assert spliced == encode_properties(dataclasses.replace(props, headers=added))
        assert decode_properties(spliced).headers == added


@given(basic_properties)
def test_with_headers_first_is_the_encoding_of_the_merged_headers(props) -> None:
    """The splice forwarding to a 0-9-1 partner uses (issue 45): the added entries before
    the list's own headers, the same octets as encoding the merge (the list's own values
    winning), or None when one of the added names may be among its own."""
    import dataclasses

    from gateway.amqp091.content import with_headers_first
    from gateway.amqp091.values import encode_shortstr, encode_table

    raw = encode_properties(props)
    added = {"x-opt-forward-origin": "org-a", "x-opt-forward-id": 1 << 60, "x-opt-forward-hops": ["org-a"]}
    names = tuple(encode_shortstr(name) for name in added)
    spliced = with_headers_first(raw, encode_table(added), names)
    merged = {**added, **(props.headers or {})}
    if spliced is None:
        assert any(name in raw for name in names)
    else:
        assert spliced == encode_properties(dataclasses.replace(props, headers=merged))
        assert decode_properties(spliced).headers == merged


@settings(max_examples=examples(50), deadline=None)
@given(basic_properties)
def test_a_header_slot_filled_is_the_list_encoded_with_that_header(props) -> None:
    """``header_slot(props, name).fill(v)`` encodes only ``v`` (issue 45) and gives the
    octets ``encode_properties`` gives with header ``name`` set to ``v``, wherever the
    header is among the others and whatever the size of the new value."""
    import dataclasses
    headers = dict(props.headers or {})
    assert header_slot(dataclasses.replace(props, headers=headers or None), "x-slot") is None
    for place in range(len(headers) + 1):
        items = list(headers.items())
        items.insert(place, ("x-slot", {}))
        shaped = dataclasses.replace(props, headers=dict(items))
        slot = header_slot(shaped, "x-slot")
        assert slot is not None
        for value in ({}, {"origin": "org-a", "id": 2**40, "hops": ["org-a", "org-c"]}, {"k": "v" * 300}):
            filled = dataclasses.replace(shaped, headers={**shaped.headers, "x-slot": value})
            assert slot.fill(value) == encode_properties(filled)
            assert decode_properties(slot.fill(value)) == filled
