"""One forwarder per remote container: its outbox, what is in flight, and what a
settlement means for the outbox (sans-I/O; the edge gives it an ``OutboundConnection``
and calls it back through ``OutboundEvents``).

Theory of operation
-------------------
A new entry (``stage``) joins ``ready`` at once and is sent before its outbox row is
committed (issue 45: waiting for the COMMIT cost every forwarded message the commit
thread's wake and the transaction, 0.6 ms p50), unless it would be paged ("Memory"
below): then it, and every entry staged after it, waits for its generation's commit
(``after_commit(durable=False)``), as all did before. The publisher's confirm still waits
for the commit and, with ``store.sync_mode: full``, the log sync (the store's, not the
forwarder's). A failed COMMIT (``_committed`` with an error): the entries of that
generation not yet sent are dropped (from ``ready`` or ``retrying``: no row, their
publishers are refused); those in flight are marked ``unwritten``: an ``accepted`` deletes
a row that does not exist, a release, a rejection or a lost connection drops them, never
retried nor dead-lettered. The remote may then hold a message whose publisher was refused
(at-least-once), as after a failed sync or a power loss before it. A kill -9 after the
COMMIT keeps the row (the log is in the operating system's cache): the restart sends it
again and a receiving gateway drops the duplicate by its forwarded id. Forwarded ids
cannot be reused after such a loss: they start from the boot time. A remote's
``accepted`` may come before the COMMIT: while the insert waits in the open generation
it is cancelled, else the deletion goes to a later transaction than the insert, so it is
never on disk without it. Entries wait in ``ready`` (entry id order) until the connection
is up and has credit (the remote's link credit, at most ``credit`` in flight, or the most
the remote granted at once if that is more); each is sent once and
kept in ``in_flight`` until the remote settles it (what one read of the connection
settled is handled together, ``settled_many``, and the room it frees is used once):

- ``accepted`` (a confirm ack): the outbox row is removed;
- ``released`` (``modified`` delivery-failed): counted as an attempt and retried after a
  backoff (``reconnect_initial`` doubling with jitter up to ``reconnect_max``); after
  ``MAX_RELEASES`` attempts it is dead-lettered like a rejected one, so nothing is
  retried forever;
- ``rejected`` (a nack, a return): moved to the local dead-letter queue of this remote
  with the remote's error, and the stream goes on.

Memory: with a persistent store, at most ``in_flight_cap`` ready entries (the ``credit``
setting, or the most the remote granted at once: what one grant takes) keep their bodies
in memory, besides those about to be sent and those in flight, unless the bodies the
forwarder holds (``bodies.held``) take no more than ``keep_bytes`` (4 MiB) in all; newer
committed entries wait in ``bodies.paged`` (``outbox_bodies.OutboxBodies``) with their bodies on disk only, and are read back
(``store.read_outbox``) as the ready ones go. So only the bodies near the head of the
outbox count against the memory high watermark, and a long outage of a remote (no
grant: ``credit`` bodies, or 4 MiB of them) does not block publishers by memory. (At
``credit`` while the remote granted more, a burst larger than the setting was read back
from the store while the remote waited for it; without the 4 MiB, a backlog of small
messages was read back row by row, at a cost far above the memory it saved.)

A lost connection puts everything in flight back in front of ``ready`` (not an attempt:
the remote never said no). ``pump`` sends at most ``SEND_SLICE`` entries per turn of the
loop and goes on at the next turn (``defer``), so the remote works on the first while the
next are rendered. States for operators: ``connecting``, ``up``, ``backing off``
(with the last error) and ``blocked`` (up, messages waiting, no credit).

Back-pressure (``flow``, a ``flow.PublishFlow``): while the link is up and more than
``max_unsent`` entries wait to be sent (staged, ready or paged: not those in flight or
retrying; looked at as each commit makes entries ready and as entries go), a publish into
this outbox pauses its client (0-9-1: the connection is not
read after it; 1.0: the link gets no more credit) until no more than half wait. Where the
pipeline is slower than the publishers (the remote's intake, its consumers: a receiving
gateway's credit follows its queue's backlog), the backlog then waits in the publishers
and not in the middle, where every message behind it waited for it (issue 45: p50 52 ms
unpaced, against a shovel's 12). A remote that is down releases them: the outbox takes
everything while it cannot be sent (store-and-forward), only a live, slow remote pushes
back, as RabbitMQ's credit flow does.
"""
from __future__ import annotations

