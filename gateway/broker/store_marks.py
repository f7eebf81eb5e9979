"""Answers that wait for the store: an operation that wrote something durable (a declare,
bind, unbind or delete of a durable entity, a purge of persistent messages) is answered
only once the store has committed it, as a publisher confirm is, so a client never
hears "ok" for a change that a crash right after would undo.

Every face of the gateway answers its changes this way: the 0-9-1 channel's exchange and
queue methods, the 1.0 management nodes, a 1.0 attach that declares its queue, and the
HTTP API. Each takes a :class:`StoreMark` before the change and hands its answer to
:meth:`StoreMark.answer`; a change that wrote nothing (a passive or equivalent declare
whose entity is saved, a transient entity) is answered at once.

A failed commit (disk full, read-only file system) is answered with an error naming the
problem (:func:`not_saved_text`). The change itself stays in effect in memory and the
store writes it again with its next transaction, so it is saved once writes work again;
only a crash before then undoes it.
"""
from __future__ import annotations

from typing import Callable, Optional

from gateway.store.interface import Store

__all__ = ["StoreMark", "not_saved_text", "store_full"]


class StoreMark:
    """The store's write count when an operation began."""

    __slots__ = ("_store", "_writes")

    def __init__(self, store: Store) -> None:
        self._store = store
        self._writes = store.write_count

    @property
    def wrote(self) -> bool:
        """Whether anything was written to the store since the mark."""
        return self._store.write_count != self._writes

    def answer(self, reply: Callable[[Optional[Exception]], None]) -> None:
        """Run ``reply(None)`` now if nothing was written since the mark; else once the
        writes are committed (``None``) or their transaction failed (the
        ``StoreWriteFailed``). Callbacks run in the order they were handed over."""
        if self._store.write_count == self._writes:
            reply(None)
        else:
            self._store.after_commit(reply)


def store_full(error: Exception) -> bool:
    """True when a failed commit ran out of space (a resource limit, not a fault)."""
    return bool(getattr(error, "full", False))


def not_saved_text(what: str, error: Exception) -> str:
    """The error text for a change whose commit failed; ``what`` names the change
    (``queue.declare of queue 'q' in vhost '/'``)."""
    return (f"{what} is in effect but not saved: {error}; the store writes it once writes work "
            f"again (a crash before then undoes it)")
