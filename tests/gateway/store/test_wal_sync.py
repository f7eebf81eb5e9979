"""WalSync: log syncs overlap, and their reports stay in commit order (issue 45).

The sync is injected (``sync_file``): each call blocks until the test releases it, so the
test sees how many syncs run at once and in what order the generations are reported.
"""
from __future__ import annotations

import threading
import time
from typing import Optional

import pytest

from gateway.store.errors import StoreWriteFailed
from gateway.store.wal_sync import WalSync


class HeldSyncs:
    """A ``sync_file`` whose calls wait for :meth:`release` (in any order); ``started``
    counts the calls that began."""

    def __init__(self, fail: frozenset[int] = frozenset()) -> None:
        self._cond = threading.Condition()
        self.started = 0
        self._released: set[int] = set()
        self._fail = fail

    def __call__(self, fd: int) -> None:
        with self._cond:
            self.started += 1
            number = self.started
            self._cond.notify_all()
            if not self._cond.wait_for(lambda: number in self._released, 10):
                raise AssertionError(f"sync {number} was never released")
        if number in self._fail:
            raise OSError(5, "Input/output error")

    def wait_started(self, count: int) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self.started >= count, 10)

    def release(self, number: int) -> None:
        with self._cond:
            self._released.add(number)
            self._cond.notify_all()


class Stats:
    def __init__(self) -> None:
        self.syncs = 0

    def synced(self, seconds: float) -> None:
        self.syncs += 1


@pytest.fixture
def wal_path(tmp_path) -> str:
    path = tmp_path / "store.db-wal"
    path.write_bytes(b"log")
    return str(path)


def reports_until(reports: list, count: int, timeout: float = 10.0) -> list:
    deadline = time.monotonic() + timeout
    while len(reports) < count and time.monotonic() < deadline:
        time.sleep(0.002)
    return reports


def test_a_generation_committed_during_a_sync_starts_its_own_and_reports_stay_in_order(wal_path) -> None:
    syncs = HeldSyncs()
    reports: list[tuple[int, Optional[StoreWriteFailed]]] = []
    wal = WalSync(wal_path, lambda gen, error, submitted: reports.append((gen, error)), Stats(), syncs)
    try:
        wal.put(1, None, [], True)
        assert syncs.wait_started(1)
        wal.put(2, None, [], True)
        assert syncs.wait_started(2)  # the second sync runs while the first is held
        syncs.release(2)  # the later sync ends first: it waits for the one before it
        deadline = time.monotonic() + 10
        while wal.running > 1 and time.monotonic() < deadline:  # the later sync handed over
            time.sleep(0.002)
        assert wal.running == 1 and reports == []
        syncs.release(1)
        assert wal.stop(10)  # everything is reported by then
        # both durable: one report of the later ("everything up to 2"), one wake
        assert reports == [(2, None)]
    finally:
        syncs.release(1), syncs.release(2)
        assert wal.stop(10)


def test_a_failed_sync_fails_only_the_generations_it_took(wal_path) -> None:
    syncs = HeldSyncs(fail=frozenset({1}))
    reports: list[tuple[int, Optional[StoreWriteFailed]]] = []
    stats = Stats()
    wal = WalSync(wal_path, lambda gen, error, submitted: reports.append((gen, error)), stats, syncs)
    try:
        wal.put(1, None, [], True)
        assert syncs.wait_started(1)
        wal.put(2, None, [], True)
        wal.put(3, None, [], False)  # nothing written: needs no sync, waits its turn
        assert syncs.wait_started(2)
        syncs.release(2)
        syncs.release(1)
        assert syncs.wait_started(2)
        got = reports_until(reports, 2)
        # 1 failed; 2 (synced) and 3 (nothing to sync) durable, reported as one: up to 3
        assert [gen for gen, _ in got] == [1, 3]
        assert isinstance(got[0][1], StoreWriteFailed) and got[1][1] is None
        assert stats.syncs == 1
    finally:
        syncs.release(1), syncs.release(2)
        assert wal.stop(10)


def test_generations_reported_together_with_one_outcome_are_one_report(wal_path) -> None:
    """Generations a sync covers reach the event loop as one report of the last (one wake),
    with every generation's submit times; a failure between them splits the run."""
    syncs = HeldSyncs()
    reports: list[tuple[int, Optional[StoreWriteFailed], list[float]]] = []
    wal = WalSync(wal_path, lambda gen, error, submitted: reports.append((gen, error, submitted)),
                  Stats(), syncs)
    failure = StoreWriteFailed("disk full", full=True)
    try:
        wal.put(1, None, [1.0], True)
        assert syncs.wait_started(1)
        with wal.handover_lock:  # the second syncer takes the four at once
            wal.put(2, None, [2.0], True)
            wal.put(3, None, [3.0], False)
            wal.put(4, failure, [4.0], False)
            wal.put(5, None, [5.0], True)
        assert syncs.wait_started(2)
        syncs.release(2)
        deadline = time.monotonic() + 10
        while wal.running > 1 and time.monotonic() < deadline:  # the second sync handed over
            time.sleep(0.001)
        assert wal.running == 1
        assert reports == []  # the later sync waits for the one before it
        syncs.release(1)
        assert wal.stop(10)
        assert reports == [(3, None, [1.0, 2.0, 3.0]), (4, failure, [4.0]), (5, None, [5.0])]
    finally:
        syncs.release(1), syncs.release(2)
        assert wal.stop(10)