import heapq
import logging
from typing import Any, Callable, Optional, Sequence

from gateway import timeline
from gateway.broker.flow import PublishFlow
from gateway.broker.message import MessageContainer
from gateway.connection_log import DEFAULT_INTERVAL, RateLimitedLog
from gateway.forward.backoff import retry_delay
from gateway.forward.outbox_bodies import OutboxBodies
from gateway.forward.outbound import ForwardOutcome, OutboundConnection, RemoteSettings, Settlement
from gateway.forward.ready_entries import ReadyEntries
from gateway.forward.remote_addresses import RemoteAddresses
from gateway.forward.remote_status import remote_status
from gateway.store.interface import StoredMessage

__all__ = ["Forwarder", "OutboxEntry", "MAX_RELEASES", "REJECTED",
           "RELEASED_TOO_OFTEN", "REMOTE_NOT_CONFIGURED"]

log = logging.getLogger(__name__)

#: releases by the remote after which an entry is dead-lettered
MAX_RELEASES = 20
#: entries sent per turn of the loop at most: the remote starts on the first ones while
#: the next are rendered (one turn sending the whole credit window left both sides
#: waiting for each other in turn). 128, not 32: with 32 a turn of the loop took in a
#: publisher's read of a few hundred messages and sent 32, so the outbox grew while
#: the publisher ran; kind amqp091 to RabbitMQ, 100 B, 10,000 messages, 8 rounds
#: alternating (load 5-7): p50 22 ms [15-56] instead of 118 [24-402], 29 us of CPU a
#: message instead of 35; at 4 KiB and for kind gateway no worse (issue 45)
SEND_SLICE = 128

_ACCEPTED = ForwardOutcome.ACCEPTED
#: bytes of bodies an outbox keeps in memory whatever their number (see "Memory"): of
#: 100 B messages, some 40,000 entries (about 30 MB of objects; 1 MiB was short of a
#: loaded 50k-message run's backlog, which was then read back all the same)
KEEP_BYTES = 4 << 20


class OutboxEntry:
    """One message waiting for ``remote``; ``node`` is what the remote resolves."""

    __slots__ = ("entry_id", "node", "message", "annotations", "attempts", "not_before", "size",
                 "created_at", "address")

    def __init__(self, entry_id: int, node: str, message: MessageContainer, annotations: dict,
                 attempts: int = 0) -> None:
        self.entry_id = entry_id
        self.node = node
        #: None while the body is on disk only (``Forwarder.bodies``)
        self.message: Optional[MessageContainer] = message
        self.size = message.size
        self.created_at = message.created_at
        self.annotations = annotations
        self.attempts = attempts
        self.not_before = 0.0
        #: where the remote takes it (``RemoteAddresses``), set once the forwarder
        #: holds it: the entry is then itself what the connection sends (an
        #: ``outbound.OutboundItem``), with no object made a message to send it
        self.address = ""


#: (remote container, entry, reason, the remote's error, now)
DeadLetter = Callable[[str, OutboxEntry, str, str, float], None]

#: the reasons a forwarded message is dead-lettered (``x-opt-forward-reason``): the remote
#: rejected it; it released it ``MAX_RELEASES`` times; its remote left the configuration
REJECTED = "rejected"
RELEASED_TOO_OFTEN = "released_too_often"
REMOTE_NOT_CONFIGURED = "remote_not_configured"


