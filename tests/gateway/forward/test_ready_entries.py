"""``ReadyEntries``: taken lowest entry id first, whatever order they came in."""
from __future__ import annotations

import random

import pytest

from gateway.forward.ready_entries import ReadyEntries


class Entry:
    def __init__(self, entry_id: int) -> None:
        self.entry_id = entry_id


def _drain(ready: ReadyEntries) -> list[int]:
    out = []
    while ready:
        out.append(ready.pop().entry_id)
    return out


def test_in_order_entries_stay_in_the_deque() -> None:
    ready = ReadyEntries()
    ready.extend([Entry(i) for i in range(1, 6)])
    ready.push(Entry(6))
    assert len(ready.ordered) == 6 and not ready.early
    assert _drain(ready) == [1, 2, 3, 4, 5, 6]
    with pytest.raises(IndexError):
        ready.pop()


def test_entries_back_out_of_order_are_taken_first_when_lower() -> None:
    """A retry or an entry that was in flight comes back below the deque's head."""
    ready = ReadyEntries()
    ready.extend([Entry(i) for i in (10, 11, 12)])
    ready.push(Entry(4))
    ready.extend([Entry(7), Entry(5)])  # out of order: each goes where it belongs
    assert len(ready) == 6 and sorted(e.entry_id for e in ready) == [4, 5, 7, 10, 11, 12]
    assert _drain(ready) == [4, 5, 7, 10, 11, 12]


def test_any_order_of_pushes_and_pops_is_the_order_of_the_ids() -> None:
    rng = random.Random(45)
    ready = ReadyEntries()
    held: list[int] = []
    taken: list[int] = []
    next_id = 1000
    older = list(range(1000))  # ids are unique: those that come back are drawn from these
    rng.shuffle(older)
    for _ in range(2000):
        action = rng.random()
        if action < 0.45:
            next_id += 1
            ready.push(Entry(next_id))
            held.append(next_id)
        elif action < 0.6 and older:
            back = older.pop()  # an older one back
            ready.push(Entry(back))
            held.append(back)
        elif held:
            lowest = min(held)
            held.remove(lowest)
            taken.append(lowest)
            assert ready.pop().entry_id == lowest
    assert len(ready) == len(held) and sorted(e.entry_id for e in ready) == sorted(held)


def test_remove_takes_out_the_named_entries_from_both_halves() -> None:
    """What a failed outbox COMMIT does to the entries it staged: those named go, in or
    out of order, and the rest still come lowest id first."""
    ready = ReadyEntries()
    ready.extend([Entry(i) for i in (3, 4, 5, 6)])
    ready.push(Entry(1))                       # out of order: in the heap
    ready.push(Entry(2))
    removed = ready.remove({2, 5, 9})
    assert sorted(e.entry_id for e in removed) == [2, 5] and len(ready) == 4
    assert ready.remove(set()) == []
    assert _drain(ready) == [1, 3, 4, 6]
