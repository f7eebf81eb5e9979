"""DedupeWindow: ids are duplicates while inside the window, per origin; expiry forgets the
old ones in memory and in the store; a reopened store restores the ids still inside."""
from __future__ import annotations

import gc
import tracemalloc

from gateway.forward.dedupe import DedupeWindow
from tests.gateway.store.test_sqlite import commit, open_store, path  # noqa: F401 - path: a fixture


def test_ids_are_duplicates_per_origin_until_they_leave_the_window(path, loop) -> None:
    store = open_store(path, loop)
    window = DedupeWindow(store, 100.0)
    window.remember("org-a", 1, 10.0)
    window.remember("org-a", 3, 20.0)  # (not the next id: a run of its own)
    window.remember("org-c", 1, 30.0)
    assert window.duplicate("org-a", 1) and window.duplicate("org-c", 1)
    assert not window.duplicate("org-a", 2) and not window.duplicate("org-c", 2)
    assert not window.duplicate("org-x", 1)
    assert window.dropped == 2 and len(window) == 3
    window.expire(115.0)  # the horizon 15.0: org-a's id 1 only
    assert not window.duplicate("org-a", 1)
    assert window.duplicate("org-a", 3) and window.duplicate("org-c", 1) and len(window) == 2
    window.expire(125.0)  # org-a has nothing left inside
    assert not window.duplicate("org-a", 3) and window.duplicate("org-c", 1) and len(window) == 1
    commit(store, loop)
    store.close()


def test_ids_that_follow_each_other_are_one_run_kept_until_its_last_leaves_the_window(path, loop) -> None:
    window = DedupeWindow(open_store(path, loop), 100.0)
    window.remember("org-a", 1, 10.0)
    window.remember("org-a", 2, 20.0)
    window.expire(115.0)  # id 1 is older than the window, but its run's last is not
    assert window.duplicate("org-a", 1) and window.duplicate("org-a", 2) and len(window) == 2
    window.expire(121.0)
    assert not window.duplicate("org-a", 1) and not window.duplicate("org-a", 2) and len(window) == 0


def test_an_id_that_fills_a_gap_joins_the_runs_on_either_side(path, loop) -> None:
    window = DedupeWindow(open_store(path, loop), 100.0)
    for gateway_id, seen_at in ((1, 1.0), (2, 2.0), (5, 3.0), (4, 4.0), (3, 5.0), (9, 6.0)):
        window.remember("org-a", gateway_id, seen_at)
    assert [window.duplicate("org-a", i) for i in range(11)] == [
        False, True, True, True, True, True, False, False, False, True, False]
    assert len(window) == 6
    window.expire(105.5)  # 1..5 last seen at 5.0: gone; 9 (seen at 6.0) stays
    assert [window.duplicate("org-a", i) for i in (1, 5, 9)] == [False, False, True]


def test_a_run_behind_one_seen_later_is_kept_until_that_one_goes(path, loop) -> None:
    """Expiry walks runs from the lowest ids up to the first inside the window: one that
    a late id joined keeps the runs above it (longer than the window, never shorter)."""
    window = DedupeWindow(open_store(path, loop), 100.0)
    window.remember("org-a", 10, 1.0)
    window.remember("org-a", 20, 2.0)
    window.remember("org-a", 5, 50.0)   # a late id, below the others
    window.expire(120.0)  # the horizon 20.0: 10 and 20 are older, behind 5
    assert [window.duplicate("org-a", i) for i in (5, 10, 20)] == [True, True, True]
    window.expire(151.0)
    assert len(window) == 0


def test_a_stream_of_ids_costs_no_memory_a_message(path, loop) -> None:
    """A sender's ids one after the other are one run: 100,000 of them (a few seconds at
    full speed; a 600 s window holds millions) take no memory per id."""
    window = DedupeWindow(open_store(path, loop), 600.0)
    window.remember("org-a", 1, 0.0)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(2, 100_002):
            window.remember("org-a", i, i / 30_000)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(window) == 100_001 and window.duplicate("org-a", 50_000)
    assert grown < 64 * 1024, grown   # (the store's own op list grows per commit, not per id)


def test_an_id_restored_twice_is_kept_from_its_latest_time(path, loop) -> None:
    store = open_store(path, loop)
    store.remember_forwarded("org-a", 3, 10.0)
    commit(store, loop)
    store.remember_forwarded("org-a", 1, 20.0)
    commit(store, loop)
    store.remember_forwarded("org-a", 3, 50.0)  # a resend after a restart, say
    commit(store, loop)
    window = DedupeWindow(store, 100.0)
    assert window.restore(60.0) == 2
    window.expire(130.0)  # horizon 30.0: id 1 goes, id 3 (seen again at 50.0) stays
    assert window.duplicate("org-a", 3) and not window.duplicate("org-a", 1)


def test_a_reopened_store_restores_the_ids_inside_the_window(path, loop) -> None:
    store = open_store(path, loop)
    window = DedupeWindow(store, 100.0)
    for i in range(1, 6):  # a commit each, ids apart: one store row and one run each
        window.remember("org-a", 2 * i, 10.0 * i)
        commit(store, loop)
    window.remember("org-b", 7, 45.0)
    window.expire(135.0)  # horizon 35.0: org-a's 2 to 6 go, in the store too
    commit(store, loop)
    store.close()
    again = DedupeWindow(open_store(path, loop), 100.0)
    assert again.restore(145.0) == 2  # horizon 45.0: org-a's 8 is past it as well
    assert [again.duplicate("org-a", 2 * i) for i in range(1, 6)] == [False, False, False, False, True]
    assert again.duplicate("org-b", 7)


def test_the_window_holds_no_object_the_cyclic_collector_tracks_per_id(path, loop) -> None:
    window = DedupeWindow(open_store(path, loop), 100.0)
    gc.collect()
    before = len(gc.get_objects())
    for i in range(1000):
        window.remember("org-a", 1000 + i, float(i))
    assert len(gc.get_objects()) - before < 50
