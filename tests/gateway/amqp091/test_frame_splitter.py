"""``FrameSplitter``: frames cut out of a stream undecoded, with the reader's checks."""
from __future__ import annotations

import pytest

from gateway.amqp091 import methods as m
from gateway.amqp091.errors import ConnectionException
from gateway.amqp091.frame_splitter import FrameSplitter, split_body_frame
from gateway.amqp091.frames import HEARTBEAT_FRAME, BodyFrame, FrameReader, encode_frame, encode_method_frame


def _stream() -> bytes:
    return (encode_method_frame(1, m.ChannelOpen()) + HEARTBEAT_FRAME + encode_frame(3, 1, b"x" * 1000))


@pytest.mark.parametrize("step", [1, 7, 100, 10_000])
def test_frames_come_whole_and_in_order_however_the_stream_is_cut(step: int) -> None:
    data = _stream()
    splitter = FrameSplitter(4096)
    frames = []
    for i in range(0, len(data), step):
        frames += splitter.feed(data[i:i + step])
    assert [(t, ch) for t, ch, _ in frames] == [(1, 1), (8, 0), (3, 1)]
    assert b"".join(f for _, _, f in frames) == data


def test_the_readers_checks() -> None:
    with pytest.raises(ConnectionException, match="exceeds the negotiated maximum"):
        FrameSplitter(4096).feed(encode_frame(3, 1, b"x" * 5000))
    with pytest.raises(ConnectionException, match="bad frame-end"):
        FrameSplitter().feed(encode_frame(3, 1, b"x")[:-1] + b"\x00")
    with pytest.raises(ConnectionException, match="unknown frame type"):
        FrameSplitter().feed(encode_frame(9, 1, b"x"))


def test_a_large_body_frame_is_split_for_a_smaller_frame_max() -> None:
    frame = encode_frame(3, 5, bytes(range(256)) * 40)   # 10240 octets of body
    parts = split_body_frame(frame, 5, 4096)
    reader = FrameReader(4096)
    bodies = reader.feed(b"".join(parts))
    assert all(type(b) is BodyFrame and b.channel == 5 for b in bodies) and len(bodies) == 3
    assert b"".join(b.payload for b in bodies) == bytes(range(256)) * 40
