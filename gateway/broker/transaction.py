"""``TransactionWork``: what one open transaction holds until it is committed or rolled back.

The one buffer of both protocols' transactions: a 0-9-1 channel after ``tx.select``
(``amqp091.channel_publish``) and a 1.0 transaction declared at a coordinator
(``amqp10.coordinator``). Both hold the same two kinds of work, in arrival order, because
a commit must apply them in that order (a publish, then an ack of a delivery it caused):

* a *post*: a message published under the transaction, routed only at commit, so
  nobody sees it before; dropped on rollback;
* a *retirement*: a settlement of an acquired delivery (0-9-1 ack/nack/reject, a 1.0
  disposition with ``transactional-state``), applied only at commit; on rollback the
  delivery is outstanding again (each protocol decides what that means for its client).

What a post or a retirement is stays the protocol's (its own record types): the buffer
keeps them opaque and only knows which is which. Nothing here touches a queue.
"""
from __future__ import annotations

import enum
from typing import Generic, Iterator, TypeVar

__all__ = ["TransactionWork", "WorkKind"]

P = TypeVar("P")
R = TypeVar("R")


class WorkKind(enum.Enum):
    POST = "post"
    RETIRE = "retire"


class TransactionWork(Generic[P, R]):
    """The posts (``P``) and retirements (``R``) of one open transaction, in order."""

    __slots__ = ("_work",)

    def __init__(self) -> None:
        self._work: list[tuple[WorkKind, P | R]] = []

    def __len__(self) -> int:
        return len(self._work)

    def post(self, item: P) -> None:
        """Hold a publish until the commit."""
        self._work.append((WorkKind.POST, item))

    def retire(self, item: R) -> None:
        """Hold a settlement until the commit."""
        self._work.append((WorkKind.RETIRE, item))

    def take(self) -> list[tuple[WorkKind, P | R]]:
        """Everything held, in arrival order (to commit it); the buffer is empty after."""
        work, self._work = self._work, []
        return work

    def retirements(self) -> Iterator[R]:
        """The settlements held (what a rollback gives back), in arrival order."""
        return (item for kind, item in self._work if kind is WorkKind.RETIRE)  # type: ignore[misc]
