"""The ledger writer process: frames of records in, segment files out; signals; the directory lock."""
from __future__ import annotations

import fcntl
import glob
import json
import os
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

from gateway.ledger import EventKind, Ledger
from gateway.ledger.writer import LedgerWriter
from gateway.ledger.writer_process import EXIT_LOCKED, EXIT_USAGE, lock_directory, main, serve
from tests.gateway.ledger.test_writer import message
from tests.support.ledger_files import read_events

REPO = Path(__file__).resolve().parents[3]
_LEDGER = Ledger(container_id="gw")
_CTX = _LEDGER.context(100.0, "/", "guest", "0-9-1", "1", 1)
_LEDGER.take_frame()  # the context's record: ``_row(0)`` repeats it


def _row(i: int) -> bytes:
    """Message ``m<i>`` received and routed, as the gateway ships it: a frame (its
    context's first, for the first message)."""
    record = message(i, 100.0 + i)
    record.message_id = f"m{i}"
    _LEDGER.received(100.0 + i, _CTX, record, EventKind.ROUTED)
    data = _LEDGER.take_frame()
    return _LEDGER.context_frame() + data if i == 0 else data


def _lines(directory: str) -> list[dict]:
    return [r for r in read_events(directory) if r["event"] == "received"]


def test_serve_writes_every_line_and_closes_at_end_of_input(tmp_path) -> None:
    read_fd, write_fd = os.pipe()
    os.write(write_fd, _row(0) + _row(1))
    os.close(write_fd)
    writer = LedgerWriter(str(tmp_path), container_id="gw")
    assert serve(read_fd, writer, clock=lambda: 200.0) == 0
    os.close(read_fd)
    assert [r.get("message_id") for r in _lines(str(tmp_path))] == ["m0", "m1"]
    assert not glob.glob(str(tmp_path / "*.open")), "end of input closes the segment"


def test_a_frame_cut_by_a_read_waits_for_its_rest_and_one_cut_by_the_end_is_dropped(tmp_path) -> None:
    read_fd, write_fd = os.pipe()
    writer = LedgerWriter(str(tmp_path), container_id="gw")
    first = _row(0)
    data = first + _row(1)
    cut = len(first) + 20  # inside m1's frame

    def gateway() -> None:
        os.write(write_fd, data[:cut])
        _wait_for(lambda: _unread(read_fd) == 0)  # read: the rest comes in a second read
        os.write(write_fd, data[cut:] + _row(2)[:-4])  # m2's frame is cut off
        os.close(write_fd)

    feeder = threading.Thread(target=gateway)
    feeder.start()
    assert serve(read_fd, writer, clock=lambda: 200.0) == 0
    feeder.join()
    os.close(read_fd)
    assert [r.get("message_id") for r in _lines(str(tmp_path))] == ["m0", "m1"]
    assert writer.records_written == 3  # the context, m0, m1


def test_a_corrupt_frame_ends_the_input_after_what_came_before(tmp_path, caplog) -> None:
    read_fd, write_fd = os.pipe()
    os.write(write_fd, _row(0) + b"\0\0\0\1\0\0\0\1\x07x" + _row(1))  # kind 7: no frame
    os.close(write_fd)
    writer = LedgerWriter(str(tmp_path), container_id="gw")
    assert serve(read_fd, writer, clock=lambda: 200.0) == 0
    os.close(read_fd)
    assert [r.get("message_id") for r in _lines(str(tmp_path))] == ["m0"]
    assert "ledger frame of kind 7" in caplog.text


def _unread(fd: int) -> int:
    """Bytes in the pipe that its reader has not read yet (FIONREAD)."""
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]


