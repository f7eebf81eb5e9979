"""LedgerShipping and LedgerProcess: the ledger's records in slices (frames), to the writer
child under the real Twisted reactor."""
from __future__ import annotations

import glob
import os
from pathlib import Path

import pytest_twisted
from twisted.internet import reactor, task

from gateway.edge.ledger_process import PIPE_CAPACITY, LedgerProcess, LedgerShipping, widen_pipe
from gateway.ledger import Ledger
from tests.gateway.ledger.test_ledger import message
from tests.support.ledger_files import read_events


def _ids(directory: Path) -> list[str]:
    return [r.get("message_id") for r in read_events(str(directory)) if r["event"] == "received"]


def _process(directory: Path, **kwargs) -> LedgerProcess:
    ledger = Ledger(container_id="gw")
    process = LedgerProcess(reactor, ledger, {"directory": str(directory), "container_id": "gw"},
                            **kwargs)
    process.ctx = ledger.context(1.0, "/", "ann", "0-9-1", "c1", 1)
    return process


def _publish(process: LedgerProcess, message_id: str) -> None:
    process.ledger.received(1.0, process.ctx, message(message_id=message_id))


async def _until(predicate, timeout: float = 10.0) -> bool:
    for _ in range(int(timeout / 0.05)):
        if predicate():
            return True
        await task.deferLater(reactor, 0.05, lambda: None)
    return predicate()


class _Turns(task.Clock):
    """A clock whose calls for the next turn (``callLater(0)``) wait for ``turn()``."""

    def turn(self) -> None:
        self.advance(0)

    def advance(self, amount: float) -> None:
        self.rightNow += amount
        for call in [c for c in self.calls if c.getTime() <= self.rightNow]:
            self.calls.remove(call)
            call.called = 1
            call.func(*call.args, **call.kw)


def test_shipping_takes_one_slice_a_turn_and_a_backlog_half_at_a_time():
    clock = _Turns()
    ledger = Ledger(container_id="gw")
    ctx = ledger.context(1.0, "/", "ann", "0-9-1", "c1", 1)
    for gid in range(1, 500):
        ledger.received(1.0, ctx, message(gid))
    shipped: list[bytes] = []
    shipping = LedgerShipping(clock, ledger, shipped.append, interval=0.02, slice=256)
    shipping.start()
    clock.advance(0.01)
    assert shipped == []
    clock.advance(0.01)  # the timer: one slice now, the next on the next turn
    assert [x.count(b"\n") for x in shipped] == [256]
    clock.turn()
    clock.turn()
    assert [x.count(b"\n") for x in shipped] == [256, 244] and ledger.pending == 0
    for gid in range(500, 500 + 4000):  # more than the turns kept up with
        ledger.received(1.0, ctx, message(gid))
    clock.advance(0.02)
    assert shipped[-1].count(b"\n") == 2000  # 4000 / 2
    for _ in range(5):
        clock.turn()
    assert [x.count(b"\n") for x in shipped[2:]] == [2000, 1000, 500, 256, 244]
    assert ledger.pending == 0
    for gid in range(4500, 4500 + 4000):
        ledger.received(1.0, ctx, message(gid))
    clock.advance(0.02)
    shipping.stop()  # the rest at once
    assert ledger.pending == 0 and sum(x.count(b"\n") for x in shipped) == 8500


def _started_shipping() -> tuple[_Turns, Ledger, int, list[bytes], LedgerShipping]:
    """A started shipping of a new ledger with one context, on a clock of turns, into a list."""
    clock = _Turns()
    ledger = Ledger(container_id="gw")
    ctx = ledger.context(1.0, "/", "ann", "0-9-1", "c1", 1)
    shipped: list[bytes] = []
    shipping = LedgerShipping(clock, ledger, shipped.append, interval=0.02, slice=256)
    shipping.start()
    return clock, ledger, ctx, shipped, shipping


def test_forwarding_records_are_shipped_on_the_next_turn_not_an_interval_later():
    """A forwarded message's records wake the shipping: the other gateway settles on
    them, so a kill -9 an interval later must not find them still in memory."""
    clock, ledger, ctx, shipped, shipping = _started_shipping()
    ledger.received(1.0, ctx, message(1))
    clock.turn()
    assert shipped == []  # local traffic waits for the timer
    arrived = message(2)
    ledger.received(1.0, ctx, arrived)
    ledger.arrived_forwarded(arrived, 7, "org-a", "org-a")
    ledger.forwarded(1.0, message(3), "org-b")
    clock.turn()
    assert sum(x.count(b"\n") for x in shipped) == 5 and ledger.pending == 0
    shipping.stop()
    ledger.forwarded(1.0, message(4), "org-b")  # stopped: nothing scheduled
    assert clock.calls == []


