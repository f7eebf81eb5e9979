"""LedgerWriter: buffering, flush, rotation by size and age, retention, crash safety."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from gateway.ledger import EventKind, LedgerRecord, LedgerWriter, Outcome

T0 = 1_700_000_000.0


def read_all(directory: str) -> list[dict]:
    out = []
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name), "rb") as f:
            data = f.read()
        assert data == b"" or data.endswith(b"\n"), name
        out += [json.loads(line) for line in data.splitlines()]
    return out


def names(directory: str) -> list[str]:
    return sorted(os.listdir(directory))


def writer(tmp_path, **kw) -> LedgerWriter:
    return LedgerWriter(str(tmp_path), container_id=kw.pop("container_id", "gw-A"), **kw)


def test_record_only_buffers_until_flush(tmp_path):
    w = writer(tmp_path)
    w.record(EventKind.RECEIVED, T0, gateway_id="b-1", size=5)
    w.append(LedgerRecord(ts_us=int(T0 * 1e6) + 1, event=EventKind.SETTLED, outcome=Outcome.ACCEPTED))
    assert w.buffered == 2 and names(tmp_path) == []
    assert w.flush(T0 + 1) == 2
    assert w.buffered == 0 and w.records_written == 2
    [seg] = names(tmp_path)
    assert seg.endswith(".jsonl.open") and seg.startswith("ledger-gw_A-")
    assert [r["event"] for r in read_all(tmp_path)] == ["received", "settled"]


def test_close_renames_the_open_segment(tmp_path):
    w = writer(tmp_path)
    w.record(EventKind.RECEIVED, T0)
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


def test_rotation_by_size_keeps_lines_whole(tmp_path):
    w = writer(tmp_path, segment_max_bytes=1000)
    for i in range(60):
        w.record(EventKind.RECEIVED, T0 + i, gateway_id=f"b-{i}", vhost="/")
        w.flush(T0 + i + 0.5)
    w.close(T0 + 100)
    segs = names(tmp_path)
    assert len(segs) > 3 and all(s.endswith(".jsonl") for s in segs)
    for s in segs[:-1]:
        assert os.path.getsize(tmp_path / s) <= 1000
    assert [r["gateway_id"] for r in read_all(tmp_path)] == [f"b-{i}" for i in range(60)]


def test_one_flush_bigger_than_a_segment_is_written_whole(tmp_path):
    w = writer(tmp_path, segment_max_bytes=100)
    for i in range(20):
        w.record(EventKind.RECEIVED, T0, gateway_id=f"b-{i}")
    w.flush(T0)
    assert len(names(tmp_path)) == 1 and len(read_all(tmp_path)) == 20


def test_rotation_by_age_even_without_new_records(tmp_path):
    w = writer(tmp_path, segment_max_age=60)
    w.record(EventKind.RECEIVED, T0)
    w.flush(T0)
    w.flush(T0 + 59)
    assert names(tmp_path)[0].endswith(".open")
    w.flush(T0 + 60)
    assert names(tmp_path)[0].endswith(".jsonl")
    w.record(EventKind.RECEIVED, T0 + 61)
    w.flush(T0 + 61)
    assert [n.endswith(".open") for n in names(tmp_path)] == [False, True]


def test_retention_by_age_deletes_old_closed_segments(tmp_path):
    w = writer(tmp_path, segment_max_age=10, retention_max_age=100)
    for i in range(0, 200, 10):
        w.record(EventKind.RECEIVED, T0 + i, gateway_id=f"b-{i}")
        w.flush(T0 + i)
    kept = read_all(tmp_path)
    # now = T0+190: closed segments whose last record is older than T0+90 are gone
    assert [r["gateway_id"] for r in kept] == [f"b-{i}" for i in range(100, 200, 10)]
    assert w.segments_deleted == 10


def test_retention_by_total_size(tmp_path):
    w = writer(tmp_path, segment_max_bytes=300, retention_max_bytes=1000)
    for i in range(50):
        w.record(EventKind.RECEIVED, T0 + i, gateway_id=f"b-{i:03d}")
        w.flush(T0 + i)
    total = sum(os.path.getsize(tmp_path / n) for n in names(tmp_path))
    assert total <= 1000
    ids = [r["gateway_id"] for r in read_all(tmp_path)]
    assert ids == [f"b-{i:03d}" for i in range(50 - len(ids), 50)]  # the newest survive


def test_retention_leaves_other_files_alone(tmp_path):
    (tmp_path / "notes.txt").write_text("keep me")
    (tmp_path / "ledger-gw_B-0000000000000001-0000-0000000000000002.jsonl").write_text("{}\n")
    w = writer(tmp_path, segment_max_age=1, retention_max_age=1)
    for i in range(5):
        w.record(EventKind.RECEIVED, T0 + 10 * i)
        w.flush(T0 + 10 * i)
    assert "notes.txt" in names(tmp_path)
    assert any("gw_B" in n for n in names(tmp_path))


def test_sampling_and_allowlist_through_the_writer(tmp_path):
    w = writer(tmp_path, sample_rate=0.0, header_allowlist=["x-a"])
    w.record(EventKind.RECEIVED, T0, gateway_id="b-1", headers={"x-a": 1})
    w.record(EventKind.REFUSED, T0, reason="access_refused", headers={"x-a": 1, "x-b": 2})
    assert w.flush(T0) == 1 and w.records_sampled_out == 1
    [r] = read_all(tmp_path)
    assert r["event"] == "refused" and r["headers"] == {"x-a": "1"}


def test_disabled_writer_touches_nothing(tmp_path):
    target = tmp_path / "ledger"
    w = LedgerWriter(str(target), container_id="gw", enabled=False)
    w.record(EventKind.RECEIVED, T0)
    w.append(LedgerRecord(ts_us=1, event=EventKind.RECEIVED))
    assert w.buffered == 0 and w.flush(T0) == 0 and w.close(T0) == 0
    assert not target.exists()


def test_bad_settings_are_refused(tmp_path):
    with pytest.raises(ValueError) as info:
        writer(tmp_path, sample_rate=2.0)
    assert "sample_rate" in str(info.value)
    with pytest.raises(ValueError) as info:
        writer(tmp_path, segment_max_bytes=0)
    assert "positive" in str(info.value)


def test_write_error_keeps_events_and_cuts_the_partial_write(tmp_path, monkeypatch):
    w = writer(tmp_path, max_buffered=3)
    w.record(EventKind.RECEIVED, T0, gateway_id="b-0")
    w.flush(T0)
    real_write = os.write

    def failing_write(fd, data):
        real_write(fd, bytes(data[:7]))  # a partial line, then the disk is full
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", failing_write)
    for i in range(1, 5):
        w.record(EventKind.RECEIVED, T0 + 1, gateway_id=f"b-{i}")
    assert w.flush(T0 + 1) == 0
    assert w.write_errors == 1 and w.buffered == 3 and w.records_dropped == 1
    monkeypatch.setattr(os, "write", real_write)
    assert w.flush(T0 + 2) == 3
    assert [r["gateway_id"] for r in read_all(tmp_path)] == ["b-0", "b-2", "b-3", "b-4"]


def test_a_flush_writes_in_slices_and_a_failed_slice_keeps_itself_and_the_rest(
        tmp_path, monkeypatch):
    import gateway.ledger.writer as writer_module

    monkeypatch.setattr(writer_module, "FLUSH_SLICE", 2)
    w = writer(tmp_path)
    real_write = os.write
    writes = []

    def second_write_fails(fd, data):
        writes.append(bytes(data))
        if len(writes) == 2:
            raise OSError(28, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", second_write_fails)
    for i in range(5):
        w.record(EventKind.RECEIVED, T0, gateway_id=f"b-{i}")
    assert w.flush(T0) == 2  # the first slice; the second failed, the third waits
    assert [data.count(b"\n") for data in writes] == [2, 2]
    assert w.write_errors == 1 and w.buffered == 3 and w.records_dropped == 0
    monkeypatch.setattr(os, "write", real_write)
    assert w.flush(T0 + 1) == 3
    assert [r["gateway_id"] for r in read_all(tmp_path)] == [f"b-{i}" for i in range(5)]


def test_restart_recovers_a_torn_open_segment(tmp_path):
    w = writer(tmp_path)
    for i in range(3):
        w.record(EventKind.RECEIVED, T0 + i, gateway_id=f"b-{i}")
    w.flush(T0 + 3)
    [seg] = names(tmp_path)
    with open(tmp_path / seg, "ab") as f:
        f.write(b'{"v":1,"container":"gw-A","ts_us":17')  # torn by a crash
    w2 = writer(tmp_path)
    [closed] = names(tmp_path)
    # end time: the last record (T0+2), but never before the segment opened (T0+3)
    assert closed.endswith(f"-{int((T0 + 3) * 1e6):016d}.jsonl")
    assert [r["gateway_id"] for r in read_all(tmp_path)] == ["b-0", "b-1", "b-2"]
    w2.record(EventKind.RECEIVED, T0 + 10, gateway_id="b-9")
    w2.close(T0 + 10)
    assert len(read_all(tmp_path)) == 4


def test_restart_deletes_an_empty_open_segment(tmp_path):
    (tmp_path / "ledger-gw_A-0000000000000005-0000.jsonl.open").write_bytes(b'{"torn')
    writer(tmp_path)
    assert names(tmp_path) == []


CHILD = r"""
import sys, itertools
from gateway.ledger import LedgerWriter, EventKind
w = LedgerWriter(sys.argv[1], container_id="gw-crash", segment_max_bytes=200_000)
now = 1_700_000_000.0
for n in itertools.count():
    for i in range(500):
        w.record(EventKind.RECEIVED, now, gateway_id=f"b-{n}-{i}", vhost="/", user="u" * (i % 50),
                 size=i)
    now += 0.001
    w.flush(now)
    if n == 3:
        print("flushing", flush=True)
