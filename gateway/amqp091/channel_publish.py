"""``ChannelPublishing``: a 0-9-1 channel's publishing side (basic.publish, routing with
its ledger verdict and basic.return, publisher confirms, the tx buffer).

It owns the channel's publish mode (plain, confirm or tx: confirm.select and tx.select
are answered here), the confirm tracker, the buffer of the open transaction and the
exchanges the user may publish to. The semantics (confirm batching, confirms held for
the store) are in ``channel.py``'s docstring. The channel drives a tx.commit: it takes
the buffered work from here and hands the publishes back to :meth:`route` and the acks
to its settlement side. This is the per-message hot path: the names it compares with are
module globals here."""
from __future__ import annotations

import logging
from typing import Any

from addressing import split_global
from gateway import timeline
from gateway.amqp091 import methods as m
from gateway.amqp091.connection_scope import ConnectionScope
from gateway.amqp091.consumer import Unacked
from gateway.amqp091.content import Content
from gateway.amqp091.errors import ChannelException, ConnectionException
from gateway.amqp091.handlers import ConnectionContext
from gateway.amqp091.message_mapping import container_from_publish
from gateway.amqp091.spec import ReplyCode
from gateway.amqp091.transactions import (ConfirmTracker, PendingPublish, PendingSettle, PublishMode, TxBuffer,
                                          settled_items)
from gateway.auth.permissions import Action
from gateway.broker.errors import AccessRefused, BrokerError
from gateway.broker.message import MessageContainer
from gateway.ledger import EventKind

__all__ = ["ChannelPublishing", "NO_ROUTE_TEXT", "QUEUE_FULL_TEXT"]

log = logging.getLogger(__name__)

NO_ROUTE_TEXT = "NO_ROUTE"
"""reply-text of basic.return for an unroutable mandatory message (RabbitMQ's)."""
QUEUE_FULL_TEXT = "queue full"
"""Ledger reason of a publish every target queue refused (``reject-publish`` overflow)."""

# read on every publish: a module global is four times cheaper to reach
_ROUTED = EventKind.ROUTED
# members the per-message paths compare with (a read through the enum class is a lookup)
_WRITE, _TX, _CONFIRM = Action.WRITE, PublishMode.TX, PublishMode.CONFIRM
#: global addresses a channel remembers it may publish to (more are checked each time)
_MAY_FORWARD_KEPT = 256


