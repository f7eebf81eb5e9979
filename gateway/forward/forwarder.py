"""One forwarder per remote container: its outbox, what is in flight, and what a
settlement means for the outbox (sans-I/O; the edge gives it an ``OutboundConnection``
and calls it back through ``OutboundEvents``).

Theory of operation
-------------------
Entries wait in ``ready`` (entry id order) until the connection is up and has credit
(the remote's link credit, at most ``credit`` in flight); each is sent once and kept in
``in_flight`` until the remote settles it:

- ``accepted`` (a confirm ack): the outbox row is removed;
- ``released`` (``modified`` delivery-failed): counted as an attempt and retried after a
  backoff (``reconnect_initial`` doubling with jitter up to ``reconnect_max``); after
  ``MAX_RELEASES`` attempts it is dead-lettered like a rejected one, so nothing is
  retried forever;
- ``rejected`` (a nack, a return): moved to the local dead-letter queue of this remote
  with the remote's error, and the stream goes on.

A lost connection puts everything in flight back in front of ``ready`` (not an attempt:
the remote never said no). States for operators: ``connecting``, ``up``, ``backing off``
(with the last error) and ``blocked`` (up, messages waiting, no credit).
"""
from __future__ import annotations

import heapq
import logging
from typing import Any, Callable, Optional

from gateway.broker.message import MessageContainer
from gateway.forward.backoff import retry_delay
from gateway.forward.outbound import (ForwardOutcome, OutboundConnection, OutboundMessage,
                                      RemoteSettings, Settlement)

__all__ = ["Forwarder", "OutboxEntry", "MAX_RELEASES", "TRANSFER_ADDRESS"]

log = logging.getLogger(__name__)

#: releases by the remote after which an entry is dead-lettered
MAX_RELEASES = 20
#: where ``kind: gateway`` sends: the remote's transfer service
TRANSFER_ADDRESS = "amqp$transfer"


class OutboxEntry:
    """One message waiting for ``remote``; ``node`` is what the remote resolves."""

    __slots__ = ("entry_id", "node", "message", "annotations", "attempts", "not_before")

    def __init__(self, entry_id: int, node: str, message: MessageContainer, annotations: dict,
                 attempts: int = 0) -> None:
        self.entry_id = entry_id
        self.node = node
        self.message = message
        self.annotations = annotations
        self.attempts = attempts
        self.not_before = 0.0

    def __lt__(self, other: "OutboxEntry") -> bool:
        return self.entry_id < other.entry_id


DeadLetter = Callable[[str, OutboxEntry, str, float], None]


