"""DedupeWindow: ids are duplicates while inside the window, per origin; expiry forgets the
old ones in memory and in the store; a reopened store restores the ids still inside."""
from __future__ import annotations

import gc

from gateway.forward.dedupe import DedupeWindow
from tests.gateway.store.test_sqlite import commit, open_store, path  # noqa: F401 - path: a fixture


def test_ids_are_duplicates_per_origin_until_they_leave_the_window(path, loop) -> None:
    store = open_store(path, loop)
    window = DedupeWindow(store, 100.0)
    window.remember("org-a", 1, 10.0)
    window.remember("org-a", 2, 20.0)
    window.remember("org-c", 1, 30.0)
    assert window.duplicate("org-a", 1) and window.duplicate("org-c", 1)
    assert not window.duplicate("org-c", 2) and not window.duplicate("org-x", 1)
    assert window.dropped == 2 and len(window) == 3
    window.expire(115.0)  # the horizon 15.0: org-a's id 1 only
    assert not window.duplicate("org-a", 1)
    assert window.duplicate("org-a", 2) and window.duplicate("org-c", 1) and len(window) == 2
    window.expire(125.0)  # org-a has nothing left inside
    assert not window.duplicate("org-a", 2) and window.duplicate("org-c", 1) and len(window) == 1
    commit(store, loop)
    store.close()


def test_an_id_restored_twice_is_kept_from_its_latest_time(path, loop) -> None:
    store = open_store(path, loop)
    store.remember_forwarded("org-a", 1, 10.0)
    commit(store, loop)
    store.remember_forwarded("org-a", 2, 20.0)
    commit(store, loop)
    store.remember_forwarded("org-a", 1, 50.0)  # a resend after a restart, say
    commit(store, loop)
    window = DedupeWindow(store, 100.0)
    assert window.restore(60.0) == 2
    window.expire(130.0)  # horizon 30.0: id 2 goes, id 1 (seen again at 50.0) stays
    assert window.duplicate("org-a", 1) and not window.duplicate("org-a", 2)


def test_a_reopened_store_restores_the_ids_inside_the_window(path, loop) -> None:
    store = open_store(path, loop)
    window = DedupeWindow(store, 100.0)
    for i in range(1, 6):  # a commit each: one store row each (a run in one commit shares a row)
        window.remember("org-a", i, 10.0 * i)
        commit(store, loop)
    window.remember("org-b", 7, 45.0)
    window.expire(135.0)  # horizon 35.0: org-a's 1 to 3 go, in the store too
    commit(store, loop)
    store.close()
    again = DedupeWindow(open_store(path, loop), 100.0)
    assert again.restore(145.0) == 2  # horizon 45.0: org-a's 4 is past it as well
    assert [again.duplicate("org-a", i) for i in range(1, 6)] == [False, False, False, False, True]
    assert again.duplicate("org-b", 7)


def test_the_window_holds_no_object_the_cyclic_collector_tracks_per_id(path, loop) -> None:
    window = DedupeWindow(open_store(path, loop), 100.0)
    gc.collect()
    before = len(gc.get_objects())
    for i in range(1000):
        window.remember("org-a", 1000 + i, float(i))
    assert len(gc.get_objects()) - before < 50