def test_ship_all_hands_over_every_record_at_once_and_nothing_once_stopped():
    """The store calls it before its confirms go out: what was acknowledged must be in
    the writer's hands, not one slice now and the rest on later turns."""
    clock, ledger, ctx, shipped, shipping = _started_shipping()
    for gid in range(1, 601):
        ledger.received(1.0, ctx, message(gid))
    shipping.ship_all()
    lines = sum(x.count(b"\n") for x in shipped)
    assert ledger.pending == 0 and lines == 601  # the context's line and the 600
    shipping.stop()
    ledger.received(1.0, ctx, message(601))
    shipping.ship_all()  # stopped: the stop shipped what there was; nothing more
    assert ledger.pending == 1 and sum(x.count(b"\n") for x in shipped) == lines


@pytest_twisted.ensureDeferred
async def test_events_reach_the_files_and_stop_waits_for_the_child(tmp_path: Path) -> None:
    lp = _process(tmp_path)
    lp.start()
    _publish(lp, "a")
    assert await _until(lambda: _ids(tmp_path) == ["a"])
    _publish(lp, "b")  # shipped by stop()
    pid = lp.transport.pid
    await lp.stop(10.0)
    assert _ids(tmp_path) == ["a", "b"]
    assert not os.path.exists(f"/proc/{pid}/status") or "zombie" not in Path(f"/proc/{pid}/status").read_text()
    assert not glob.glob(str(tmp_path / "*.open"))


@pytest_twisted.ensureDeferred
async def test_the_records_sent_in_frames_are_the_lines_the_child_acknowledges(tmp_path: Path) -> None:
    lp = _process(tmp_path)
    lp.start()
    for i in range(5):
        _publish(lp, f"m{i}")
    # the open context (sent first to a new child), its own record, five messages
    assert await _until(lambda: lp.lines_written == 7)
    assert (lp.lines_sent, lp.records_sent) == (7, 7)
    _publish(lp, "last")
    await lp.stop(10.0)
    assert (lp.lines_sent, lp.lines_written, lp.records_sent) == (8, 8, 8)
    assert _ids(tmp_path) == ["m0", "m1", "m2", "m3", "m4", "last"]


@pytest_twisted.ensureDeferred
async def test_the_pipe_to_the_child_is_widened(tmp_path: Path) -> None:
    lp = _process(tmp_path)
    lp.start()
    try:
        assert await _until(lambda: lp.running)
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
            assert widen_pipe(w, limit) == limit
        else:  # refused above the limit: the limit is asked for instead
            assert widen_pipe(w, limit * 4) == limit
    finally:
        os.close(r)
        os.close(w)
    assert widen_pipe(w, PIPE_CAPACITY) == 0  # closed: best effort, no exception


@pytest_twisted.ensureDeferred
async def test_a_child_that_dies_is_restarted_and_told_the_open_contexts(tmp_path: Path) -> None:
    lp = _process(tmp_path, restart_delay=0.1)
    lp.start()
    assert await _until(lambda: lp.running)
    first = lp.transport.pid
    lp.transport.signalProcess("KILL")
    assert await _until(lambda: lp.restarts == 1 and lp.running and lp.transport.pid != first)
    _publish(lp, "after")
    await lp.stop(10.0)
    [after] = [r for r in read_events(str(tmp_path)) if r["event"] == "received"]
    assert (after["message_id"], after["user"]) == ("after", "ann")


@pytest_twisted.ensureDeferred
async def test_stop_during_a_restart_still_writes_the_last_lines(tmp_path: Path) -> None:
    lp = _process(tmp_path, restart_delay=30.0)
    lp.start()
    lp.transport.signalProcess("KILL")
    assert await _until(lambda: lp.restarts == 1)
    _publish(lp, "last")
    await lp.stop(10.0)
    assert _ids(tmp_path) == ["last"]


def test_a_writer_that_cannot_keep_up_costs_the_oldest_lines_not_memory(tmp_path: Path) -> None:
    lp = _process(tmp_path, max_pending_bytes=1000)
    lp.pauseProducing()  # as Twisted does when the pipe is full (never started here)
    for i in range(20):
        _publish(lp, "x" * 100)
        lp.send(lp.ledger.take_frame())
    assert lp.chunks_dropped > 0 and lp.replay_due, "the contexts go first when it resumes"
    assert lp.pending_bytes <= 1000
    assert lp.pending_frames == 20 - lp.chunks_dropped
