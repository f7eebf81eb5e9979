"""The ledger's encodings: a frame for the writer process gives back the very JSON Lines
the gateway would have written itself."""
from __future__ import annotations

from gateway.ledger.encoding import LINES, PACKED, FrameReader, frame, frame_count, json_lines
from gateway.ledger.row_shapes import STRUCTS

RECORDS = [
    STRUCTS["c"](1_700_000_000.123456, 7, "gw", "/", "guest", "1.0", "conn-1", "link", None),
    STRUCTS["m"](1_700_000_000.1 + 1e-7, 7, 1 << 61, "", "q", "ünïcode\n\"id\"", None, 100,
                 "routed", ("q",), None, None, {"h": "v"}, None, None, None, ("q",)),
    STRUCTS["d"](0.1 + 0.2, 8, 3, "q", 0, 1e-300),
    STRUCTS["s"](1.5, 8, 3, "q", 2, -0.0, "accepted", None),
]


def test_a_frame_reads_back_as_the_lines_of_its_records() -> None:
    data = frame(RECORDS)
    assert json_lines(RECORDS).startswith(b'["c",1700000000.123456,7,"gw",')
    assert data[8] == PACKED and frame_count(data) == len(RECORDS)
    reader = FrameReader()
    assert reader.feed(data) == [json_lines(RECORDS)]
    assert reader.partial == 0 and reader.error is None


def test_frames_cut_anywhere_are_put_back_together() -> None:
    data = frame(RECORDS[:2]) + frame(RECORDS[2:]) + frame([])
    for cut in range(len(data) + 1):
        reader = FrameReader()
        lines = reader.feed(data[:cut]) + reader.feed(data[cut:])
        assert b"".join(lines) == json_lines(RECORDS), cut


def test_a_value_msgpack_cannot_hold_is_shipped_as_lines() -> None:
    records = [STRUCTS["e"](1.0, 1, "gap", count=1 << 70)]
    data = frame(records)
    assert data[8] == LINES and frame_count(data) == 1
    assert FrameReader().feed(data) == [json_lines(records)]


def test_a_corrupt_stream_sets_an_error_and_keeps_the_frames_before() -> None:
    reader = FrameReader()
    assert reader.feed(frame(RECORDS) + b"\0\0\0\2\0\0\0\1\x09xx" + frame(RECORDS)) \
        == [json_lines(RECORDS)]
    assert "kind 9" in str(reader.error)
    assert reader.feed(frame(RECORDS)) == []
