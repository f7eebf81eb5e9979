"""LedgerProcess: the ledger writer child under the real Twisted reactor."""
from __future__ import annotations

import glob
import json
import os
from pathlib import Path

import pytest
import pytest_twisted
from twisted.internet import defer, reactor, task

from gateway.edge.ledger_process import PIPE_CAPACITY, LedgerProcess, _widen_pipe
from gateway.ledger.feed import LedgerFeed
from gateway.ledger.records import EventKind


def _ids(directory: Path) -> list[str]:
    out = []
    for path in sorted(glob.glob(str(directory / "*.jsonl*"))):
        out += [json.loads(line).get("message_id") for line in Path(path).read_text().splitlines()]
    return out


def _process(directory: Path, **kwargs) -> LedgerProcess:
    feed = LedgerFeed(container_id="gw")
    return LedgerProcess(reactor, feed, {"directory": str(directory), "container_id": "gw"}, **kwargs)


async def _until(predicate, timeout: float = 10.0) -> bool:
    for _ in range(int(timeout / 0.05)):
        if predicate():
            return True
        await task.deferLater(reactor, 0.05, lambda: None)
    return predicate()


@pytest_twisted.ensureDeferred
async def test_events_reach_the_files_and_stop_waits_for_the_child(tmp_path: Path) -> None:
    lp = _process(tmp_path)
    lp.start()
    lp.feed.record(EventKind.RECEIVED, 1.0, message_id="a")
    lp.flush()
    assert await _until(lambda: _ids(tmp_path) == ["a"])
    lp.feed.record(EventKind.RECEIVED, 2.0, message_id="b")  # shipped by stop()
    pid = lp.transport.pid
    await lp.stop(10.0)
    assert _ids(tmp_path) == ["a", "b"]
    assert not os.path.exists(f"/proc/{pid}/status") or "zombie" not in Path(f"/proc/{pid}/status").read_text()
    assert not glob.glob(str(tmp_path / "*.open"))


@pytest_twisted.ensureDeferred
async def test_the_pipe_to_the_child_is_widened(tmp_path: Path) -> None:
    lp = _process(tmp_path)
    lp.start()
    try:
        assert await _until(lambda: lp._running)
        with open("/proc/sys/fs/pipe-max-size") as f:
            expected = min(PIPE_CAPACITY, int(f.read()))
        assert lp.pipe_capacity == expected > 65536
    finally:
        await lp.stop(10.0)


def test_widen_pipe_caps_at_pipe_max_size_and_never_fails() -> None:
    r, w = os.pipe()
    try:
        with open("/proc/sys/fs/pipe-max-size") as f:
            limit = int(f.read())
        if os.geteuid() == 0:  # root may go past pipe-max-size: ask for exactly the limit
            assert _widen_pipe(w, limit) == limit
        else:  # refused above the limit: the limit is asked for instead
            assert _widen_pipe(w, limit * 4) == limit
    finally:
        os.close(r)
        os.close(w)
    assert _widen_pipe(w, PIPE_CAPACITY) == 0  # closed: best effort, no exception


@pytest_twisted.ensureDeferred
async def test_a_child_that_dies_is_restarted(tmp_path: Path) -> None:
    lp = _process(tmp_path, restart_delay=0.1)
    lp.start()
    first = lp.transport.pid
    lp.transport.signalProcess("KILL")
    assert await _until(lambda: lp.restarts == 1 and lp._running and lp.transport.pid != first)
    lp.feed.record(EventKind.RECEIVED, 3.0, message_id="after")
    await lp.stop(10.0)
    assert _ids(tmp_path) == ["after"]


@pytest_twisted.ensureDeferred
async def test_stop_during_a_restart_still_writes_the_last_batch(tmp_path: Path) -> None:
    lp = _process(tmp_path, restart_delay=30.0)
    lp.start()
    lp.transport.signalProcess("KILL")
    assert await _until(lambda: lp.restarts == 1)
    lp.feed.record(EventKind.RECEIVED, 4.0, message_id="last")
    await lp.stop(10.0)
    assert _ids(tmp_path) == ["last"]


def test_a_writer_that_cannot_keep_up_costs_the_oldest_batches_not_memory(tmp_path: Path) -> None:
    lp = _process(tmp_path, max_pending_bytes=1000)
    lp.pauseProducing()  # as Twisted does when the pipe is full (never started here)
    for i in range(20):
        lp.feed.record(EventKind.RECEIVED, float(i), message_id="x" * 100)
        lp.flush()
    assert lp.frames_dropped > 0
    assert lp._pending_bytes <= 1000
    assert len(lp._pending) == 20 - lp.frames_dropped
