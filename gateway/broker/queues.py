"""Queue: a weak-FIFO store of messages with states, TTL, limits and dead-lettering.

Theory of operation
-------------------
Every message routed here becomes a :class:`QueuedMessage` (an *entry*) with a ``seq``
that grows with every enqueue. An entry is AVAILABLE (waiting, in a per-priority deque
kept sorted by ``seq``), ACQUIRED (handed to a consumer or ``get`` with ack, unsettled,
kept in a dict by ``seq``) or GONE (settled, expired, dropped, dead-lettered, purged).

* ``enqueue`` appends at the tail and dispatches at once, so a waiting consumer gets the
  message before any TTL-0 or max-length check drops it (as RabbitMQ does). While the
  queue is *stalled for credit* (its last dispatch found no acquiring consumer with credit
  and none refusing the head by ``undeliverable-here``), that dispatch could deliver
  nothing: the publish only takes expired heads out, as the dispatch would have. Every
  dispatch forgets the stall, and the protocols dispatch whenever credit grows (ack,
  ``basic.qos``, ``channel.flow``, 1.0 flow, the shovel's window) and a consumer is
  added; browsers and filtered consumers are dispatched to on every publish as before.
* ``settle`` (ack / 1.0 accepted) makes an ACQUIRED entry GONE.
* ``release`` puts an ACQUIRED entry back at its original position (by ``seq``), not at
  the tail, so redelivery keeps publish order; it dispatches again.
* ``reject`` with requeue is ``release``; without, the entry is dead-lettered (reason
  ``rejected``) if the queue has a dead-letter exchange, else discarded.
* Expiry: an entry expires at ``enqueue time + min(x-message-ttl, message ttl)``. Like
  RabbitMQ, expired entries are removed lazily from the *head* (dispatch, ``get`` and
  :meth:`Queue.expire`); an entry is expired once ``now > expires_at``, and an entry
  with TTL 0 that no consumer took during its own enqueue is expired at once.
* Priorities (``x-max-priority``): one deque per level; the highest non-empty level is the
  head; a priority above the maximum counts as the maximum, ``None`` as 0. Max-length
  overflow with ``drop-head`` drops from the lowest level first.
* Limits (``x-max-length``, ``x-max-length-bytes``) count AVAILABLE messages only.

Time is always the caller's ``now`` (seconds). The queue never reads a clock.

Where: the policy (when an entry moves: enqueue, dispatch, ``get``, settlement, expiry,
limits, purge, deletion) is here; the entries and every change of their state (with the
memory count and the store's records that follow it) are ``queue_entries.QueueEntries``'s
(``entries``); where a message goes when it ends unconsumed is
``dead_lettering.DeadLettering``'s (``dead_lettering``); how an entry is taken out when it
ends unconsumed (expired, over a limit, past the delivery limit, filtered) is
``queue_endings``'s, and the browsers' dispatch ``browser_dispatch``'s.

The queue reaches its vhost only through ``host`` (a :class:`~.queue_host.QueueHost`):
its name, the memory gate, the ledger, the store, dead-lettering and its own deletion.

Ledger: with ``host.ledger`` set, every way an entry ends unconsumed is recorded
(``queue_endings``).

Durability: a stored queue (see ``queue_storage``) has a ``QueueStorage`` in ``storage``
(from ``host.queue_storage``);
entries of persistent messages then carry the store's reference (``entry.stored``) and
every state change of theirs is written; a body left in the store is read back before the
entry is handed out, expired with a record, or dead-lettered.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional

from .browser_dispatch import dispatch_browsers
from .consumers import Consumer, ConsumerSet
from .dead_lettering import DeadLettering
from .errors import PreconditionFailed
from .message import DeathReason, MessageContainer
from .policies import QUEUE_KEYS, Policy, with_policy
from .queue_arguments import (Overflow, QueueArguments, check_queue_flags, parse_queue_arguments,
                              without_refused_by_type)
from .queue_entries import QueueEntries
from .publish_result import PublishResult
from .queue_endings import (drop_over_limit, end_all, expire_entry, expire_heads, past_delivery_limit,
                            purge_available, record_unkept, refuse_publish)
from .queued_message import AVAILABLE, MessageState, QueuedMessage

if TYPE_CHECKING:
    from .queue_host import QueueHost
    from .queue_storage import QueueStorage
    from .ready_list import ReadyList

__all__ = ["MessageState", "QueuedMessage", "Queue"]

log = logging.getLogger(__name__)

_DROP_HEAD = Overflow.DROP_HEAD


class Queue:
    """A queue in a vhost. Usually created by ``VirtualHost.declare_queue``.

    Raises :class:`InvalidArgument` / :class:`PreconditionFailed` /
    :class:`FeatureNotImplemented` from the constructor for bad ``arguments``.
    """

    def __init__(
        self,
        name: str,
        host: "QueueHost",
        *,
        durable: bool = False,
        exclusive_owner: Any = None,
        auto_delete: bool = False,
        arguments: Optional[Mapping[str, Any]] = None,
        now: float = 0.0,
        policy: Optional[Policy] = None,
    ) -> None:
        self.name = name
        #: the ledger's ``routed_to`` for a message this queue alone took (made once)
        self.routed_to = (name,)
        #: the vhost's ``PublishResult`` for a publish only this queue took (results are
        #: immutable: made once); it holds the queue (a cycle): dropped at the deletion
        self.took_alone: Optional[PublishResult] = PublishResult((self,))
        self.host = host
        self.vhost_name = host.name
        self.durable = durable
        #: opaque owner token (e.g. a connection id) of an exclusive queue, else None
        self.exclusive_owner = exclusive_owner
        self.auto_delete = auto_delete
        #: the arguments as declared (redeclares are compared with these)
        self.arguments: dict = dict(arguments or {})
        declared = parse_queue_arguments(self.arguments, name, self.vhost_name)
        check_queue_flags(declared, name, self.vhost_name, durable=durable,
                          exclusive=exclusive_owner is not None, auto_delete=auto_delete)
        #: the vhost's policy that applies (``policies``), and the arguments in effect
        self.policy = policy
        self.args: QueueArguments = declared if policy is None else self._with_policy(policy)
        #: a quorum queue: every return counts as a failed delivery (0-9-1 consumers get
        #: ``x-delivery-count``), and ``x-delivery-limit`` applies
        self.quorum = self.args.queue_type == "quorum"
        self.label = f"queue '{name}' in vhost '{self.vhost_name}'"
        #: the entries, their states, the memory count and the store's records
        self.entries = QueueEntries(self.args.max_priority, host.gate)
        #: AVAILABLE entries in order (the entries' ready list: read here, changed there)
        self.ready: "ReadyList" = self.entries.ready
        #: ``settle(entry) -> bool``: ACQUIRED -> GONE (0-9-1 ack, 1.0 accepted); False if
        #: ``entry`` is not acquired from this queue (already settled, deleted, browsed)
        self.settle = self.entries.settle
        self.dead_lettering = DeadLettering(name, host, self.args)
        self.consumers = ConsumerSet(self.label)
        self.had_consumers = False
        #: last ``now`` the queue was used (consumers, get, declare): for ``x-expires``
        self.last_used = now
        self._now = now
        self.deleted = False
        self._dispatching = False
        self._again = False
        #: the last dispatch ended because no acquiring consumer had credit (none was
        #: excluded by ``undeliverable-here``): until the next dispatch, which every growth
        #: of credit and every new consumer brings, a publish has nothing to deliver
        self._stalled = False
        #: the link to the store of a stored queue (durable, not exclusive, not auto-delete)
        self.storage: Optional["QueueStorage"] = host.queue_storage(self) if self.storable else None
        self.entries.use_storage(self.storage)

    # ------------------------------------------------------------------ properties
    @property
    def exclusive(self) -> bool:
        return self.exclusive_owner is not None

    @property
    def storable(self) -> bool:
        """Kept in the store: durable, and neither exclusive nor auto-delete."""
        return self.durable and self.exclusive_owner is None and not self.auto_delete

    @property
    def message_count(self) -> int:
        """AVAILABLE messages (what 0-9-1 declare-ok and get-ok report)."""
        return self.ready.count

    @property
    def acquired_count(self) -> int:
        """Delivered but unsettled messages."""
        return len(self.entries.acquired)

    @property
    def available_bytes(self) -> int:
        return self.ready.nbytes

    @property
    def consumer_count(self) -> int:
        return len(self.consumers)

    def oldest_age(self, now: float) -> Optional[float]:
        """Seconds the oldest AVAILABLE message has waited at ``now`` (None: empty, or not
        known): the one rule management's views and alerts read."""
        created = self.ready.oldest_created_at()
        return None if created is None else max(0.0, now - created)

    def capacity_left(self) -> Optional[int]:
        """How many more messages fit before a ``reject-publish`` queue rejects (1.0
        incoming-link credit); ``None`` when publishes are never rejected. See
        ``QueueArguments.room``."""
        return self.args.room(self.ready.count, self.ready.nbytes)

    def unsettled_since(self, cutoff: float) -> int:
        """Deliveries acquired at or before ``cutoff`` and still unsettled."""
        return self.entries.unsettled_since(cutoff)

    def _with_policy(self, policy: Optional[Policy]) -> QueueArguments:
        merged = without_refused_by_type(with_policy(self.arguments, policy, QUEUE_KEYS), self.arguments)
        return parse_queue_arguments(merged, self.name, self.vhost_name)

    def apply_policy(self, policy: Optional[Policy], now: float) -> None:
        """Take ``policy`` (None: none) in place of the one applied; a lower length limit
        drops messages from the head at once (``policies`` says what changes when)."""
        self.policy = policy
        self.args = self.dead_lettering.args = self._with_policy(policy)
        if self.args.bounded and self.args.overflow is Overflow.DROP_HEAD:
            drop_over_limit(self.args, self.entries, self.dead_lettering, now)

    def touch(self, now: float) -> None:
        """Mark the queue used at ``now`` (restarts the ``x-expires`` timer)."""
        self.last_used = now
        self._now = now

    # ------------------------------------------------------------------ publish side
    def enqueue(self, message: MessageContainer, now: float) -> bool:
        """Add ``message``; returns False if a full ``reject-publish`` queue refused it
        (with ``reject-publish-dlx`` it is also dead-lettered, reason ``maxlen``).
        A deleted queue refuses everything."""
        if self.deleted:
            return False
        self._now = now
        args = self.args
        if args.bounded and args.overflow is not _DROP_HEAD and self._full(message.size):
            refuse_publish(args, self.dead_lettering, message, now)
            return False
        ttl = args.message_ttl_ms
        mttl = message.ttl_ms
        if mttl is not None and (ttl is None or mttl < ttl):
            ttl = mttl
        expires_at = None if ttl is None else now + ttl / 1000.0
        consumers = self.consumers
        if consumers.acquiring and not self.ready.count and not consumers.browsers \
                and not self._dispatching:
            # the fast path: nothing waits, so a consumer with credit takes it at once, as
            # dispatch would right after (``entries.add`` with a holder: still one table)
            consumer = consumers.pick()
            if consumer is not None:
                entry = self.entries.add(message, expires_at, self, consumer, now)
                # handed over as dispatch does: a call back into the queue during the
                # delivery is folded in and run after it
                self._dispatching = True
                self._again = False
                try:
                    consumer.credit.consume_one()
                    consumer.deliver(entry, now)
                finally:
                    self._dispatching = False
                if self._again:
                    self.dispatch(now)
                if args.bounded and args.overflow is _DROP_HEAD:
                    drop_over_limit(self.args, self.entries, self.dead_lettering, now)
                return True
        entry = self.entries.add(message, expires_at, self)
        if consumers.acquiring:
            if self._stalled and not consumers.browsers:
                # no consumer had credit at the last dispatch, and none has had more since
                # (credit growth dispatches): a dispatch would only expire the heads
                self._head(now)
            else:
                self.dispatch(now)
        elif consumers.browsers:
            self.dispatch(now)
        if ttl == 0 and entry.state is AVAILABLE:
            self._expire_available(entry, now)
        if args.bounded and args.overflow is _DROP_HEAD:
            drop_over_limit(self.args, self.entries, self.dead_lettering, now)
        return True

    def restore(
        self,
        message: MessageContainer,
        *,
        seq: int,
        expires_at: Optional[float],
        redelivered: bool = False,
        delivery_count: int = 0,
        ref: Any = None,
    ) -> QueuedMessage:
        """Put back an entry loaded from the store at start-up (in ``seq`` order) with its
        expiry and delivery state; ``message`` is a stand-in (``queue_storage``). Not
        written again, not dispatched (consumers attach later)."""
        return self.entries.restore(message, seq, expires_at, redelivered, delivery_count, ref, self)

    def _full(self, size: int) -> bool:
        args = self.args
        if args.max_length is not None and self.ready.count >= args.max_length:
            return True
        return args.max_length_bytes is not None and self.ready.nbytes + size > args.max_length_bytes

    # ------------------------------------------------------------------ consume side
    def add_consumer(self, consumer: Consumer, now: float) -> None:
        """Attach ``consumer`` and dispatch to it. Raises :class:`ResourceLocked` on an
        exclusive-consumer conflict. (Exclusive *queue* ownership is checked by the
        vhost.)"""
        self.consumers.add(consumer)
        self.had_consumers = True
        self.touch(now)
        self.dispatch(now)

    def remove_consumer(self, consumer: Consumer, now: float) -> bool:
        """Detach ``consumer`` (its acquired entries stay acquired until settled or
        released). If this was the last consumer of an auto-delete queue, the queue is
        deleted; returns True in that case."""
        if not self.consumers.remove(consumer):
            return False
        self.touch(now)
        if self.auto_delete and self.had_consumers and not self.consumers and not self.deleted:
            self._delete_now(f"{self.label} was auto-deleted")
            return True
        return False

    def get(self, now: float, *, ack: bool) -> Optional[QueuedMessage]:
        """Take the head message (0-9-1 ``basic.get``): ACQUIRED if ``ack``, else GONE at
        once. ``None`` if there is none."""
        self.touch(now)
        entries = self.entries
        entry = self._head(now)
        while entry is not None and entry.stored is not None and not entries.with_body(entry):
            entry = self._head(now)
        if entry is None:
            return None
        if ack:
            entries.acquire(entry, None, now)
        else:
            entries.take_gone(entry)
        return entry

    def dispatch(self, now: float) -> int:
        """Hand available messages to consumers with credit; returns how many went out.

        Called after enqueue and release (by the queue) and by the protocol whenever
        credit grows (ack, qos, 1.0 flow): that promise is what lets ``enqueue`` skip
        the dispatch while the queue is stalled for credit. Re-entrant calls are folded
        into the running one.
        """
        self._now = now
        if self._dispatching:
            self._again = True
            self._stalled = False
            return 0
        consumers = self.consumers
        if not consumers.acquiring and not consumers.browsers:
            return 0
        self._stalled = False
        self._dispatching = True
        sent = 0
        entries = self.entries
        ready = self.ready
        try:
            while True:
                self._again = False
                if consumers.acquiring:
                    pick = consumers.pick
                    while ready.count:
                        entry = entries.head(now)
                        if entries.expired:
                            self._expire_heads(now)
                        if entry is None:
                            break
                        consumer = pick(entry.undeliverable_to)
                        if consumer is None:
                            # nobody has credit, unless the head was refused by some
                            # (a new head may go to them: not stalled)
                            self._stalled = not entry.undeliverable_to
                            break
                        if entry.stored is not None and not entries.with_body(entry):
                            continue
                        entries.acquire(entry, consumer, now)
                        consumer.credit.consume_one()
                        consumer.deliver(entry, now)
                        sent += 1
                if consumers.browsers:
                    sent += dispatch_browsers(consumers, entries, self.dead_lettering, now)
                if not self._again:
                    break
        finally:
            self._dispatching = False
        return sent

    # ------------------------------------------------------------------ settlement
    def release(
        self,
        entry: QueuedMessage,
        *,
        redelivered: bool = True,
        count_delivery: bool = True,
        now: Optional[float] = None,
    ) -> bool:
        """ACQUIRED -> AVAILABLE at the entry's original position, then dispatch (at
        ``now``, or the last time the queue saw). False if not acquired here. A message
        past a quorum queue's ``x-delivery-limit`` is dead-lettered instead."""
        if self.args.delivery_limit is not None and past_delivery_limit(
                self.args, self.entries, self.dead_lettering, entry, self._now if now is None else now):
            return True
        if not self.entries.put_back(entry, redelivered, count_delivery or self.quorum):
            return False
        consumers = self.consumers
        if consumers.browsers:
            consumers.rewind(entry.seq)
        if consumers.acquiring or consumers.browsers:
            self.dispatch(self._now if now is None else now)
        return True

    def release_many(
        self,
        entries: Iterable[QueuedMessage],
        *,
        redelivered: bool = True,
        count_delivery: bool = True,
        now: Optional[float] = None,
    ) -> int:
        """Release several entries, then dispatch once, so they are redelivered in queue
        order whatever order they come in (channel close, ``basic.recover``, nack
        multiple). Returns how many were acquired here and released."""
        put_back = self.entries.put_back
        count_delivery = count_delivery or self.quorum
        limited = self.args.delivery_limit is not None
        at = self._now if now is None else now
        count = 0
        browsers = self.consumers.browsers
        for entry in entries:
            if (limited and past_delivery_limit(self.args, self.entries, self.dead_lettering, entry, at)) \
                    or put_back(entry, redelivered, count_delivery):
                count += 1
                if browsers:
                    self.consumers.rewind(entry.seq)
        if count and self.consumers:
            self.dispatch(self._now if now is None else now)
        return count

    def reject(self, entry: QueuedMessage, *, requeue: bool, now: float) -> bool:
        """0-9-1 reject/nack and 1.0 rejected: ``requeue`` -> :meth:`release`; else the
        entry is dead-lettered (reason ``rejected``) or discarded. False if not acquired."""
        if requeue:
            return self.release(entry, now=now)
        entries = self.entries
        if not entries.take_acquired(entry):
            return False
        entries.finish(entry)
        self.dead_lettering.dead_letter(entry.message, DeathReason.REJECTED, now)
        return True

    def modify(
        self,
        entry: QueuedMessage,
        *,
        delivery_failed: bool = False,
        undeliverable_here: bool = False,
        annotations: Optional[dict] = None,
        now: Optional[float] = None,
    ) -> bool:
        """1.0 ``modified``: merge ``annotations`` into the message, never offer it again
        to the holding consumer if ``undeliverable_here``, count a failed delivery if
        ``delivery_failed``, and release it. False if not acquired."""
        entries = self.entries
        if not entries.is_acquired(entry):
            return False
        entries.modified(entry, annotations, undeliverable_here)
        return self.release(entry, redelivered=True, count_delivery=delivery_failed, now=now)

    def dead_letter(self, message: MessageContainer, reason: DeathReason, now: float) -> None:
        """Publish a copy of ``message`` (gone from here) to the dead-letter exchange, if
        the queue has one (management's poison messages)."""
        self.dead_lettering.dead_letter(message, reason, now)

    # ------------------------------------------------------------------ time
    def expire(self, now: float) -> int:
        """Remove expired entries from the head of every priority level (dead-lettering
        them with reason ``expired`` if configured); returns how many."""
        self._now = now
        return expire_heads(self.entries, self.dead_lettering, now)

    def next_deadline(self) -> Optional[float]:
        """The earliest time (seconds) at which ``tick``/``expire`` has work: a head
        message expiry or the ``x-expires`` deadline; ``None`` if none."""
        deadline = self.ready.deadline()
        exp = self.expires_at()
        if exp is not None and (deadline is None or exp < deadline):
            deadline = exp
        return deadline

    def expires_at(self) -> Optional[float]:
        """When an unused queue with ``x-expires`` will be deleted; ``None`` if in use or
        no ``x-expires``."""
        if self.args.expires_ms is None or self.consumers:
            return None
        return self.last_used + self.args.expires_ms / 1000.0

    def _head(self, now: float) -> Optional[QueuedMessage]:
        """The head entry (highest priority, oldest); expired heads are dropped."""
        entries = self.entries
        entry = entries.head(now)
        if entries.expired:
            self._expire_heads(now)
        return entry

    def _expire_heads(self, now: float) -> None:
        for gone in self.entries.take_expired():
            expire_entry(self.entries, self.dead_lettering, gone, now)

    def _expire_available(self, entry: QueuedMessage, now: float) -> None:
        """A TTL-0 entry no consumer took during its own enqueue: expired at once."""
        self.entries.remove_available(entry)
        expire_entry(self.entries, self.dead_lettering, entry, now)

    # ------------------------------------------------------------------ the end
    def purge(self, now: Optional[float] = None) -> int:
        """Drop every AVAILABLE entry (acquired ones stay); returns how many. ``now``: the
        time the ledger records (else the queue's last)."""
        if now is not None:
            self._now = now
        return purge_available(self.entries, self.dead_lettering, self._now)

    def record_shutdown(self, now: float) -> int:
        """The gateway stops: the entries the store does not keep are recorded as dropped
        (``queue_endings.record_unkept``); returns how many."""
        self._now = now
        return record_unkept(self.entries, self.dead_lettering, self.storage is not None, now)

    def delete(self, *, if_unused: bool = False, if_empty: bool = False,
               now: Optional[float] = None) -> int:
        """Delete the queue; returns the number of AVAILABLE messages it held.

        Raises :class:`PreconditionFailed` if ``if_unused`` and it has consumers, or
        ``if_empty`` and it has available messages (RabbitMQ's texts).
        """
        if now is not None:
            self._now = now
        if if_unused and self.consumers:
            raise PreconditionFailed(f"{self.label} in use")
        if if_empty and self.ready.count:
            raise PreconditionFailed(f"{self.label} not empty")
        return self._delete_now(f"{self.label} was deleted")

    def _delete_now(self, reason: str) -> int:
        return self.host.forget_queue(self, reason)

    def tear_down(self, reason: str) -> int:
        """Cancel consumers and drop all entries; returns the available count it had.
        Called by the host once it forgot the queue (``QueueHost.forget_queue``)."""
        if self.deleted:
            return 0
        self.deleted = True
        self.took_alone = None  # holds this queue: a cycle, collected rarely (cli.py)
        count = self.ready.count
        for consumer in self.consumers.clear():
            consumer.cancelled_by_broker(reason)
        end_all(self.entries, self.dead_lettering, self._now)
        return count

    def __repr__(self) -> str:
        return f"Queue({self.name!r}, available={self.ready.count}, acquired={len(self.entries.acquired)})"
