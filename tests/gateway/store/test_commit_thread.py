"""The commit thread on a store that runs out of space (issue 41, item 7): the failing
period ends only when a real write of meaningful size passes (no flapping), inserts are
refused meanwhile while deletions commit, and the space reserve lets deletions commit on
a full disk, after a restart too.

A full *file* is SQLite's ``PRAGMA max_page_count`` (as the forwarder's test does); a
full *disk* is a small tmpfs (``small_filesystem``: skipped where mounting is refused).
"""
from __future__ import annotations

import os
import sqlite3
import time

import pytest

from gateway.store import QueueRecord, StoreNoSpace
from gateway.store.sqlite import SqliteStore
from tests.support.small_filesystem import fill, small_filesystem
from tests.support.store_loop import CODECS, ManualLoop

PAGE = 4096


def open_store(directory: str, loop: ManualLoop, **kwargs) -> SqliteStore:
    kwargs.setdefault("retry_interval", 0.05)
    kwargs.setdefault("probe_bytes", 64 * 1024)
    return SqliteStore(os.path.join(directory, "store.db"), call_in_loop=loop.call_in_loop,
                       codecs=CODECS, sync="normal", check="off", **kwargs)


def row(mid: int, size: int):
    from gateway.store import MessageRow
    return MessageRow(mid, "amqp091", b"\x90\x00", bytes(size), "", "q", 1.0, size, None, None)


def answer(store: SqliteStore, loop: ManualLoop, timeout: float = 10.0):
    """Flush and run reports until everything written so far is answered."""
    done: list = []
    store.after_commit(done.append)
    store.flush()
    loop.run_until(lambda: bool(done), timeout)
    return done[0]


def fill_until_refused(store, loop, qid, size: int) -> list:
    """Add messages of ``size`` bytes, one commit each, until a commit fails; returns the
    refs that were stored."""
    refs = []
    for seq in range(1, 10_000):
        ref = store.add_message(qid, seq, None, 0, False, None, row(seq, size))
        if answer(store, loop) is not None:
            return refs
        refs.append((seq, ref))
    raise AssertionError("the store never filled up")


def run_for(loop: ManualLoop, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    loop.run_until(lambda: time.monotonic() >= deadline, seconds + 5)


def test_a_full_store_keeps_its_alarm_until_space_is_freed_then_clears_it_once(tmp_path) -> None:
    loop = ManualLoop()
    store = open_store(str(tmp_path), loop)
    alarms: list = []
    store.on_alarm = alarms.append
    qid = store.save_queue(QueueRecord("/", "q"))
    answer(store, loop)
    db = store.commit_thread.connection  # idle: nothing is being committed
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    db.execute(f"PRAGMA max_page_count={pages + 120}")  # about 480 KiB more
    stored = fill_until_refused(store, loop, qid, 20_000)
    assert len(stored) > 10 and len(alarms) == 1 and "full" in alarms[0]
    # publishers keep trying for a while (20 recovery checks): small messages that a
    # one-page probe would have let through; each is refused, the alarm stays up
    for seq in range(20_000, 20_020):
        store.add_message(qid, seq, None, 0, False, None, row(seq, 100))
        assert "new messages are refused" in str(answer(store, loop))
        run_for(loop, 0.05)
    assert len(alarms) == 1
    # consumers ack: deletions commit while the alarm is up, and free the pages
    for seq, ref in stored:
        store.remove_message(qid, seq, ref)
    assert answer(store, loop) is None
    loop.run_until(lambda: len(alarms) == 2)
    assert alarms[1] is None
    fresh = store.add_message(qid, 30_000, None, 0, False, None, row(30_000, 20_000))
    assert answer(store, loop) is None and store.is_durable(fresh)
    store.close()


@pytest.mark.parametrize("reserve", [2 << 20, 0])
def test_a_backlog_can_be_emptied_after_a_restart_on_a_full_disk(reserve) -> None:
    """The issue's case: the disk filled up under a stored backlog, the gateway restarted,
    and the queue could not be emptied. With the reserve given up at open, the file opens
    (with its alarm raised) and the deletions commit; without one the file does not even
    open (SQLite's shared-memory file cannot be made), naming the full disk."""
    with small_filesystem(8 << 20) as directory:
        loop = ManualLoop()
        store = open_store(directory, loop, reserve_bytes=reserve)
        assert os.path.exists(store.reserve.path) == bool(reserve)
        qid = store.save_queue(QueueRecord("/", "q"))
        for seq in range(1, 41):
            store.add_message(qid, seq, None, 0, False, None, row(seq, 32_000))
        assert answer(store, loop) is None
        store.close()
        fill(directory)  # something else fills the disk; then the gateway restarts
        loop = ManualLoop()
        if not reserve:
            with pytest.raises(StoreNoSpace, match="free some disk space"):
                open_store(directory, loop)
            return
        store = open_store(directory, loop, reserve_bytes=reserve)
        assert "less than 2097152 bytes free" in str(store.write_error)  # its alarm is up
        entries = store.load().entries[("/", "q")]
        assert len(entries) == 40
        for entry in entries:
            store.remove_message(qid, entry.seq, entry.ref)
        assert answer(store, loop) is None
        count = sqlite3.connect(store.path).execute("SELECT count(*) FROM queue_messages").fetchone()
        assert count == (0,)
        assert store.write_error is not None  # no room for the reserve: publishers stay blocked
        store.close()


def test_a_failed_commit_on_a_full_disk_gives_up_the_reserve_for_the_deletions() -> None:
    with small_filesystem(8 << 20) as directory:
        loop = ManualLoop()
        store = open_store(directory, loop, reserve_bytes=2 << 20)
        qid = store.save_queue(QueueRecord("/", "q"))
        stored = [(seq, store.add_message(qid, seq, None, 0, False, None, row(seq, 32_000)))
                  for seq in range(1, 41)]
        assert answer(store, loop) is None
        fill(directory, "other")  # another program fills the disk
        store.add_message(qid, 41, None, 0, False, None, row(41, 32_000))
        assert answer(store, loop).full
        assert not os.path.exists(store.reserve.path)
        for seq, ref in stored:
            store.remove_message(qid, seq, ref)
        assert answer(store, loop) is None
        assert sqlite3.connect(store.path).execute("SELECT count(*) FROM queue_messages").fetchone() == (0,)
        store.close()
