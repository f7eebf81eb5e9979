"""Queue: a weak-FIFO store of messages with states, TTL, limits and dead-lettering.

Theory of operation
-------------------
Every message routed here becomes a :class:`QueuedMessage` (an *entry*) with a ``seq``
that grows with every enqueue. An entry is AVAILABLE (waiting, in a per-priority deque
kept sorted by ``seq``), ACQUIRED (handed to a consumer or ``get`` with ack, unsettled,
kept in a dict by ``seq``) or GONE (settled, expired, dropped, dead-lettered, purged).

* ``enqueue`` appends at the tail and dispatches at once, so a waiting consumer gets the
  message before any TTL-0 or max-length check drops it (as RabbitMQ does).
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

Where: enqueue, dispatch and ``get`` are here; settlement (settle, release, reject,
modify) is ``queue_settlement.QueueSettlement``; expiry, dead-lettering, purge and
deletion are ``queue_lifetime.QueueLifetime``, both mixins of ``Queue``.

The queue reaches its vhost only through ``host`` (a :class:`~.queue_host.QueueHost`):
its name, the memory gate, the ledger, the store, dead-lettering and its own deletion.

Ledger: with ``host.ledger`` set, an expiry is recorded as ``expired`` and a
dead-lettering (any reason) as ``dead_lettered`` under the message's own ``gateway_id``
(the copy published to the dead-letter exchange gets a new one: ``vhost.dead_letter``).

Durability: a stored queue (see ``queue_storage``) has a ``QueueStorage`` in ``storage``
(from ``host.queue_storage``);
entries of persistent messages then carry the store's reference (``entry.stored``) and
every state change of theirs is written; a body left in the store is read back before the
entry is handed out, expired with a record, or dead-lettered.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Mapping, Optional

from .consumers import Consumer, ConsumerSet
from .flow import ProducerGate
from .message import DeathReason, MessageContainer
from .policies import QUEUE_KEYS, Policy, with_policy
from .queue_arguments import Overflow, QueueArguments, parse_queue_arguments
from .queue_lifetime import QueueLifetime
from .queue_settlement import QueueSettlement
from .queued_message import _ACQUIRED, _AVAILABLE, _GONE, MessageState, QueuedMessage
from .ready_list import ReadyList

if TYPE_CHECKING:
    from .queue_host import QueueHost
    from .queue_storage import QueueStorage

__all__ = ["MessageState", "QueuedMessage", "Queue"]

log = logging.getLogger(__name__)


class Queue(QueueSettlement, QueueLifetime):
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
        #: the vhost's ``PublishResult`` for a message this queue alone took (made once,
        #: by the vhost: results are immutable, and one was made for every publish)
        self.took_alone: Any = None
        self.host = host
        self.vhost_name = host.name
        self.durable = durable
        #: opaque owner token (e.g. a connection id) of an exclusive queue, else None
        self.exclusive_owner = exclusive_owner
        self.auto_delete = auto_delete
        #: the arguments as declared (redeclares are compared with these)
        self.arguments: dict = dict(arguments or {})
        declared = parse_queue_arguments(self.arguments, name, self.vhost_name)
        #: the vhost's policy that applies (``policies``), and the arguments in effect
        self.policy = policy
        self.args: QueueArguments = declared if policy is None else self._with_policy(policy)
        self.label = f"queue '{name}' in vhost '{self.vhost_name}'"
        #: AVAILABLE entries in order
        self.ready = ReadyList(self.args.max_priority)
        self._acquired: dict[int, QueuedMessage] = {}
        self._seq = 0
        self.consumers = ConsumerSet(self.label)
        self.had_consumers = False
        #: last ``now`` the queue was used (consumers, get, declare): for ``x-expires``
        self.last_used = now
        self._now = now
        self.deleted = False
        self._gate: ProducerGate = host.gate
        self._dispatching = False
        self._again = False
        #: the link to the store of a stored queue (durable, not exclusive, not auto-delete)
        self.storage: Optional["QueueStorage"] = host.queue_storage(self) if self.storable else None
        #: totals since the queue was made, read by management and metrics at scrape time
        #: (RabbitMQ's message_stats publish, deliver_get, ack): plain ints on the hot path
        self.published = self.delivered = self.acked = 0

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
        return len(self._acquired)

    @property
    def available_bytes(self) -> int:
        return self.ready.nbytes

    @property
    def consumer_count(self) -> int:
        return len(self.consumers)

    def capacity_left(self) -> Optional[int]:
        """How many more messages fit before a ``reject-publish`` queue rejects (1.0
        incoming-link credit); ``None`` when publishes are never rejected. See
        ``QueueArguments.room``."""
        return self.args.room(self.ready.count, self.ready.nbytes)

    def _with_policy(self, policy: Optional[Policy]) -> QueueArguments:
        return parse_queue_arguments(with_policy(self.arguments, policy, QUEUE_KEYS), self.name,
                                     self.vhost_name)

    def apply_policy(self, policy: Optional[Policy], now: float) -> None:
        """Take ``policy`` (None: none) in place of the one applied; a lower length limit
        drops messages from the head at once (``policies`` says what changes when)."""
        self.policy = policy
        self.args = self._with_policy(policy)
        if self.args.bounded and self.args.overflow is Overflow.DROP_HEAD:
            self._drop_over_limit(now)

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
        if args.bounded and args.overflow is not Overflow.DROP_HEAD and self._full(message.size):
            if args.overflow is Overflow.REJECT_PUBLISH_DLX:
                self.dead_letter(message, DeathReason.MAXLEN, now)
            return False
        ttl = args.message_ttl_ms
        mttl = message.ttl_ms
        if mttl is not None and (ttl is None or mttl < ttl):
            ttl = mttl
        expires_at = None if ttl is None else now + ttl / 1000.0
        self._seq += 1
        entry = QueuedMessage(message, self._seq, expires_at, self.ready.level_of(message.priority), self)
        self.ready.append(entry)
        self.published += 1
        if self._gate is not None:
            self._gate.add(message.size)
        if self.storage is not None and message.durable:
            self.storage.added(entry)
        if self.consumers:
            self.dispatch(now)
        if ttl == 0 and entry.state is _AVAILABLE:
            self.ready.remove(entry)
            self._expire_entry(entry, now)
        if args.bounded and args.overflow is Overflow.DROP_HEAD:
            self._drop_over_limit(now)
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
        self._seq = max(self._seq, seq)
        entry = QueuedMessage(message, seq, expires_at, self.ready.level_of(message.priority), self)
        entry.redelivered = redelivered
        entry.delivery_count = delivery_count
        entry.stored = ref
        self.ready.append(entry)
        if message.payload is not None and self._gate is not None:
            self._gate.add(message.size)  # not a stand-in: its body is in memory
        return entry

    def _full(self, size: int) -> bool:
        args = self.args
        if args.max_length is not None and self.ready.count >= args.max_length:
            return True
        return args.max_length_bytes is not None and self.ready.nbytes + size > args.max_length_bytes

    def _drop_over_limit(self, now: float) -> None:
        args = self.args
        max_len, max_bytes = args.max_length, args.max_length_bytes
        ready = self.ready
        while ready.count and (
            (max_len is not None and ready.count > max_len)
            or (max_bytes is not None and ready.nbytes > max_bytes)
        ):
            entry = ready.pop_lowest()  # lowest priority first
            message = entry.message if entry.stored is None else self.storage.leaving(entry)  # type: ignore[union-attr]
            self._finish(entry)
            if message is not None:
                self.dead_letter(message, DeathReason.MAXLEN, now)

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
        entry = self._head(now)
        while entry is not None and entry.stored is not None and not self._with_body(entry):
            entry = self._head(now)
        if entry is None:
            return None
        self.ready.remove(entry)
        self.delivered += 1
        if entry.stored is not None and ack:
            self.storage.taking(entry)  # type: ignore[union-attr]
        if ack:
            entry.state = _ACQUIRED
            entry.holder = None
            entry.acquired_at = now
            self._acquired[entry.seq] = entry
        else:
            self._finish(entry)
        return entry

    def dispatch(self, now: float) -> int:
        """Hand available messages to consumers with credit; returns how many went out.

        Called after enqueue and release (by the queue) and by the protocol whenever
        credit grows (ack, qos, 1.0 flow). Re-entrant calls are folded into the running
        one.
        """
        self._now = now
        if self._dispatching:
            self._again = True
            return 0
        if not self.consumers:
            return 0
        self._dispatching = True
        sent = 0
        try:
            while True:
                self._again = False
                if self.consumers.acquiring:
                    sent += self._dispatch_acquiring(now)
                if self.consumers.browsers:
                    sent += self._dispatch_browsers(now)
                if not self._again:
                    break
        finally:
            self._dispatching = False
            self.delivered += sent
        return sent

    def _dispatch_acquiring(self, now: float) -> int:
        sent = 0
        pick = self.consumers.pick
        acquired = self._acquired
        ready = self.ready
        while ready.count:
            entry = self._head(now)
            if entry is None:
                break
            consumer = pick(entry.undeliverable_to)
            if consumer is None:
                break
            if entry.stored is not None:
                if not self._with_body(entry):
                    continue
                self.storage.taking(entry)  # type: ignore[union-attr]
            ready.remove(entry)
            entry.state = _ACQUIRED
            entry.holder = consumer
            entry.acquired_at = now
            acquired[entry.seq] = entry
            consumer.credit.consume_one()
            consumer.deliver(entry, now)
            sent += 1
        return sent

    def _dispatch_browsers(self, now: float) -> int:
        sent = 0
        browsers = self.consumers.browsers
        for browser in list(browsers):
            cursor = browsers.get(browser)
            while cursor is not None and browser.credit.has_credit():
                entry = self.ready.next_after(cursor, now)
                if entry is None:
                    break
                if entry.stored is not None and not self._with_body(entry):
                    continue
                cursor = browsers[browser] = entry.seq
                browser.credit.consume_one()
                browser.deliver(entry, now)
                sent += 1
                cursor = browsers.get(browser)
        return sent

    # ------------------------------------------------------------------ internals
    def _head(self, now: float) -> Optional[QueuedMessage]:
        """The head entry (highest priority, oldest); expired heads are dropped."""
        expired: list[QueuedMessage] = []
        entry = self.ready.head(now, expired)
        for gone in expired:
            self._expire_entry(gone, now)
        return entry

    def _finish(self, entry: QueuedMessage) -> None:
        entry.state = _GONE
        entry.holder = None
        ref = entry.stored
        if ref is not None:
            entry.stored = None
            self.storage.removed(entry, ref)  # type: ignore[union-attr]
            if entry.message.payload is None:
                return  # a stand-in: its bytes were not counted in memory
        if self._gate is not None:
            self._gate.sub(entry.message.size)

    def _with_body(self, entry: QueuedMessage) -> bool:
        """Make sure the available head ``entry`` has its body (read back from the store);
        one that cannot be read is dropped (logged) and False returned."""
        if entry.message.payload is not None or self.storage.loaded(entry):  # type: ignore[union-attr]
            return True
        self.ready.remove(entry)
        self._finish(entry)
        return False

    def __repr__(self) -> str:
        return f"Queue({self.name!r}, available={self.ready.count}, acquired={len(self._acquired)})"