def _wait_for(condition, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_serve_keeps_rows_until_the_flush_interval_has_passed(tmp_path) -> None:
    """The gateway ships a frame every tenth of a second; the rows are written once per
    flush interval (and at end of input)."""
    read_fd, write_fd = os.pipe()
    writer = LedgerWriter(str(tmp_path), container_id="gw")
    now = [100.0]
    seen: list[object] = []

    def gateway() -> None:
        for i, at in enumerate((100.1, 100.2)):
            now[0] = at
            os.write(write_fd, _row(i))
            seen.append(_wait_for(lambda: writer.buffered == i + 2))  # (the context too)
            seen.append(len(_lines(str(tmp_path))))
        now[0] = 131.5  # more than the interval after serve started
        os.write(write_fd, _row(2))
        seen.append(_wait_for(lambda: len(_lines(str(tmp_path))) == 3))
        os.close(write_fd)

    feeder = threading.Thread(target=gateway)
    feeder.start()
    assert serve(read_fd, writer, clock=lambda: now[0], flush_interval=30.0) == 0
    feeder.join()
    os.close(read_fd)
    assert seen == [True, 0, True, 0, True], "kept, kept, then written together"
    assert [r.get("message_id") for r in _lines(str(tmp_path))] == ["m0", "m1", "m2"]


def test_an_idle_writer_flushes_on_its_timer_and_acknowledges(tmp_path) -> None:
    """Rows and then nothing more: they are written within the flush interval all the
    same (before, they waited for the next input), and the count of lines written is
    acknowledged after each flush that wrote."""
    read_fd, write_fd = os.pipe()
    writer = LedgerWriter(str(tmp_path), container_id="gw")
    acknowledged: list[int] = []
    server = threading.Thread(target=serve, args=(read_fd, writer),
                              kwargs=dict(flush_interval=0.2, acknowledge=acknowledged.append))
    server.start()
    try:
        os.write(write_fd, _row(0))
        assert _wait_for(lambda: len(_lines(str(tmp_path))) == 1, timeout=5.0)
        os.write(write_fd, _row(1))  # within the interval of the first flush
        assert _wait_for(lambda: len(_lines(str(tmp_path))) == 2, timeout=5.0), \
            "the second row waits for no further input"
        assert acknowledged == [2, 3]  # m0 with its context, then m1
    finally:
        os.close(write_fd)
        server.join(10)
        os.close(read_fd)
    assert acknowledged == [2, 3, 3]  # and once more at the end of input


def test_lock_is_exclusive_per_directory_and_container(tmp_path) -> None:
    first = lock_directory(str(tmp_path), "gw")
    assert first is not None
    try:
        assert lock_directory(str(tmp_path), "gw", wait=0.2) is None
        other = lock_directory(str(tmp_path), "other-gw", wait=0.2)
        assert other is not None
        os.close(other)
    finally:
        os.close(first)
    again = lock_directory(str(tmp_path), "gw", wait=0.2)
    assert again is not None
    os.close(again)


def test_bad_usage_and_bad_settings_exit_2() -> None:
    before = [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)]
    assert main([]) == EXIT_USAGE
    assert main(["{not json"]) == EXIT_USAGE
    assert main(['{"container_id": "gw"}']) == EXIT_USAGE  # no directory
    # a failed start leaves the signal dispositions alone (children would inherit SIG_IGN)
    assert [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)] == before


def _spawn(settings: dict) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen([sys.executable, "-m", "gateway.ledger.writer_process", json.dumps(settings)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env)


def test_real_process_ignores_sigterm_and_writes_the_last_batch(tmp_path) -> None:
    proc = _spawn({"directory": str(tmp_path), "container_id": "gw", "acknowledge": True})
    proc.stdin.write(_row(0))
    proc.stdin.flush()
    assert proc.stdout.readline() == b"2\n", "the lines written, acknowledged on stdout"
    assert [r["message_id"] for r in _lines(str(tmp_path))] == ["m0"]
    proc.send_signal(signal.SIGTERM)  # the gateway stops it by closing the pipe, not this
    proc.send_signal(signal.SIGINT)
    proc.stdout.close()  # a gateway gone: the acknowledgements stop, the writing does not
    proc.stdin.write(_row(1))
    proc.stdin.close()
    assert proc.wait(10) == 0
    assert [r["message_id"] for r in _lines(str(tmp_path))] == ["m0", "m1"]


def test_real_process_waits_for_the_lock_then_gives_up(tmp_path, monkeypatch) -> None:
    held = lock_directory(str(tmp_path), "gw")
    try:
        monkeypatch.setattr("gateway.ledger.writer_process.LOCK_WAIT", 0.2)
        assert main([json.dumps({"directory": str(tmp_path), "container_id": "gw"})]) == EXIT_LOCKED
    finally:
        os.close(held)


def test_every_segment_starts_with_the_contexts_open_when_frames_of_rows_are_not_searched(tmp_path) -> None:
    """Issue 45: the writer process searches only the lines of frames that hold records in
    full for contexts opened and ended (``FrameReader.feed_marked``); frames of rows go
    unsearched. Segments rotated every few frames still each start with the contexts
    open then, one opened between rows and one ended among them included."""
    from gateway.ledger.encoding import FrameReader

    ledger = Ledger(container_id="gw")
    first = ledger.context(100.0, "/", "a", "0-9-1", "1", 1)
    stream, marks, later = [ledger.context_frame()], [], None
    for i in range(40):
        if i == 10:
            later = ledger.context(100.0 + i, "/", "b", "1.0", "2", "l")
        if i == 30:
            ledger.close_context(100.0 + i, first)
        ctx = first if i < 30 else later
        record = message(i, 100.0 + i)
        ledger.received(100.0 + i, ctx, record, EventKind.ROUTED)
        stream.append(ledger.take_frame())
    reader = FrameReader()
    for data in stream:
        marks += [held for _, held in reader.feed_marked(data)]
    assert marks.count(False) >= 30 and 2 <= marks.count(True) <= 4, marks
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"".join(stream))
    os.close(write_fd)
    writer = LedgerWriter(str(tmp_path), container_id="gw", segment_max_bytes=600)
    assert serve(read_fd, writer, clock=lambda: 200.0) == 0
    os.close(read_fd)
    segments = sorted(glob.glob(str(tmp_path / "*.jsonl")))
    assert len(segments) >= 5
    for path in segments:
        with open(path, "rb") as f:
            rows = [json.loads(line) for line in f]
        opened = [row[2] for row in rows if row[0] == "c"]
        assert rows[0][0] == "c" and opened, path
        received = [row[2] for row in rows if row[0] == "m"]
        assert set(received) <= set(opened), f"{path}: a message of a context it lacks"
