"""``OutboxBodies``: which of a forwarder's committed entries keep their bodies in memory,
and the bodies that went to disk only (``paged``), read back as the ones ahead are sent.

A collaborator of ``Forwarder`` that owns this state: the bytes of bodies held in memory
(``held``, counted against the broker's memory high watermark through its
``ProducerGate``), the paged entries, oldest first, and the loader that rebuilds a body
read back from the store. The forwarder decides when (see "Memory" in
``forwarder.py``'s docstring); this keeps the counts right whatever it decides. Only
with a persistent store (``load_message``) is anything paged: an in-memory store has no
copy to read back.
"""
from __future__ import annotations

import logging
from collections import deque
from typing import Any, Callable, Optional

from gateway.broker.message import MessageContainer
from gateway.store.interface import StoredMessage

__all__ = ["OutboxBodies"]

log = logging.getLogger(__name__)


class OutboxBodies:
    """See the module docstring. ``gate``: the broker's ``ProducerGate`` (None in tests);
    ``keep_bytes``: bodies held up to which none is paged, however many entries;
    ``container``: the remote, for the log."""

    __slots__ = ("keep_bytes", "held", "paged", "_load", "_gate", "_store", "_container")

    def __init__(self, store: Any, gate: Any, keep_bytes: int, container: str,
                 load_message: Optional[Callable[[StoredMessage], MessageContainer]] = None) -> None:
        self.keep_bytes = keep_bytes
        #: bytes of the bodies in memory
        self.held = 0
        #: committed entries whose bodies are on disk only, oldest first
        self.paged: deque[Any] = deque()
        #: rebuilds a body read back from the store (the broker's message loader)
        self._load = load_message if getattr(store, "persistent", False) else None
        self._gate = gate
        self._store = store
        self._container = container

    def hold(self, size: int) -> None:
        """A body of ``size`` bytes came into memory."""
        self.held += size
        if self._gate is not None:
            self._gate.add(size)

    def drop(self, size: int) -> None:
        """Bodies of ``size`` bytes in all left memory (settled, refused, or paged)."""
        self.held -= size
        if self._gate is not None:
            self._gate.sub(size)

    def pages(self, ready: int, bound: int) -> bool:
        """Whether the next committed entry goes to ``paged``, with ``ready`` entries
        ready and room for ``bound`` of them: once older ones wait on disk, or the bound
        is reached and more than ``keep_bytes`` are held."""
        return self._load is not None and bool(self.paged or (ready >= bound
                                                              and self.held > self.keep_bytes))

    def keeps_all(self, ready: int, count: int, bound: int) -> bool:
        """``pages`` is False for each of ``count`` entries that join ``ready`` now (the
        test once for a commit's batch)."""
        return self._load is None or (not self.paged and (ready + count <= bound
                                                          or self.held <= self.keep_bytes))

    def page_out(self, entry: Any) -> None:
        """``entry`` keeps its body on disk only, behind the other paged ones."""
        self.drop(entry.size)
        entry.message = None
        self.paged.append(entry)

    def page_in(self, room: int) -> tuple[list[Any], int]:
        """Read back the bodies of the oldest ``room`` paged entries: those now in memory,
        and the bytes of any whose row is gone (never expected; logged). A store that
        cannot read leaves them all paged (the next call retries)."""
        paged = self.paged
        entries = [paged[i] for i in range(min(len(paged), room))]
        if not entries:
            return [], 0
        try:
            rows = self._store.read_outbox([e.entry_id for e in entries])
        except Exception as exc:  # noqa: BLE001 - sqlite3.Error: they wait, the next pump retries
            log.error("forwarding to '%s': cannot read the outbox back: %s", self._container, exc)
            return [], 0
        loaded, lost = [], 0
        for entry in entries:
            paged.popleft()
            row = rows.get(entry.entry_id)
            if row is None:  # the row is gone: nothing to send
                log.error("forwarding to '%s': outbox row %d is missing", self._container,
                          entry.entry_id)
                lost += entry.size
                continue
            entry.message = self._load(StoredMessage(row, None))  # type: ignore[misc]
            self.hold(entry.size)
            loaded.append(entry)
        return loaded, lost
