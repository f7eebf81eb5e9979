"""LedgerWriter: buffering, flush, rotation by size and age, retention, contexts at the
start of every segment, crash safety."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from gateway.ledger import EventKind, Ledger, LedgerWriter
from tests.support.ledger_files import read_events, segment_lines

T0 = 1_700_000_000.0


def message(gid: int, now: float = T0, size: int = 5) -> SimpleNamespace:
    """What the ledger reads of a broker message."""
    return SimpleNamespace(gateway_id=gid, exchange="", routing_key="q", message_id=f"b-{gid}",
                           correlation_id=None, size=size, headers=None, created_at=now)


class Source:
    """A ledger with one publisher's context: ``lines(gids, now)`` records those messages
    as received and routed, and returns the lines the writer gets."""

    def __init__(self, user: str = "u", ledger: Ledger | None = None) -> None:
        self.ledger = ledger or Ledger(container_id="gw-A")
        self.ctx = self.ledger.context(T0, "/", user, "0-9-1", "c1", 1)

    def lines(self, gids, now: float = T0) -> bytes:
        for gid in gids:
            self.ledger.received(now, self.ctx, message(gid, now), EventKind.ROUTED)
        return self.ledger.take_lines(10 ** 6)


def ids(directory) -> list[str]:
    return [r["gateway_id"] for r in read_events(str(directory)) if r["event"] == "received"]


def names(directory) -> list[str]:
    return sorted(os.listdir(directory))


def writer(tmp_path, **kw) -> LedgerWriter:
    return LedgerWriter(str(tmp_path), container_id=kw.pop("container_id", "gw-A"), **kw)


def test_add_only_buffers_until_flush(tmp_path):
    w = writer(tmp_path)
    w.add(Source().lines([1, 2]))
    assert w.buffered == 3 and names(tmp_path) == []  # the context and two messages
    assert w.flush(T0 + 1) == 3
    assert w.buffered == 0 and w.records_written == 3
    [seg] = names(tmp_path)
    assert seg.endswith(".jsonl.open") and seg.startswith("ledger-gw_A-")
    assert [r["event"] for r in read_events(str(tmp_path))] == ["received", "routed"] * 2


def test_close_renames_the_open_segment(tmp_path):
    w = writer(tmp_path)
    w.add(Source().lines([1]))
    w.flush(T0 + 1)
    w.close(T0 + 2)
    [seg] = names(tmp_path)
    start, end = int(T0 * 1e6) + 1_000_000, int(T0 * 1e6) + 1_000_000
    assert seg == f"ledger-gw_A-{start:016d}-0000-{end:016d}.jsonl"
    assert w.segments_closed == 1


def test_empty_flush_opens_nothing(tmp_path):
    w = writer(tmp_path)
    assert w.flush(T0) == 0
    assert names(tmp_path) == []


def test_rotation_by_size_keeps_lines_whole_and_starts_each_segment_with_its_contexts(tmp_path):
    w = writer(tmp_path, segment_max_bytes=1000)
    source = Source()
    for i in range(60):
        w.add(source.lines([i], T0 + i))
        w.flush(T0 + i + 0.5)
    w.close(T0 + 100)
    segments = segment_lines(str(tmp_path))
    assert len(segments) > 3 and all(name.endswith(".jsonl") for name, _, _ in segments)
    for name, lines, tail in segments[:-1]:
        assert os.path.getsize(tmp_path / name) <= 1000 and tail == b""
    for name, lines, _ in segments:  # each reads on its own: its context comes first
        assert lines[0].startswith(b'["c",') and sum(x.startswith(b'["c",') for x in lines) == 1
    assert ids(tmp_path) == [str(i) for i in range(60)]
    assert {r["user"] for r in read_events(str(tmp_path))} == {"u"}


def test_an_ended_context_is_not_repeated_in_later_segments(tmp_path):
    w = writer(tmp_path, segment_max_bytes=600)
    first = Source("ann")
    second = Source("bob", first.ledger)
    first.ledger.received(T0, first.ctx, message(1), EventKind.ROUTED)
    first.ledger.close_context(T0, first.ctx)
    w.add(second.lines([2]))
    w.flush(T0)
    for gid in range(3, 9):
        w.add(second.lines([gid]))
        w.flush(T0)
    w.close(T0)
    segments = segment_lines(str(tmp_path))
    assert len(segments) >= 2
    for _, lines, _ in segments[1:]:
        contexts = [json.loads(x) for x in lines if x.startswith(b'["c",')]
        assert [c[5] for c in contexts] == ["bob"]  # [tag, ts, ctx, container, vhost, user...]
    assert [r["user"] for r in read_events(str(tmp_path)) if r["event"] == "received"] == \
        ["ann"] + ["bob"] * 7


def test_one_chunk_bigger_than_a_segment_is_written_whole(tmp_path):
    w = writer(tmp_path, segment_max_bytes=100)
    w.add(Source().lines(range(20)))
    w.flush(T0)
    assert len(names(tmp_path)) == 1 and len(ids(tmp_path)) == 20


def test_rotation_by_age_even_without_new_records(tmp_path):
    w = writer(tmp_path, segment_max_age=60)
    source = Source()
    w.add(source.lines([1]))
    w.flush(T0)
    w.flush(T0 + 59)
    assert names(tmp_path)[0].endswith(".open")
    w.flush(T0 + 60)
    assert names(tmp_path)[0].endswith(".jsonl")
    w.add(source.lines([2], T0 + 61))
    w.flush(T0 + 61)
    assert [n.endswith(".open") for n in names(tmp_path)] == [False, True]


def test_retention_by_age_deletes_old_closed_segments(tmp_path):
    w = writer(tmp_path, segment_max_age=10, retention_max_age=100)
    source = Source()
    for i in range(0, 200, 10):
        w.add(source.lines([i], T0 + i))
        w.flush(T0 + i)
    # now = T0+190: closed segments whose last record is older than T0+90 are gone
    assert ids(tmp_path) == [str(i) for i in range(100, 200, 10)]
    assert w.segments_deleted == 10


def test_retention_by_total_size(tmp_path):
    w = writer(tmp_path, segment_max_bytes=500, retention_max_bytes=1500)
    source = Source()
    for i in range(50):
        w.add(source.lines([i], T0 + i))
        w.flush(T0 + i)
    total = sum(os.path.getsize(tmp_path / n) for n in names(tmp_path))
    assert total <= 1500
    kept = ids(tmp_path)
    assert kept == [str(i) for i in range(50 - len(kept), 50)]  # the newest survive


def test_retention_leaves_other_files_alone(tmp_path):
    (tmp_path / "notes.txt").write_text("keep me")
    (tmp_path / "ledger-gw_B-0000000000000001-0000-0000000000000002.jsonl").write_text("{}\n")
    w = writer(tmp_path, segment_max_age=1, retention_max_age=1)
    source = Source()
    for i in range(5):
        w.add(source.lines([i], T0 + 10 * i))
        w.flush(T0 + 10 * i)
    assert "notes.txt" in names(tmp_path)
    assert any("gw_B" in n for n in names(tmp_path))


def test_disabled_writer_touches_nothing(tmp_path):
    target = tmp_path / "ledger"
    w = LedgerWriter(str(target), container_id="gw", enabled=False)
    w.add(Source().lines([1]))
    assert w.buffered == 0 and w.flush(T0) == 0 and w.close(T0) == 0
    assert not target.exists()


def test_bad_settings_are_refused(tmp_path):
    with pytest.raises(ValueError) as info:
        writer(tmp_path, segment_max_bytes=0)
    assert "positive" in str(info.value)
    with pytest.raises(ValueError) as info:
        Ledger(container_id="gw", sample_rate=2.0)
    assert "sample_rate" in str(info.value)


def test_write_error_keeps_lines_and_cuts_the_partial_write(tmp_path, monkeypatch):
    w = writer(tmp_path, max_buffered=4)
    source = Source()
    w.add(source.lines([0]))
    w.flush(T0)
    real_write = os.write

    def failing_write(fd, data):
        real_write(fd, bytes(data[:7]))  # a partial line, then the disk is full
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", failing_write)
    for i in range(1, 6):
        w.add(source.lines([i], T0 + 1))
    assert w.flush(T0 + 1) == 0
    assert w.write_errors == 1 and w.buffered == 4 and w.records_dropped == 1
    monkeypatch.setattr(os, "write", real_write)
    assert w.flush(T0 + 2) == 4
    # the lost message's is the oldest; the next segment starts with the context again
    assert ids(tmp_path) == ["0", "2", "3", "4", "5"]
    assert all(lines[0].startswith(b'["c",') for _, lines, _ in segment_lines(str(tmp_path)))


def test_a_failed_chunk_keeps_itself_and_the_rest(tmp_path, monkeypatch):
    w = writer(tmp_path)
    source = Source()
    real_write = os.write
    writes = []

    def second_write_fails(fd, data):
        writes.append(bytes(data))
        if len(writes) == 2:
            raise OSError(28, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", second_write_fails)
    for chunk in ([0, 1], [2, 3], [4]):
        w.add(source.lines(chunk))
    assert w.flush(T0) == 3  # the context and the first chunk; the second failed, the third waits
    assert [data.count(b"\n") for data in writes] == [3, 2]
    assert w.write_errors == 1 and w.buffered == 3 and w.records_dropped == 0
    monkeypatch.setattr(os, "write", real_write)
    assert w.flush(T0 + 1) == 3
    assert ids(tmp_path) == [str(i) for i in range(5)]


def test_restart_recovers_a_torn_open_segment(tmp_path):
    w = writer(tmp_path)
    source = Source()
    for i in range(3):
        w.add(source.lines([i], T0 + i))
    w.flush(T0 + 3)
    [seg] = names(tmp_path)
    with open(tmp_path / seg, "ab") as f:
        f.write(b'["m",1700000017.5,3,99,"","q"')  # torn by a crash
    w2 = writer(tmp_path)
    [closed] = names(tmp_path)
    # end time: the last record (T0+2), but never before the segment opened (T0+3)
    assert closed.endswith(f"-{int((T0 + 3) * 1e6):016d}.jsonl")
    assert ids(tmp_path) == ["0", "1", "2"]
    w2.add(source.ledger.context_lines() + source.lines([9], T0 + 10))
    w2.close(T0 + 10)
    assert ids(tmp_path) == ["0", "1", "2", "9"]


def test_a_recovered_segment_ends_at_its_last_complete_record(tmp_path):
    w = writer(tmp_path)
    source = Source()
    w.add(source.lines([1], T0 + 5))
    w.flush(T0)
    [seg] = names(tmp_path)
    writer(tmp_path)
    [closed] = names(tmp_path)
    assert closed == seg[:-len(".jsonl.open")] + f"-{int((T0 + 5) * 1e6):016d}.jsonl"


def test_restart_deletes_an_empty_open_segment(tmp_path):
    (tmp_path / "ledger-gw_A-0000000000000005-0000.jsonl.open").write_bytes(b'["c",17')
    writer(tmp_path)
    assert names(tmp_path) == []


CHILD = r"""
import sys, itertools
from types import SimpleNamespace
from gateway.ledger import EventKind, Ledger, LedgerWriter
ledger = Ledger(container_id="gw-crash")
w = LedgerWriter(sys.argv[1], container_id="gw-crash", segment_max_bytes=200_000)
now = 1_700_000_000.0
ctx = ledger.context(now, "/", "u", "0-9-1", "c1", 1)
gid = itertools.count(1)
for n in itertools.count():
    for i in range(500):
        m = SimpleNamespace(gateway_id=next(gid), exchange="x", routing_key="k" * (i % 50),
                            message_id=None, correlation_id=None, size=i, headers=None)
        ledger.received(now, ctx, m, EventKind.ROUTED)
    now += 0.001
    w.add(ledger.take_lines(10 ** 6))
    w.flush(now)
    if n == 3:
        print("flushing", flush=True)
"""


def test_kill_9_while_writing_leaves_every_complete_line_readable(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], cwd=os.getcwd(),
                            stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        assert proc.stdout.readline() == b"flushing\n"
        deadline = time.monotonic() + 30
        while len(names(tmp_path)) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)  # killed while writing, once two segments are closed
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    segs = names(tmp_path)
    # the kill may fall between a segment's close (rename) and the next one's open, which
    # happens at the next write: then no segment is open
    assert len(segs) >= 2
    assert [n for n in segs if n.endswith(".open")] in ([], [segs[-1]])
    torn = 0
    for name, lines, tail in segment_lines(str(tmp_path)):
        for line in lines:
            json.loads(line)  # every complete line parses
        torn += bool(tail)
        if not name.endswith(".open"):
            assert tail == b""
    assert torn <= 1
    complete = ids(tmp_path)
    assert len(complete) == len(set(complete)) and len(complete) > 2000
    assert {r["user"] for r in read_events(str(tmp_path))} == {"u"}  # every context found
    # a restarted writer closes the open segment with exactly the complete lines
    LedgerWriter(str(tmp_path), container_id="gw-crash")
    assert all(n.endswith(".jsonl") for n in names(tmp_path))
    assert ids(tmp_path) == complete
