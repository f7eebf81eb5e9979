"""Batch frames between the gateway and its ledger writer process."""
from __future__ import annotations

import pickle
import struct

import pytest
from hypothesis import given, strategies as st

from gateway.ledger.batches import BatchKind, BatchReader, FrameError, lines_frame, rows_frame
from gateway.ledger.records import EventKind, Outcome

ROW = (1.5, EventKind.SETTLED, "/", "guest", "0-9-1", "1.0", "7", 3, "", "q", None, "q",
       ("q",), "m1", None, 42, None, None, 100, 0, Outcome.ACCEPTED, None, 1.25, None)


def test_rows_round_trip_with_enums_and_tuples() -> None:
    frames = rows_frame([ROW, ROW]) + rows_frame([])
    assert BatchReader().feed(frames) == [(BatchKind.ROWS, [ROW, ROW]), (BatchKind.ROWS, [])]


def test_plain_rows_are_marshalled_and_others_pickled() -> None:
    plain = ROW[:1] + ("settled",) + ROW[2:20] + ("accepted",) + ROW[21:]
    assert rows_frame([plain])[4] == BatchKind.MARSHALLED_ROWS
    assert rows_frame([ROW])[4] == BatchKind.ROWS  # enum members: pickle
    shared = ("/", "guest", "0-9-1", "c1", 1, None)
    rows = [(1.0, "delivered", shared, ("k",), "q", 0, None, None)] * 3
    [(kind, back)] = BatchReader().feed(rows_frame(rows))
    assert kind is BatchKind.ROWS and back == rows


def test_lines_frame_carries_bytes_and_count() -> None:
    got = BatchReader().feed(lines_frame(b'{"a":1}\n{"a":2}\n', 2))
    assert got == [(BatchKind.LINES, (b'{"a":1}\n{"a":2}\n', 2))]


@given(st.lists(st.integers(min_value=1, max_value=50), min_size=1, max_size=40))
def test_any_chunking_gives_the_same_batches(cuts: list[int]) -> None:
    stream = rows_frame([ROW]) + lines_frame(b"x\n", 1) + rows_frame([ROW] * 3)
    reader, got, offset = BatchReader(), [], 0
    for cut in cuts:
        got += reader.feed(stream[offset:offset + cut])
        offset += cut
    got += reader.feed(stream[offset:])
    assert got == [(BatchKind.ROWS, [ROW]), (BatchKind.LINES, (b"x\n", 1)),
                   (BatchKind.ROWS, [ROW] * 3)]
    assert reader.pending == 0


def test_incomplete_frame_is_held_back() -> None:
    frame = rows_frame([ROW])
    reader = BatchReader()
    assert reader.feed(frame[:-1]) == []
    assert reader.pending == len(frame) - 1
    assert reader.feed(frame[-1:]) == [(BatchKind.ROWS, [ROW])]


@pytest.mark.parametrize("frame, words", [
    (struct.pack(">IB", 0, 1), "length 0"),
    (struct.pack(">IB", 2, 9) + b"x", "unknown batch kind 9"),
    (struct.pack(">IB", 4, 1) + b"abc", "does not unpickle"),
    (struct.pack(">IB", 4, 3) + b"\xff\x00\x01", "does not unmarshal"),
])
def test_corrupt_streams_set_the_error_and_keep_earlier_frames(frame: bytes, words: str) -> None:
    reader = BatchReader()
    assert reader.feed(rows_frame([ROW]) + frame) == [(BatchKind.ROWS, [ROW])]
    assert isinstance(reader.error, FrameError) and words in str(reader.error)
    assert reader.feed(rows_frame([ROW])) == [], "nothing is trusted after a corrupt frame"


def test_unpicklable_rows_raise_for_the_caller_to_fall_back() -> None:
    with pytest.raises((pickle.PicklingError, TypeError, AttributeError)):
        rows_frame([(lambda: None,)])
