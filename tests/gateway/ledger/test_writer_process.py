"""The ledger writer process: frames in, segment files out; signals; the directory lock."""
from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from gateway.ledger.batches import lines_frame, rows_frame
from gateway.ledger.records import EventKind
from gateway.ledger.writer import LedgerWriter
from gateway.ledger.writer_process import EXIT_LOCKED, EXIT_STREAM, EXIT_USAGE, lock_directory, main, serve

REPO = Path(__file__).resolve().parents[3]


def _row(i: int) -> tuple:
    return (100.0 + i, EventKind.RECEIVED, "/", "guest", "0-9-1", None, "1", 1, "", "q", None,
            None, None, f"m{i}", None, i, None, None, 10, None, None, None, None, None)


def _lines(directory: str) -> list[dict]:
    out = []
    for path in sorted(glob.glob(os.path.join(directory, "*.jsonl*"))):
        out += [json.loads(line) for line in Path(path).read_text().splitlines()]
    return out


def test_serve_writes_every_batch_and_closes_at_end_of_input(tmp_path) -> None:
    read_fd, write_fd = os.pipe()
    stream = rows_frame([_row(0), _row(1)]) + lines_frame(b'{"v":1,"event":"x"}\n', 1) + rows_frame([])
    os.write(write_fd, stream)
    os.close(write_fd)
    writer = LedgerWriter(str(tmp_path), container_id="gw")
    assert serve(read_fd, writer, clock=lambda: 200.0) == 0
    os.close(read_fd)
    assert [r.get("message_id") for r in _lines(str(tmp_path))] == ["m0", "m1", None]
    assert not glob.glob(str(tmp_path / "*.open")), "end of input closes the segment"


def test_serve_collects_once_after_the_batches_of_each_chunk_when_due(tmp_path) -> None:
    read_fd, write_fd = os.pipe()
    writer = LedgerWriter(str(tmp_path), container_id="gw")
    collected: list[int] = []
    os.write(write_fd, rows_frame([_row(0)]) + rows_frame([_row(1)]))
    first = rows_frame([_row(2)])
    os.write(write_fd, first[:5])  # an incomplete frame: nothing to write, nothing to collect
    os.close(write_fd)
    serve(read_fd, writer, clock=lambda: 200.0, collect_interval=0.0,
          collect=lambda: collected.append(len(_lines(str(tmp_path)))))
    os.close(read_fd)
    # everything was in the pipe before serve read: one read, two batches written, one
    # collection after both; the incomplete frame is dropped at the end without one
    assert collected == [2]


def test_serve_collects_at_most_once_per_collect_interval(tmp_path) -> None:
    read_fd, write_fd = os.pipe()
    writer = LedgerWriter(str(tmp_path), container_id="gw")
    collected: list[float] = []
    now = [89.0]

    def clock() -> float:  # 100 at the start, 11 s more at each chunk read
        now[0] += 11.0
        return now[0]

    def feed() -> None:  # a frame a read (the reader waits on the pipe meanwhile)
        for i in range(4):
            time.sleep(0.2)
            os.write(write_fd, rows_frame([_row(i)]))
        os.close(write_fd)

    import threading
    feeder = threading.Thread(target=feed)
    feeder.start()
    serve(read_fd, writer, clock=clock, collect_interval=30.0,
          collect=lambda: collected.append(now[0]))
    feeder.join()
    os.close(read_fd)
    # writes at 111, 122, 133 and 144: a collection at the first 30 s after the start
    assert collected == [133.0]
    assert len(_lines(str(tmp_path))) == 4


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
            os.write(write_fd, rows_frame([_row(i)]))
            seen.append(_wait_for(lambda: writer.buffered == i + 1))
            seen.append(len(_lines(str(tmp_path))))
        now[0] = 101.5  # more than a second after serve started
        os.write(write_fd, rows_frame([_row(2)]))
        seen.append(_wait_for(lambda: len(_lines(str(tmp_path))) == 3))
        os.close(write_fd)

    feeder = threading.Thread(target=gateway)
    feeder.start()
    assert serve(read_fd, writer, clock=lambda: now[0], flush_interval=1.0) == 0
    feeder.join()
    os.close(read_fd)
    assert seen == [True, 0, True, 0, True], "kept, kept, then written together"
    assert [r.get("message_id") for r in _lines(str(tmp_path))] == ["m0", "m1", "m2"]


def test_lines_from_the_gateway_are_written_after_the_rows_kept(tmp_path) -> None:
    read_fd, write_fd = os.pipe()
    os.write(write_fd, rows_frame([_row(0)]) + lines_frame(b'{"v":1,"event":"x"}\n', 1))
    os.close(write_fd)
    writer = LedgerWriter(str(tmp_path), container_id="gw")
    assert serve(read_fd, writer, clock=lambda: 100.0, flush_interval=60.0) == 0
    os.close(read_fd)
    assert [r.get("message_id") for r in _lines(str(tmp_path))] == ["m0", None]


def test_corrupt_input_stops_with_a_status_but_keeps_what_came_before(tmp_path) -> None:
    read_fd, write_fd = os.pipe()
    os.write(write_fd, rows_frame([_row(0)]) + b"\x00\x00\x00\x02\x07x")
    os.close(write_fd)
    writer = LedgerWriter(str(tmp_path), container_id="gw")
    assert serve(read_fd, writer, clock=lambda: 200.0) == EXIT_STREAM
    os.close(read_fd)
    assert [r["message_id"] for r in _lines(str(tmp_path))] == ["m0"]


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
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def test_real_process_ignores_sigterm_and_writes_the_last_batch(tmp_path) -> None:
    proc = _spawn({"directory": str(tmp_path), "container_id": "gw"})
    proc.stdin.write(rows_frame([_row(0)]))
    proc.stdin.flush()
    deadline = time.monotonic() + 10
    while not _lines(str(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)  # the gateway stops it by closing the pipe, not this
    proc.send_signal(signal.SIGINT)
    proc.stdin.write(rows_frame([_row(1)]))
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
