"""An outgoing link: a consumer on a queue that sends its messages to a 1.0 client within
the client's credit, and applies the client's dispositions through the broker's one outcome
operation.

It lives apart from ``incoming_link.py`` and from attaching (``links.py``) because the two
directions share only the link context (``link_context.py``)."""
from __future__ import annotations

import logging
from typing import Any

from proton import Delivery, Link

from gateway.amqp10.conditions import ErrorCondition
from gateway.amqp10.link_context import (
    LINK_CLOSED,
    UNTRANSLATABLE,
    LEDGER_ACCEPTED as _ACCEPTED,
    LEDGER_OUTCOME as _LEDGER_OUTCOME,
    LEDGER_RELEASED as _RELEASED,
    TERMINAL_STATES as _TERMINAL,
    make_condition as _condition,
    end_ledger_context as _end_ledger_context,
    ledger_context as _ledger_context,
)
from gateway.amqp10.link_host import LinkHost
from gateway.amqp10.payloads import delivery_parts
from gateway.amqp10.proton_calls import (
    ffi as _ffi,
    lib as _lib,
    pn_delivery_remote_state,
    pn_delivery_settle,
    pn_delivery_settled,
    pn_delivery_updated,
    pn_link_advance,
    send_parts,
)
from gateway.amqp10.transactions import TRANSACTIONAL_STATE, retire_transactional
from gateway.broker.errors import BrokerError
from gateway.broker.flow import CreditWindow
from gateway.broker.outcomes import ACCEPTED, REJECTED, RELEASED, apply_outcome, modified
from gateway.broker.queues import Queue, QueuedMessage
from gateway.ledger import Outcome as LedgerOutcome
from translators.amqp10_sections import owned_value
from translators.errors import TranslationError

log = logging.getLogger(__name__)