class ChannelPublishing:
    """The publishing side of one channel; see the module docstring. It keeps no
    reference to its channel (the channel holds it): what it needs is handed over at
    construction, ``ledger_ctx`` being the channel's ledger context."""

    __slots__ = ("mode", "confirms", "tx", "may_publish", "may_forward", "is_open", "context", "connection",
                 "channel_id", "broker", "vhost", "writer", "scope", "_store", "_user_name",
                 "_ledger_ctx")

    def __init__(self, context: ConnectionContext, channel_id: int, broker: Any, scope: ConnectionScope,
                 writer: Any, user_name: str | None, ledger_ctx: Any) -> None:
        self.mode = PublishMode.PLAIN
        self.confirms = ConfirmTracker()
        #: the open transaction's work (None until tx.select)
        self.tx: TxBuffer | None = None
        #: exchanges this channel's user may publish to (WRITE granted, kept for the
        #: connection's life like the scope's answers: no check per publish)
        self.may_publish: set[str] = set()
        #: global addresses (``node@container``) it may publish to through the default
        #: exchange, as ``may_publish`` (:meth:`_permit_global`)
        self.may_forward: set[str] = set()
        #: False once the channel closed (the store's late answers are then dropped)
        self.is_open = True
        self.context = context
        #: the connection (its ``now`` is read on every publish: the context's property
        #: would be one more call each time)
        self.connection = context.connection
        self.channel_id = channel_id
        self.broker = broker
        self.vhost = context.vhost
        self.writer = writer
        self.scope = scope
        self._store = broker.store
        self._user_name = user_name
        self._ledger_ctx = ledger_ctx

    def user_changed(self) -> None:
        """The user record was re-read (update-secret): ask its WRITE grants again."""
        self.may_publish.clear()
        self.may_forward.clear()

    def close(self) -> list[Unacked]:
        """The channel closed: drop the open transaction; returns the deliveries it had
        acknowledged (the channel releases them with the rest)."""
        self.is_open = False
        return [] if self.tx is None else _drop(self.tx)

    def _permit_global(self, method: m.Method) -> None:
        """A publish to ``node@container`` through the default exchange forwards when the
        container is another one: it needs WRITE on the whole address as well (RabbitMQ-
        style patterns match ``node@container``). Granted, the address joins
        ``may_forward`` (up to ``_MAY_FORWARD_KEPT`` of them)."""
        key = method.routing_key
        parts = split_global(key)
        if parts is None or parts[1] != self.broker.container_id:
            self.scope.require(_WRITE, key, method)
        if len(self.may_forward) < _MAY_FORWARD_KEPT:
            self.may_forward.add(key)

    # ---- basic: publish ------------------------------------------------------------------

    def publish(self, method: m.Method, content: Content | None) -> None:
        """basic.publish: route it now, or buffer it in the open transaction."""
        assert content is not None
        if method.immediate:
            raise ConnectionException(ReplyCode.NOT_IMPLEMENTED, "immediate=true", method.CLASS_ID,
                                      method.METHOD_ID)
        self.context.trail.messages_in += 1
        now = self.connection.now
        ledger = self.broker.ledger
        try:
            exchange = method.exchange
            if exchange not in self.may_publish:
                self.scope.require(_WRITE, exchange, method)
                self.may_publish.add(exchange)
            if "@" in method.routing_key and not exchange and method.routing_key not in self.may_forward:
                self._permit_global(method)
            message = container_from_publish(method, content, now=now, user_name=self._user_name)
        except ChannelException as exc:
            if ledger is not None:  # before it was taken in: no gateway id
                ledger.refused(now, self._ledger_ctx, exc.reply_text, exchange=method.exchange,
                               routing_key=method.routing_key)
            raise
        if ledger is not None:
            message.gateway_id = self.broker.next_gateway_id()
        if self.mode is _TX:
            if ledger is not None:  # routed (or not) at commit
                ledger.received(now, self._ledger_ctx, message)
            try:
                exchange = self.vhost.checked_exchange(method.exchange)  # 404 now, not at commit
                if exchange.internal:
                    raise AccessRefused(f"cannot publish to internal {exchange.label}")
            except BrokerError as exc:
                if ledger is not None:
                    ledger.verdict(now, self._ledger_ctx, message, EventKind.REFUSED,
                                   reason=exc.text)
                raise
            assert self.tx is not None
            self.tx.post(PendingPublish(method, content, message))
            return
        self.route(method, content, message, received=True)

    def route(self, method: m.Method, content: Content, message: MessageContainer,
               received: bool = False) -> None:
        """Route a publish; ``received``: the message is recorded here, with its routing
        verdict (else it was at publish, in a transaction, and the verdict is recorded alone)."""
        now = self.connection.now
        ledger = self.broker.ledger
        record = None if ledger is None else ledger.received if received else ledger.verdict
        writes = self._store.write_count
        try:
            result = self.vhost.publish(method.exchange, method.routing_key, message, now)
        except BrokerError as exc:
            if record is not None:
                record(now, self._ledger_ctx, message, EventKind.REFUSED, None, exc.text)
            raise
        if result.service is not None and self.broker.paused_flow is not None:
            self.connection.pause_for_flow(self.broker.take_paused_flow())
        if record is not None:
            if result.queues or result.service is not None:
                event, reason = _ROUTED, None
            elif result.rejected:
                event, reason = EventKind.REFUSED, QUEUE_FULL_TEXT
            elif method.mandatory:
                event, reason = EventKind.RETURNED, NO_ROUTE_TEXT
            else:
                event, reason = EventKind.UNROUTABLE, None
            record(now, self._ledger_ctx, message, event, result.queues, reason)
        if not result.queues and result.service is None and not result.routed:  # (no property call
            # for the usual results: queues or a service)
            if method.mandatory:
                self.broker.unroutable.returned_amqp091 += 1
                self.writer.send_content(
                    m.BasicReturn(reply_code=ReplyCode.NO_ROUTE, reply_text=NO_ROUTE_TEXT,
                                  exchange=method.exchange, routing_key=method.routing_key),
                    content.properties_bytes, content.body)
            else:
                self.broker.unroutable.dropped_amqp091 += 1
        if self.mode is _CONFIRM:
            confirms = self.confirms
            if result.rejected:
                seq = confirms.next_seq()
                self.flush_confirms()
                self.writer.send_method(m.BasicNack(delivery_tag=seq, multiple=False, requeue=False))
            elif (confirms.hold_next() if self._store.write_count != writes
                  else confirms.add_ack(confirms.next_seq())):
                self.writer.at_batch_end(self.flush_confirms)

    def flush_confirms(self) -> None:
        """Send the pending run of acks as one basic.ack, and hand the held tags to the
        store (an end-of-batch hook)."""
        confirms = self.confirms
        ack = confirms.take_ack()
        if ack is not None:
            self.writer.send_method(ack)
        if confirms.held:
            upto = confirms.take_held()
            # before ``after_commit``, which may run the callback at once
            confirms.runs.append(self._store.latest_generation)
            self._store.after_commit(lambda error: self._confirm_durable(upto, error))

    def _confirm_durable(self, upto: int, error: Exception | None) -> None:
        """The store committed (or failed) the writes of the publishes up to ``upto``.
        Skipped when the next run of this channel is committed too: its callback comes
        later in the same commit report, and its one basic.ack (``multiple``) covers
        this run (one ack per channel per report, not one per generation)."""
        confirms = self.confirms
        runs = confirms.runs
        runs.popleft()
        if self.is_open:
            if error is None and runs and self._store.is_committed(runs[0]):
                return
            if error is not None:
                log.warning("nacking publishes up to %d on channel %d: %s", upto, self.channel_id, error)
            self.writer.send_method(confirms.answer(upto, error))
            marks = timeline.recorder
            if marks is not None:
                marks.mark("confirmed", upto)

    # ---- modes --------------------------------------------------------------------------

    def select_confirm(self, method: m.Method, _: Content | None) -> None:
        """confirm.select (406 in a transactional channel)."""
        if self.mode is PublishMode.TX:
            raise ChannelException(ReplyCode.PRECONDITION_FAILED, "cannot switch from tx to confirm mode",
                                   method.CLASS_ID, method.METHOD_ID)
        self.mode = PublishMode.CONFIRM
        if not method.nowait:
            self.writer.send_method(m.ConfirmSelectOk())

    def select_tx(self, method: m.Method, _: Content | None) -> None:
        """tx.select (406 in a channel in confirm mode)."""
        if self.mode is PublishMode.CONFIRM:
            raise ChannelException(ReplyCode.PRECONDITION_FAILED, "cannot switch from confirm to tx mode",
                                   method.CLASS_ID, method.METHOD_ID)
        self.mode = PublishMode.TX
        if self.tx is None:
            self.tx = TxBuffer()
        self.writer.send_method(m.TxSelectOk())

    def transaction(self, method: m.Method) -> TxBuffer:
        """The open transaction; 406 "channel is not transactional" without tx.select."""
        if self.tx is None:
            raise ChannelException(ReplyCode.PRECONDITION_FAILED, "channel is not transactional",
                                   method.CLASS_ID, method.METHOD_ID)
        return self.tx

    def buffer_settle(self, settle: PendingSettle) -> None:
        """Hold an ack/nack/reject in the open transaction (the caller checked ``tx``)."""
        assert self.tx is not None
        self.tx.retire(settle)

    def rollback(self, method: m.Method) -> list[Unacked]:
        """tx.rollback: drop the transaction's work; returns the deliveries it had
        acknowledged (outstanding again)."""
        return _drop(self.transaction(method))


def _drop(tx: TxBuffer) -> list[Unacked]:
    """Empty ``tx``; the deliveries its acks had taken."""
    items = settled_items(tx)
    tx.take()
    return items