class Forwarder:
    """See the module docstring. ``store``: where the outbox rows are (removed and
    updated from here; ``TransferService`` adds them); ``dead_letter(container, entry,
    error, now)``
    moves an entry to the local dead-letter queue; ``clock()`` is the loop's time."""

    def __init__(self, settings: RemoteSettings, store: Any, dead_letter: DeadLetter,
                 clock: Callable[[], float], ledger: Any = None, gate: Any = None,
                 load_message: Optional[Callable[[StoredMessage], MessageContainer]] = None,
                 log_interval: float = DEFAULT_INTERVAL, keep_bytes: int = KEEP_BYTES) -> None:
        self.settings = settings
        #: the bodies in memory and those paged out (see "Memory" above); with a
        #: persistent store, bodies beyond ``credit`` ready entries stay on disk only, and
        #: those in memory count against the memory high watermark (``gate``, the
        #: broker's ``ProducerGate``; None in tests) like queued ones
        self.bodies = OutboxBodies(store, gate, keep_bytes, settings.container, load_message)
        #: a ``ForwardLedger`` (or None): forwarded and forward_settled events
        self._ledger = ledger
        self.container = settings.container
        #: where each entry goes at the remote
        self.addresses = RemoteAddresses(settings.kind, settings.address)
        self._store = store
        self._dead_letter = dead_letter
        self._clock = clock
        self.connection: Optional[OutboundConnection] = None
        #: ``defer(fn)`` runs ``fn`` on the loop's next turn (the edge's); None: ``pump``
        #: sends all that credit allows at once (tests)
        self.defer: Optional[Callable[[Callable[[], None]], None]] = None
        self._pump_deferred = False
        #: entries with their bodies (committed, or staged and sent early), taken lowest
        #: entry id first
        self.ready = ReadyEntries()
        #: new entries of the store's open generation, (sent early, waiting for its
        #: commit), and how many wait for a commit in all generations
        self._staged: Optional[tuple[list[OutboxEntry], list[OutboxEntry]]] = None
        self._staged_gen = -1
        self.staged = 0
        #: the entries waiting for their commit, a list per generation not yet committed
        self._waiting: list[list[OutboxEntry]] = []
        #: ids of entries in flight whose outbox rows' COMMIT failed (``_drop_unwritten``)
        self.unwritten: set[int] = set()
        self.retrying: list[tuple[float, int, OutboxEntry]] = []  # a heap by due time
        #: back-pressure toward this remote's publishers: paused while more than
        #: ``max_unsent`` entries wait to be sent on a link that is up ("Back-pressure")
        self.flow = PublishFlow(settings.max_unsent, f"'{settings.container}'")
        self.in_flight: dict[int, OutboxEntry] = {}
        self.up = False
        #: what the remote lets us send (its link credit, less what went since it said so)
        self.remote_credit = 0
        #: the most the remote granted at once on this connection: the in-flight cap is
        #: never below it (``in_flight_cap``)
        self.granted = 0
        self.state = "connecting"
        self.last_error: Optional[str] = None
        self.bytes = 0
        self.forwarded = 0
        self.acked = 0
        self.retried = 0
        self.dead_lettered = 0
        #: one line per interval about dead letters (a remote that refuses a stream of
        #: 20,000 messages must not write 20,000 lines); the rest counted by reason
        self._dead_letter_log = RateLimitedLog(interval=log_interval)

    # -- the outbox --------------------------------------------------------------------
    def add(self, entry: OutboxEntry) -> None:
        """An entry whose outbox row is committed (restored at start); sent at once if the
        connection has credit."""
        self._hold(entry)
        self._ready(entry, self._memory_bound())
        self.pump()

    def _memory_bound(self) -> int:
        """Ready entries that keep their bodies: ``in_flight_cap``, and those that go out
        at once (see "Memory" in the module docstring)."""
        return self.in_flight_cap + self.available

    def _ready(self, entry: OutboxEntry, bound: int) -> None:
        """A committed entry joins ``ready``, or ``paged`` (its body dropped from memory)
        once ``bound`` entries are ready or older ones wait on disk."""
        if self.bodies.pages(len(self.ready), bound):
            self.bodies.page_out(entry)
        else:
            self.ready.push(entry)

    def _page_in(self) -> None:
        """Read back the bodies of the oldest paged entries, up to ``in_flight_cap`` ready."""
        loaded, lost = self.bodies.page_in(self.in_flight_cap - len(self.ready))
        self.bytes -= lost
        for entry in loaded:
            self.ready.push(entry)

    def stage(self, entry: OutboxEntry) -> None:
        """A new entry whose outbox row the caller just wrote: sent at once, before the
        store has committed that row, unless it would be paged (then it waits for the
        commit, and so do the entries after it); see the module docstring."""
        # ``_hold``, inline: a call less for every message published into the outbox
        addresses = self.addresses
        entry.address = addresses.fixed or addresses.known.get(entry.node) or addresses.learn(entry.node)
        self.bytes += entry.size
        bodies = self.bodies
        bodies.hold(entry.size)
        store = self._store
        gen = store.latest_generation
        batch = self._staged
        if batch is None or gen != self._staged_gen:
            batch = self._staged = ([], [])
            self._staged_gen = gen
            self._waiting.append(batch[1])
            # may run at once; committed, not synced: the publisher's confirm waits for that
            store.after_commit(lambda error: self._committed(batch, error), durable=False)
        if self.staged or ((bodies.paged or bodies.held > bodies.keep_bytes)
                           and bodies.pages(len(self.ready), self._memory_bound())):
            batch[1].append(entry)  # would be paged: its body is read back once committed
            self.staged += 1
            return
        batch[0].append(entry)
        self.ready.push(entry)
        if not self._pump_deferred and self.up:  # one send for what this turn stages
            if self.defer is None:
                self.pump()
            else:
                self._pump_deferred = True
                self.defer(self._deferred_pump)

    def _committed(self, batch: tuple[list[OutboxEntry], list[OutboxEntry]],
                   error: Optional[Exception]) -> None:
        """Generation ``batch`` (its entries sent early, those that waited) is committed,
        or failed with ``error``."""
        if self._staged is batch:
            self._staged = None
        sent_early, waiting = batch
        lists = self._waiting
        for i, held in enumerate(lists):  # (commits come in order: the first, as a rule)
            if held is waiting:
                del lists[i]
                break
        self.staged -= len(waiting)
        if error is not None:  # not in the outbox: the publishers hear of it
            for entry in waiting:
                self._release(entry)
            if sent_early:
                self._drop_unwritten(sent_early)
            return
        if waiting:
            ready = self.ready
            bound = self._memory_bound()
            if self.bodies.keeps_all(len(ready), len(waiting), bound):
                ready.extend(waiting)  # all keep their bodies (``_ready``'s test, once for all)
            else:
                for entry in waiting:
                    self._ready(entry, bound)
        marks = timeline.recorder
        if marks is not None:
            marks.mark("outbox-committed", len(sent_early) + len(waiting))
        if waiting:
            self.pump()
        if self.up:  # (once a commit: the next publishes into the outbox see it)
            self.flow.update(self.unsent)

    def _drop_unwritten(self, entries: list[OutboxEntry]) -> None:
        """Entries sent early whose outbox rows' COMMIT failed: those not sent (or waiting
        for a retry) go; those in flight are only marked ``unwritten``, their settlement
        never retried nor dead-lettered (their publishers were refused)."""
        ids = {entry.entry_id for entry in entries}
        for entry in self.ready.remove(ids):
            self._release(entry)
        kept = [item for item in self.retrying if item[1] not in ids]
        if len(kept) != len(self.retrying):
            for _, _, entry in self.retrying:
                if entry.entry_id in ids:
                    self._release(entry)
            heapq.heapify(kept)
            self.retrying = kept
        self.unwritten.update(ids.intersection(self.in_flight))
        log.warning("forwarding to '%s': the outbox rows of %d message(s) were not written; "
                    "those not yet sent are dropped (their publishers are refused)",
                    self.container, len(entries))

    def _hold(self, entry: OutboxEntry) -> None:
        """Outbox bodies in memory count against the memory high watermark like queued
        ones (``bytes`` counts every body, on disk or not)."""
        addresses = self.addresses
        entry.address = addresses.fixed or addresses.known.get(entry.node) or addresses.learn(entry.node)
        self.bytes += entry.size
        self.bodies.hold(entry.size)

    def _release(self, entry: OutboxEntry) -> None:
        self.bytes -= entry.size
        if entry.message is not None:
            self.bodies.drop(entry.size)

    @property
    def depth(self) -> int:
        return (len(self.ready) + len(self.bodies.paged) + len(self.retrying) + len(self.in_flight)
                + self.staged)

    def holds(self, entry_id: int) -> bool:
        """Whether entry ``entry_id`` is in this outbox (a linear look: for a shovel's
        redelivered entry, which the outbox may have from before a crash)."""
        return (entry_id in self.in_flight or any(e.entry_id == entry_id for e in self.ready)
                or any(e.entry_id == entry_id for e in self.bodies.paged)
                or any(e.entry_id == entry_id for waiting in self._waiting for e in waiting)
                or any(e.entry_id == entry_id for _, _, e in self.retrying))

    def pump(self) -> None:
        """Send what credit allows, at most ``SEND_SLICE`` entries per turn of the loop
        when ``defer`` is set (the rest on the next turns)."""
        connection = self.connection
        if not self.up or connection is None or self._pump_deferred:
            return  # (a continuation is due: it sends the next slice)
        ready = self.ready
        if self.bodies.paged and len(ready) <= self.in_flight_cap // 2:
            self._page_in()
        budget = SEND_SLICE if self.defer is not None else -1
        in_flight = self.in_flight
        room = min(self.remote_credit, self.in_flight_cap - len(in_flight))
        batch: list[OutboxEntry] = []
        pop = ready.pop
        while room > 0:
            waiting = len(ready)
            if not waiting and self.bodies.paged:
                self._page_in()
                waiting = len(ready)
            if not waiting:
                break
            if budget == 0:
                self._pump_deferred = True
                self.defer(self._deferred_pump)
                break
            n = min(room, waiting) if budget < 0 else min(room, waiting, budget)
            room -= n
            if budget > 0:
                budget -= n
            for _ in range(n):
                entry = pop()
                in_flight[entry.entry_id] = entry
                batch.append(entry)
        if batch:
            # counted before the sending: a refusal in it settles (and pumps) at once
            self.remote_credit -= len(batch)
            self.forwarded += len(batch)
            if self._ledger is not None:
                self._ledger.forwarded(self.container, batch, self._clock())
            connection.send_many(batch)
        self.state = "blocked" if (ready or self.bodies.paged) and self.available <= 0 else "up"
        if self.flow.paused:
            self.flow.update(self.unsent)
        marks = timeline.recorder
        if marks is not None and batch:
            marks.mark("sent", len(batch))

    @property
    def unsent(self) -> int:
        """Entries not yet sent (but those waiting for a retry): what back-pressure bounds."""
        return self.staged + len(self.ready) + len(self.bodies.paged)

    @property
    def in_flight_cap(self) -> int:
        """Entries in flight at most: the ``credit`` setting, or what the remote granted
        at once when that is more (a remote that grants a larger window has room for
        it; a cap below its grant left the two sides taking turns)."""
        granted = self.granted
        credit = self.settings.credit
        return granted if granted > credit else credit

    @property
    def available(self) -> int:
        """How many more may be sent now: the remote's credit, and the in-flight cap
        less what is in flight (which every settlement lowers)."""
        return max(0, min(self.remote_credit, self.in_flight_cap - len(self.in_flight)))

    def _deferred_pump(self) -> None:
        self._pump_deferred = False
        self.pump()

    def tick(self, now: float) -> None:
        """Retries whose backoff is over go back to ``ready``; dead letters left out of
        the log are summarised."""
        self._dead_letter_log.flush(now)
        retrying = self.retrying
        moved = False
        while retrying and retrying[0][0] <= now:
            _, _, entry = heapq.heappop(retrying)
            self.ready.push(entry)
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
        self.remote_credit = 0
        self.granted = 0
        self.state = "backing off"
        self.last_error = error
        self.flow.release()  # an unreachable remote never holds its publishers back
        unwritten = self.unwritten
        for entry in self.in_flight.values():
            if unwritten and entry.entry_id in unwritten:  # its publisher was refused
                unwritten.discard(entry.entry_id)
                self._release(entry)
            else:
                self.ready.push(entry)
        self.in_flight.clear()

    def connecting(self) -> None:
        self.state = "connecting"

    def credit(self, available: int, window: int = 0) -> None:
        self.remote_credit = available = max(0, available)
        grant = window if window > available else available
        if grant > self.granted:
            self.granted = grant
        marks = timeline.recorder
        if marks is not None:
            marks.mark("credit", available)
        self.pump()

    def settled(self, settlement: Settlement) -> None:
        self.settled_many((settlement,))

    def settled_many(self, settlements: Sequence[Settlement]) -> None:
        """What the remote settled in one read: the outbox follows each, and the freed
        room is used once, for the lot (a settlement at a time sent one entry per
        settlement). The accepted ones, the usual lot, leave the outbox together: one
        ledger call, one gate and one store call for them all."""
        now = self._clock()
        in_flight = self.in_flight
        accepted: list[OutboxEntry] = []
        for settlement in settlements:
            entry = in_flight.pop(settlement.entry_id, None)
            if entry is None:
                continue
            if settlement.outcome is _ACCEPTED:
                accepted.append(entry)
            else:
                self._settle_other(entry, settlement, now)
        if accepted:
            if self.unwritten:  # (their deletions delete nothing)
                self.unwritten.difference_update(e.entry_id for e in accepted)
            if self._ledger is not None:
                self._ledger.settled(self.container, accepted, _ACCEPTED, None, now)
            self.acked += len(accepted)
            self._remove_all(accepted)
        marks = timeline.recorder
        if marks is not None:
            marks.mark("settled", len(settlements))
        self.pump()

    def _settle_other(self, entry: OutboxEntry, settlement: Settlement, now: float) -> None:
        """A rejection (dead-lettered) or a release (retried after a backoff)."""
        outcome = settlement.outcome
        if self._ledger is not None:
            self._ledger.settled(self.container, (entry,), outcome, settlement.error, now)
        if self.unwritten and entry.entry_id in self.unwritten:  # no row: nothing to retry
            self.unwritten.discard(entry.entry_id)
            self._release(entry)
            return
        if outcome is ForwardOutcome.REJECTED:
            self._dead(entry, REJECTED, settlement.error or "rejected by the remote", now)
        else:
            entry.attempts += 1
            if entry.attempts >= MAX_RELEASES:
                self._dead(entry, RELEASED_TOO_OFTEN, f"released by the remote {entry.attempts} times"
                                  f"{': ' + settlement.error if settlement.error else ''}", now)
            else:
                self.retried += 1
                self._store.update_outbox(entry.entry_id, entry.attempts)
                s = self.settings
                due = now + retry_delay(s.reconnect_initial, s.reconnect_max, entry.attempts)
                heapq.heappush(self.retrying, (due, entry.entry_id, entry))

    # -- internals ---------------------------------------------------------------------
    def _remove(self, entry: OutboxEntry) -> None:
        self._release(entry)
        self._store.remove_outbox(entry.entry_id)

    def _remove_all(self, entries: list[OutboxEntry]) -> None:
        """``_remove`` for each of ``entries`` (sent, so their bodies are in memory)."""
        size = 0
        for entry in entries:
            size += entry.size
        self.bytes -= size
        self.bodies.drop(size)
        self._store.remove_outbox_many([entry.entry_id for entry in entries])

    def _dead(self, entry: OutboxEntry, reason: str, error: str, now: float) -> None:
        self._dead_letter_log.warning(
            log, f"forwarding to '{self.container}': messages dead-lettered", now,
            "forwarding to '%s': message %d for '%s' dead-lettered (%s): %s", self.container,
            entry.entry_id, entry.node, reason, error, tally=error[:120])
        self.dead_lettered += 1
        #: an operator reads why the last one went (it was null after dead letters)
        self.last_error = f"message {entry.entry_id} for '{entry.node}' dead-lettered: {error}"
        self._dead_letter(self.container, entry, reason, error, now)
        self._remove(entry)

    def status(self) -> dict:
        """What management and the metrics show of this remote (``remote_status``)."""
        return remote_status(self, self._clock())
