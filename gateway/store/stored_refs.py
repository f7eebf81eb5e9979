"""What ``SqliteStore`` keeps in memory of each stored message and queue entry.

A message in several durable queues gets one ``messages`` row: its ``StoredBody`` counts
the queue entries referring to it, and the row goes with the last of them. Each entry's
``StoreRef`` remembers the generations of its writes, which say whether it is on disk
(``SqliteStore.is_durable``), and its pending operation while that may still change in
place (a delivery of an entry not written yet only changes its insert).
"""
from __future__ import annotations

from typing import Optional

__all__ = ["StoredBody", "StoreRef"]


class StoredBody:
    """A message's row: how many stored queue entries refer to it, and its insert
    operation with the generation that holds it."""

    __slots__ = ("message_id", "size", "refs", "gen", "op")

    def __init__(self, message_id: int, size: int, gen: int, op: Optional[list]) -> None:
        self.message_id = message_id
        self.size = size
        self.refs = 0
        self.gen = gen
        self.op = op


class StoreRef:
    """One stored queue entry: its message's ``StoredBody``, the generation of its insert
    (``first_gen``) and of its latest operation (``gen``, with ``op`` itself while that
    generation is open), and whether the disk says it is acquired."""

    __slots__ = ("body", "first_gen", "gen", "op", "acquired")

    def __init__(self, body: StoredBody, gen: int, op: Optional[list], acquired: bool) -> None:
        self.body = body
        self.first_gen = gen
        self.gen = gen
        self.op = op
        self.acquired = acquired
