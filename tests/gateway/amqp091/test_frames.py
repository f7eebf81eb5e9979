"""FrameReader (whole, byte by byte, trailing bytes, every check in order) and frame encoders."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pamqp import frame as pamqp_frame
from pamqp import heartbeat as pamqp_heartbeat

from gateway.amqp091 import methods as m
from gateway.amqp091.errors import ConnectionException
from gateway.amqp091.frames import (
    HEARTBEAT_FRAME,
    BodyFrame,
    FrameReader,
    HeaderFrame,
    HeartbeatFrame,
    MethodFrame,
    encode_content_frames,
    encode_frame,
    deliver_frame_parts,
    encode_method_frame,
)
from gateway.amqp091.spec import FRAME_MIN_SIZE, ReplyCode
from tests.support.amqp091_strategies import method_instances
from tests.support.frame_builder import ClientFrames

F = ClientFrames()
PUBLISH = m.BasicPublish(exchange="ex", routing_key="rk")
STREAM = (
    F.method(1, PUBLISH)
    + F.header(1, 60, 5, b"\x80\x00\x0atext/plain")
    + F.body(1, b"hel")
    + F.body(1, b"lo")
    + F.heartbeat()
)
EXPECTED = [
    MethodFrame(1, PUBLISH),
    HeaderFrame(1, 60, 0, 5, b"\x80\x00\x0atext/plain"),
    BodyFrame(1, b"hel"),
    BodyFrame(1, b"lo"),
    HeartbeatFrame(0),
]


def test_fed_whole() -> None:
    reader = FrameReader(FRAME_MIN_SIZE)
    assert reader.feed(STREAM) == EXPECTED
    assert reader.buffered == 0


def test_fed_one_byte_at_a_time() -> None:
    reader = FrameReader(FRAME_MIN_SIZE)
    frames = []
    for i in range(len(STREAM)):
        got = reader.feed(STREAM[i : i + 1])
        frames += got
    assert frames == EXPECTED
    assert reader.buffered == 0


def test_returns_nothing_until_a_frame_is_whole() -> None:
    reader = FrameReader(FRAME_MIN_SIZE)
    raw = F.method(1, PUBLISH)
    assert reader.feed(raw[:-1]) == []
    assert reader.feed(raw[-1:]) == [MethodFrame(1, PUBLISH)]


def test_trailing_bytes_are_kept_for_the_next_feed() -> None:
    reader = FrameReader(FRAME_MIN_SIZE)
    second = F.method(2, m.BasicAck(delivery_tag=9))
    assert reader.feed(STREAM + second[:5]) == EXPECTED
    assert reader.buffered == 5
    assert reader.feed(second[5:]) == [MethodFrame(2, m.BasicAck(delivery_tag=9))]


@given(st.lists(method_instances(), min_size=1, max_size=5), st.data())
def test_any_split_of_any_method_stream(methods, data) -> None:
    raw = b"".join(encode_method_frame(i + 1, meth) for i, meth in enumerate(methods))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=4)))
    reader = FrameReader(0)
    frames, start = [], 0
    for cut in cuts + [len(raw)]:
        frames += reader.feed(raw[start:cut])
        start = cut
    assert frames == [MethodFrame(i + 1, meth) for i, meth in enumerate(methods)]


def test_oversize_is_501_before_the_payload_is_buffered() -> None:
    reader = FrameReader(FRAME_MIN_SIZE)
    header = struct.pack(">BHI", 3, 1, FRAME_MIN_SIZE - 7)  # payload + 8 > frame-max
    with pytest.raises(ConnectionException) as info:
        reader.feed(header)  # only the 7-octet header arrived
    assert info.value.code is ReplyCode.FRAME_ERROR
    assert info.value.send_close is True
    assert "exceeds" in info.value.text


def test_largest_allowed_frame_passes() -> None:
    reader = FrameReader(FRAME_MIN_SIZE)
    body = b"x" * (FRAME_MIN_SIZE - 8)
    assert reader.feed(F.body(1, body)) == [BodyFrame(1, body)]


def test_bad_frame_end_is_501_without_close_method() -> None:
    with pytest.raises(ConnectionException) as info:
        FrameReader().feed(F.raw(1, 0, PUBLISH.encode(), end=0x00))
    assert info.value.code is ReplyCode.FRAME_ERROR
    assert info.value.send_close is False
    assert "frame-end" in info.value.text


UNDECODABLE = struct.pack(">HH", 999, 10)  # no class 999: decoding alone would be 503


def test_undecodable_payload_with_a_good_end_is_a_decode_error() -> None:
    with pytest.raises(ConnectionException) as info:
        FrameReader().feed(F.raw(1, 1, UNDECODABLE))
    assert info.value.code is ReplyCode.COMMAND_INVALID and "unknown method 999/10" in info.value.text


def test_frame_end_is_checked_before_the_payload_is_decoded() -> None:
    with pytest.raises(ConnectionException) as info:
        FrameReader().feed(F.raw(1, 1, UNDECODABLE, end=0x00))
    assert info.value.code is ReplyCode.FRAME_ERROR
    assert info.value.send_close is False
    assert "frame-end" in info.value.text


def test_payload_is_not_decoded_before_its_end_octet_arrived() -> None:
    reader = FrameReader()
    frame = F.raw(1, 1, UNDECODABLE, end=0x01)
    assert reader.feed(frame[:-1]) == []  # the whole payload is here: still no 503
    with pytest.raises(ConnectionException) as info:
        reader.feed(frame[-1:])
    assert info.value.code is ReplyCode.FRAME_ERROR and "frame-end octet 0x01" in info.value.text


def test_unknown_frame_type_is_501_without_close_method() -> None:
    with pytest.raises(ConnectionException) as info:
        FrameReader().feed(F.raw(4, 0, b""))  # 4: the 0-9-1 erratum value, undefined
    assert info.value.code is ReplyCode.FRAME_ERROR
    assert info.value.send_close is False
    assert "unknown frame type 4" in info.value.text


def test_checks_run_in_order_size_then_end_then_type() -> None:
    oversize_bad_end = struct.pack(">BHI", 9, 0, 10**6)
    with pytest.raises(ConnectionException) as info:
        FrameReader().feed(oversize_bad_end)
    assert "exceeds" in info.value.text
    with pytest.raises(ConnectionException) as info:
        FrameReader().feed(F.raw(9, 0, b"", end=0x01))
    assert "frame-end" in info.value.text


def test_frames_before_an_error_are_attached_to_it() -> None:
    good = F.method(1, PUBLISH)
    with pytest.raises(ConnectionException) as info:
        FrameReader().feed(good + F.raw(9, 0, b""))
    assert info.value.frames == [MethodFrame(1, PUBLISH)]


def test_short_content_header_is_501() -> None:
    with pytest.raises(ConnectionException) as info:
        FrameReader().feed(F.raw(2, 1, b"\x00\x3c\x00"))
    assert info.value.code is ReplyCode.FRAME_ERROR


def test_frame_max_zero_means_unlimited() -> None:
    big = b"y" * 200_000
    assert FrameReader(0).feed(F.body(1, big)) == [BodyFrame(1, big)]


def test_heartbeat_bytes() -> None:
    assert HEARTBEAT_FRAME == b"\x08\x00\x00\x00\x00\x00\x00\xce"
    assert HEARTBEAT_FRAME == pamqp_frame.marshal(pamqp_heartbeat.Heartbeat(), 0)


def test_method_frame_matches_pamqp() -> None:
    from pamqp import commands

    assert encode_method_frame(3, PUBLISH) == pamqp_frame.marshal(
        commands.Basic.Publish(exchange="ex", routing_key="rk"), 3)


@pytest.mark.parametrize(("size", "frame_max", "pieces"), [
    (0, 4096, []), (10, 4096, [10]), (4088, 4096, [4088]), (4089, 4096, [4088, 1]),
    (10_000, 4096, [4088, 4088, 1824]), (10_000, 0, [10_000]),
])
def test_content_frames_split_at_frame_max(size, frame_max, pieces) -> None:
    body = bytes(range(256)) * (size // 256) + bytes(size % 256)
    raw = encode_content_frames(5, 60, b"\x00\x00", body, frame_max)
    frames = FrameReader(0).feed(raw)
    assert frames[0] == HeaderFrame(5, 60, 0, size, b"\x00\x00")
    assert [len(f.payload) for f in frames[1:]] == pieces
    assert b"".join(f.payload for f in frames[1:]) == body
    assert all(f.channel == 5 for f in frames)


def test_encode_frame_layout() -> None:
    assert encode_frame(3, 258, b"ab") == b"\x03\x01\x02\x00\x00\x00\x02ab\xce"


@given(st.lists(st.binary(max_size=300), min_size=1, max_size=6), st.data())
def test_any_split_of_a_content_stream_as_any_buffer_type(bodies, data) -> None:
    """Held-back octets are completed from the next chunk and the rest of that chunk is
    parsed in place: every split, fed as bytes, bytearray or memoryview, gives the frames
    of the whole stream (bodies larger than one chunk included)."""
    raw = b"".join(encode_method_frame(1, PUBLISH) + encode_content_frames(1, 60, b"\x00\x00", body, 0)
                   for body in bodies)
    expected = []
    for body in bodies:
        expected += [MethodFrame(1, PUBLISH), HeaderFrame(1, 60, 0, len(body), b"\x00\x00")]
        expected += [BodyFrame(1, body)] if body else []
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=8)))
    kind = data.draw(st.sampled_from([bytes, bytearray, memoryview]))
    reader = FrameReader(0)
    frames, start = [], 0
    for cut in cuts + [len(raw)]:
        frames += reader.feed(kind(raw[start:cut]))
        start = cut
    assert frames == expected
    assert reader.buffered == 0
    assert all(type(f.payload) is bytes for f in frames if isinstance(f, BodyFrame))


def test_oversize_held_header_completed_by_the_next_chunk_is_501() -> None:
    reader = FrameReader(FRAME_MIN_SIZE)
    first = F.method(1, PUBLISH)
    big = struct.pack(">BHI", 3, 1, FRAME_MIN_SIZE - 7)  # payload + 8 > frame-max
    assert reader.feed(first + big[:3]) == [MethodFrame(1, PUBLISH)]
    with pytest.raises(ConnectionException) as info:
        reader.feed(big[3:] + b"x" * 10)
    assert info.value.code is ReplyCode.FRAME_ERROR
    assert "exceeds" in info.value.text
    assert reader.buffered == 0


_SHORTSTR = st.text(max_size=40)
_DELIVERY_TAG = st.integers(0, 2**63 - 1)  # pamqp's long-long is signed
_EXCHANGE_NAME = st.from_regex(r"[A-Za-z0-9_.:-]{0,40}", fullmatch=True)  # what pamqp takes


@given(channel=st.integers(1, 65535), consumer_tag=_SHORTSTR, exchange=_EXCHANGE_NAME,
       routing_key=_SHORTSTR, tags=st.lists(st.tuples(_DELIVERY_TAG, st.booleans()),
                                            min_size=1, max_size=4))
def test_deliver_frames_match_pamqp(channel, consumer_tag, exchange, routing_key, tags) -> None:
    from pamqp import commands
    for tag, redelivered in tags:  # the first learns the fixed parts, the others reuse them
        expected = pamqp_frame.marshal(commands.Basic.Deliver(
            consumer_tag=consumer_tag, delivery_tag=tag, redelivered=redelivered,
            exchange=exchange, routing_key=routing_key), channel)
        assert b"".join(deliver_frame_parts(channel, consumer_tag, tag, redelivered, exchange,
                                            routing_key)) == expected


def test_deliver_frames_forget_everything_when_full_and_stay_right(monkeypatch) -> None:
    import gateway.amqp091.frames as frames

    monkeypatch.setattr(frames, "DELIVER_KEYS_MAX", 8)
    monkeypatch.setattr(frames, "_DELIVER_FIXED", {})
    for n in range(11):
        key = f"rk-{n}"
        assert b"".join(deliver_frame_parts(1, "c", n, False, "x", key)) == encode_method_frame(
            1, m.BasicDeliver.make("c", n, False, "x", key))
        assert len(frames._DELIVER_FIXED) <= 8
    assert len(frames._DELIVER_FIXED) == 3


def test_deliver_frames_refuse_an_overlong_routing_key_like_the_encoder() -> None:
    with pytest.raises(ValueError, match="routing_key longer than 255 octets"):
        deliver_frame_parts(1, "c", 1, False, "", "k" * 256)