class OutgoingLink:
    """The client receives on ``link`` (a proton sender); a broker ``Consumer``."""

    def __init__(self, host: LinkHost, link: Link, queue: Queue, *, acquires: bool,
                 temporary: bool, service_reply: bool = False, message_filter: Any = None,
                 subscription: Any = None) -> None:
        self.host = host
        self.link = link
        self.queue = queue
        self.tag = link.name
        self.acquires = acquires
        self.temporary = temporary
        #: the receiving half of a link pair with a service node (``/management``)
        self.service_reply = service_reply
        #: the link's source filters (``broker.message_filter.MessageFilter``), or None
        self.message_filter = message_filter
        #: the durable subscription it consumes (``link_recovery.SubscriptionLink``), or
        #: None; one link at a time consumes a subscription (``exclusive``)
        self.subscription = subscription
        self.exclusive = subscription is not None
        self.credit = CreditWindow.link_credit(0)
        self._presettled = link.snd_settle_mode == Link.SND_SETTLED
        #: the client's max-message-size from its attach (0: no limit); fixed for the link
        self._peer_max_message_size = link.remote_max_message_size
        #: our deliveries the client has not settled, by their C delivery (cffi pointers
        #: compare and hash by address; proton frees a delivery only once it is settled)
        self._unsettled: dict[Any, QueuedMessage] = {}
        self._next_tag = 0
        self.closed = False
        self._ledger_ctx = _ledger_context(host, self.tag, link.source.address)
        #: the broker's ledger (None: off), the connection's trail and the C link: fixed
        #: for the link's life, so each delivery and disposition reads them once, not
        #: through ``host``
        self._ledger = host.broker.ledger
        self._trail = host.trail
        self._impl = link._impl

    @property
    def unsettled_count(self) -> int:
        return len(self._unsettled)

    # -- Consumer protocol ----------------------------------------------------------
    def deliver(self, entry: QueuedMessage, now: float) -> None:
        """Send ``entry`` on the link at ``now`` (called synchronously by the queue's
        dispatch, with its time)."""
        message = entry.message
        try:
            # first-acquirer: acquired here, and by no link before (see payloads)
            header, data, rest = delivery_parts(
                message, delivery_count=entry.delivery_count,
                first_acquirer=self.acquires and not entry.redelivered)
        except TranslationError as exc:
            log.warning("cannot translate %r for link %r: %s; rejecting it", message, self.tag, exc)
            if self.acquires:
                ledger = self.host.broker.ledger
                if ledger is not None:
                    ledger.settled(now, self._ledger_ctx, entry, self.queue.name,
                                   LedgerOutcome.REJECTED.value, UNTRANSLATABLE)
                self.queue.reject(entry, requeue=False, now=now)
            return
        limit = self._peer_max_message_size
        if limit:  # (most clients set none: no size to work out then)
            size = len(header) + len(data) - rest
            if size > limit:
                self._refuse_oversized(entry, size, limit, now)
                return
        tag = b"%d" % self._next_tag
        self._next_tag += 1
        self._trail.messages_out += 1
        impl = self._impl
        # the C delivery and C calls only: a Python Delivery wrapper per message costs
        # more than the send itself, and cproton's wrappers (tag and buffer conversion,
        # Sender.stream) were a microsecond of it
        d = _lib.pn_delivery(impl, (len(tag), _ffi.from_buffer(tag)))
        sent = send_parts(impl, header, data, rest)
        if sent < 0:
            self.link._check(sent)  # raises proton's LinkException naming the error
        pn_link_advance(impl)
        ledger = self._ledger
        if self._presettled or not self.acquires:
            pn_delivery_settle(d)
            if self.acquires:
                if ledger is not None:
                    ledger.delivered_settled(now, self._ledger_ctx, entry, self.queue.name)
                self.queue.settle(entry)
            elif ledger is not None:
                ledger.delivered(now, self._ledger_ctx, entry, self.queue.name)
        else:
            if ledger is not None:
                ledger.delivered(now, self._ledger_ctx, entry, self.queue.name)
            self._unsettled[d] = entry  # on_delivery gets an equal pointer to it
        self.host.output_ready()

    def _refuse_oversized(self, entry: QueuedMessage, size: int, limit: int,
                          now: float) -> None:
        """A message larger than the client's max-message-size: nothing is sent, the
        message goes back to its place in the queue (not counted as a delivery), and the
        link is detached with ``amqp:link:message-size-exceeded`` (spec 2.7.3; what
        RabbitMQ 4 does, with its text). Called from the queue's dispatch: the entry is
        put back before this consumer leaves, so the dispatch goes on with the others."""
        text = f"message size ({size} bytes) > maximum message size ({limit} bytes)"
        log.info("1.0 link %r on %s: %s; detaching", self.tag, self.host.connection_id, text)
        if self.acquires:
            self.queue.release(entry, redelivered=False, count_delivery=False, now=now)
        self.teardown()
        self.link.condition = _condition(ErrorCondition.MESSAGE_SIZE_EXCEEDED, text)
        self.link.close()
        self.host.link_gone(self)
        self.host.output_ready()

    def cancelled_by_broker(self, reason: str) -> None:
        """The queue went away: detach the link with ``amqp:link:detach-forced`` (unless
        the whole connection is going, e.g. taking its own temporary queues along)."""
        _end_ledger_context(self.host, self._ledger_ctx)
        if self.closed or self.host.closing:
            self.closed = True
            self._unsettled.clear()
            return
        self.closed = True
        self._unsettled.clear()
        self.link.condition = _condition(ErrorCondition.DETACH_FORCED, reason)
        self.link.close()
        self.host.link_gone(self)
        self.host.output_ready()

    # -- events ---------------------------------------------------------------------
    def on_flow(self) -> None:
        """The client changed credit or drain: take the new credit now; the engine calls
        :meth:`dispatch` once the whole batch of events is handled, so dispositions that
        arrived with the flow (a release before new credit) are applied first."""
        if self.closed:
            return
        credit = _lib.pn_link_credit(self._impl)  # (``Link.credit``, ``drain_mode``: C alone)
        self.credit.grant(credit if credit > 0 else 0, drain=bool(_lib.pn_link_get_drain(self._impl)))

    def dispatch(self) -> None:
        """Let the queue deliver within the credit, then drain what is left if asked."""
        if self.closed:
            return
        impl = self._impl
        if _lib.pn_link_credit(impl) > 0 and not self.queue.deleted:
            self.queue.dispatch(self.host.now)
        if self.closed:
            return
        if _lib.pn_link_get_drain(impl) and _lib.pn_link_credit(impl) > 0:
            self.link.drained()
            self.credit.drain_all()

    def on_delivery(self, d: Any) -> None:
        """A disposition from the client for one of our deliveries. ``d`` is proton's C
        delivery (see :meth:`IncomingLink.on_delivery`)."""
        settled = pn_delivery_settled(d)
        if not settled and not pn_delivery_updated(d):
            return
        state = pn_delivery_remote_state(d)  # an int; DispositionType members equal them
        if state not in _TERMINAL:
            if state == TRANSACTIONAL_STATE:  # settled at the discharge (``transactions``)
                retire_transactional(self.host, self, d)
                return
            if not settled:
                return  # e.g. a RECEIVED state: progress only
        entry = self._unsettled.pop(d, None)
        pn_delivery_settle(d)
        if entry is None or not self.acquires:
            return
        if state == Delivery.ACCEPTED:
            # what apply_outcome does first for ACCEPTED, without its call (every accept)
            ledger = self._ledger
            if ledger is not None:  # before the queue acts on it
                ledger.settled(self.host.now, self._ledger_ctx, entry, self.queue.name, _ACCEPTED)
            self.queue.settle(entry)
            return
        remote = Delivery.wrap(d).remote if state == Delivery.MODIFIED else None
        self._settle_entry(entry, state, remote)

    def _settle_entry(self, entry: QueuedMessage, state: int, remote: Any = None) -> None:
        """Apply the client's outcome ``state`` (proton's number; anything but the four
        outcomes: released) to ``entry``, recorded in the ledger first; ``remote`` holds
        a ``modified`` outcome's fields (``failed``, ``undeliverable``, ``annotations``)."""
        queue, now = self.queue, self.host.now
        ledger = self.host.broker.ledger
        if ledger is not None:  # before the queue acts on it
            ledger.settled(now, self._ledger_ctx, entry, queue.name,
                           _LEDGER_OUTCOME.get(state, _RELEASED))
        if state == Delivery.MODIFIED:
            # keys stay symbols (or ulongs); binaries are copied out of proton's buffer
            annotations = owned_value(dict(remote.annotations or {}))
            outcome = modified(bool(remote.failed), bool(remote.undeliverable), annotations)
        else:
            # released, or settled without an outcome (our default outcome: released)
            outcome = (ACCEPTED if state == Delivery.ACCEPTED
                       else REJECTED if state == Delivery.REJECTED else RELEASED)
        apply_outcome(queue, entry, outcome, now)

    # -- transactional retirement (``transactions``): small hooks for the coordinator
    def holds(self, d: Any) -> bool:
        """Whether our delivery ``d`` (C delivery) is acquired and unsettled on this link."""
        return d in self._unsettled

    def commit_retirement(self, d: Any, state: int, remote: Any = None) -> None:
        """A transaction that retired our delivery ``d`` (C delivery) with ``state`` (and
        ``remote``: see :meth:`_settle_entry`) committed: apply it and settle ``d``.
        Nothing to apply when the delivery went back meanwhile (the link ended)."""
        entry = self._unsettled.pop(d, None)
        if entry is None:
            return
        pn_delivery_settle(d)
        if self.acquires:
            self._settle_entry(entry, state, remote)

    def roll_back_retirement(self, d: Any) -> None:
        """A transaction that retired ``d`` rolled back: its outcome is discarded and the
        delivery is acquired and unsettled again (spec 4.4.2), for the client to settle
        anew. A client that settled it already cannot: it goes back to the queue then
        (released, not counted as a failed delivery)."""
        if not pn_delivery_settled(d):
            return
        entry = self._unsettled.pop(d, None)
        if entry is None:
            return
        pn_delivery_settle(d)
        if self.acquires:
            self._settle_entry(entry, Delivery.RELEASED)

    def teardown(self) -> None:
        """Stop consuming, return unsettled messages, drop a temporary queue."""
        if self.closed and not self._unsettled and not self.temporary:
            return
        self.closed = True
        queue, now = self.queue, self.host.now
        if not queue.deleted:
            queue.remove_consumer(self, now)
        entries = sorted(self._unsettled.values(), key=lambda e: e.seq)
        self._unsettled.clear()
        if not queue.deleted:
            ledger = self.host.broker.ledger
            for entry in entries:
                if ledger is not None and self.acquires:
                    ledger.settled(now, self._ledger_ctx, entry, queue.name, _RELEASED,
                                   LINK_CLOSED)
                queue.release(entry, redelivered=True, count_delivery=False, now=now)
        _end_ledger_context(self.host, self._ledger_ctx)
        if self.subscription is not None:
            self.subscription.link_ended(self.host, self.link)
            self.subscription = None
        if self.temporary and not queue.deleted:
            try:
                self.host.vhost.delete_queue(queue.name, owner=self.host.owner)
            except BrokerError as exc:  # pragma: no cover - our own exclusive queue
                log.warning("could not delete temporary %s: %s", queue.label, exc)
        self.temporary = False


# --------------------------------------------------------------------- attach