"""


def test_kill_9_while_writing_leaves_every_complete_line_readable(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], cwd=os.getcwd(),
                            stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        assert proc.stdout.readline() == b"flushing\n"
        time.sleep(0.3)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    segs = names(tmp_path)
    # the kill may fall between a segment's close (rename) and the next one's open, which
    # happens at the next write: then no segment is open
    assert len(segs) >= 2
    assert [n for n in segs if n.endswith(".open")] in ([], [segs[-1]])
    complete, torn = [], 0
    for name in segs:
        data = (tmp_path / name).read_bytes()
        *whole, tail = data.split(b"\n")
        complete += [json.loads(line) for line in whole]  # every complete line parses
        torn += bool(tail)
        if not name.endswith(".open"):
            assert tail == b""
    assert torn <= 1
    ids = [r["gateway_id"] for r in complete]
    assert len(ids) == len(set(ids)) and len(ids) > 2000
    # a restarted writer closes the open segment with exactly the complete lines
    LedgerWriter(str(tmp_path), container_id="gw-crash")
    assert all(n.endswith(".jsonl") for n in names(tmp_path))
    assert [r["gateway_id"] for r in read_all(tmp_path)] == ids


def test_routed_rows_of_a_long_flush_keep_their_messages_fields(tmp_path):
    """A flush of many slices whose rows span several rotations of the kept publish rows
    (a writer that fell behind): the publish rows the routed rows stand for are made once
    for the whole flush, so the batch's fragments (found by the rows' ids) never meet a
    freed row's id again, and every delivery is written with its own message's fields."""
    from gateway.ledger.buffer import ledger_context
    from gateway.ledger.writer import FLUSH_SLICE

    w = writer(tmp_path)
    publisher = ledger_context("/", "ann", "0-9-1", "c1", 1)
    consumer = ledger_context("/", "bob", "1.0", "c2", "l1")
    count = 3 * FLUSH_SLICE
    rows = []
    for gid in range(1, count + 1):
        now = T0 + gid * 0.005  # 60 s of events in one flush
        rows.append((publisher, "", "q", f"m-{gid}", None, gid, gid % 97, now, ("q",)))
        rows.append((now, consumer, gid, "q", 0))
    w.add(rows)
    w.flush(T0 + 61)
    written = read_all(tmp_path)
    delivered = [r for r in written if r["event"] == "delivered"]
    assert len(written) == 3 * count and len(delivered) == count
    assert all(r["message_id"] == f"m-{r['gateway_id']}" and r["size"] == int(r["gateway_id"]) % 97
               and r["proto_in"] == "0-9-1" for r in written)
    assert all(r["proto_out"] == "1.0" and r["latency_us"] == 0 for r in delivered)