class Forwarder:
    """See the module docstring. ``store``: where the outbox rows are (removed and
    updated from here; ``TransferService`` adds them); ``dead_letter(container, entry,
    error, now)``
    moves an entry to the local dead-letter queue; ``clock()`` is the loop's time."""

    def __init__(self, settings: RemoteSettings, store: Any, dead_letter: DeadLetter,
                 clock: Callable[[], float], ledger: Any = None, gate: Any = None) -> None:
        self.settings = settings
        #: the broker's ``ProducerGate``: outbox bodies count against the memory high
        #: watermark like queued ones (a long outage blocks publishers, it does not
        #: exhaust memory); None in tests
        self._gate = gate
        #: a ``ForwardLedger`` (or None): forwarded and forward_settled events
        self._ledger = ledger
        self.container = settings.container
        self._store = store
        self._dead_letter = dead_letter
        self._clock = clock
        self.connection: Optional[OutboundConnection] = None
        self.ready: list[OutboxEntry] = []          # a heap by entry id
        self.retrying: list[tuple[float, int, OutboxEntry]] = []  # a heap by due time
        self.in_flight: dict[int, OutboxEntry] = {}
        self.up = False
        self.available = 0
        self.state = "connecting"
        self.last_error: Optional[str] = None
        self.bytes = 0
        self.forwarded = 0
        self.acked = 0
        self.retried = 0
        self.dead_lettered = 0

    # -- the outbox --------------------------------------------------------------------
    def add(self, entry: OutboxEntry) -> None:
        """A new (or restored) entry; sent at once if the connection has credit."""
        self.bytes += entry.message.size
        if self._gate is not None:
            self._gate.add(entry.message.size)
        heapq.heappush(self.ready, entry)
        self.pump()

    @property
    def depth(self) -> int:
        return len(self.ready) + len(self.retrying) + len(self.in_flight)

    def oldest_created_at(self) -> Optional[float]:
        times = [e.message.created_at for e in self.in_flight.values()]
        if self.ready:
            times.append(min(e.message.created_at for e in self.ready))
        times.extend(e.message.created_at for _, _, e in self.retrying)
        return min(times) if times else None

    def holds(self, entry_id: int) -> bool:
        """Whether entry ``entry_id`` is in this outbox (a linear look: for a shovel's
        redelivered entry, which the outbox may have from before a crash)."""
        return (entry_id in self.in_flight or any(e.entry_id == entry_id for e in self.ready)
                or any(e.entry_id == entry_id for _, _, e in self.retrying))

    def address_for(self, node: str) -> str:
        s = self.settings
        if s.kind == "gateway":
            return TRANSFER_ADDRESS
        return s.address.replace("{node}", node)

    def pump(self) -> None:
        """Send what credit allows."""
        connection = self.connection
        if not self.up or connection is None:
            return
        ready = self.ready
        while ready and self.available > 0:
            entry = heapq.heappop(ready)
            self.available -= 1
            self.in_flight[entry.entry_id] = entry
            self.forwarded += 1
            connection.send(OutboundMessage(entry.entry_id, entry.node, self.address_for(entry.node),
                                            entry.message, entry.annotations))
            if self._ledger is not None:
                self._ledger.forwarded(self.container, entry, self._clock())
        self.state = "blocked" if ready and self.available <= 0 else "up"

    def tick(self, now: float) -> None:
        """Retries whose backoff is over go back to ``ready``."""
        retrying = self.retrying
        moved = False
        while retrying and retrying[0][0] <= now:
            _, _, entry = heapq.heappop(retrying)
            heapq.heappush(self.ready, entry)
            moved = True
        if moved:
            self.pump()

    # -- OutboundEvents ----------------------------------------------------------------
    def connection_up(self) -> None:
        log.info("forwarding to '%s': connected to %s:%d (%s)", self.container,
                 self.settings.host, self.settings.port, self.settings.kind)
        self.up = True
        self.state = "up"
        self.last_error = None
        self.pump()

    def connection_down(self, error: str) -> None:
        if self.up or self.last_error != error:
            log.warning("forwarding to '%s': %s; %d message(s) wait", self.container, error,
                        self.depth)
        self.up = False
        self.available = 0
        self.state = "backing off"
        self.last_error = error
        for entry in self.in_flight.values():
            heapq.heappush(self.ready, entry)
        self.in_flight.clear()

    def connecting(self) -> None:
        self.state = "connecting"

    def credit(self, available: int) -> None:
        self.available = max(0, min(available, self.settings.credit - len(self.in_flight)))
        self.pump()

    def settled(self, settlement: Settlement) -> None:
        entry = self.in_flight.pop(settlement.entry_id, None)
        if entry is None:
            return
        outcome = settlement.outcome
        now = self._clock()
        if self._ledger is not None:
            self._ledger.settled(self.container, entry, outcome, settlement.error, now)
        if outcome is ForwardOutcome.ACCEPTED:
            self.acked += 1
            self._remove(entry)
        elif outcome is ForwardOutcome.REJECTED:
            self._dead(entry, settlement.error or "rejected by the remote", now)
        else:
            entry.attempts += 1
            if entry.attempts >= MAX_RELEASES:
                self._dead(entry, f"released by the remote {entry.attempts} times"
                                  f"{': ' + settlement.error if settlement.error else ''}", now)
            else:
                self.retried += 1
                self._store.update_outbox(entry.entry_id, entry.attempts)
                s = self.settings
                due = now + retry_delay(s.reconnect_initial, s.reconnect_max, entry.attempts)
                heapq.heappush(self.retrying, (due, entry.entry_id, entry))
        self.pump()

    # -- internals ---------------------------------------------------------------------
    def _remove(self, entry: OutboxEntry) -> None:
        self.bytes -= entry.message.size
        if self._gate is not None:
            self._gate.sub(entry.message.size)
        self._store.remove_outbox(entry.entry_id)

    def _dead(self, entry: OutboxEntry, error: str, now: float) -> None:
        log.warning("forwarding to '%s': message %d dead-lettered: %s", self.container,
                    entry.entry_id, error)
        self.dead_lettered += 1
        self._dead_letter(self.container, entry, error, now)
        self._remove(entry)

    def status(self) -> dict:
        """What management and the metrics show of this remote."""
        oldest = self.oldest_created_at()
        return {
            "container": self.container, "kind": self.settings.kind,
            "host": self.settings.host, "port": self.settings.port,
            "state": self.state, "last_error": self.last_error,
            "outbox_depth": self.depth, "outbox_bytes": self.bytes,
            "outbox_oldest_age": None if oldest is None else max(0.0, self._clock() - oldest),
            "in_flight": len(self.in_flight), "credit": self.available,
            "forwarded": self.forwarded, "acked": self.acked, "retried": self.retried,
            "dead_lettered": self.dead_lettered,
        }
