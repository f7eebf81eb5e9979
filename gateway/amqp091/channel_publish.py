"""The publishing methods of a 0-9-1 channel (basic.publish, routing with its ledger
verdict and basic.return, publisher confirms), as a mixin of ``BrokerChannel``.

The semantics (confirm batching, confirms held for the store) are in ``channel.py``'s
docstring. This is the per-message hot path: the names it compares with are module
globals here."""
from __future__ import annotations

import logging

from gateway.amqp091 import methods as m
from gateway.amqp091.content import Content
from gateway.amqp091.errors import ChannelException, ConnectionException
from gateway.amqp091.message_mapping import container_from_publish
from gateway.amqp091.spec import ReplyCode
from gateway.amqp091.transactions import PendingPublish, PublishMode
from gateway.auth.permissions import Action
from gateway.broker.errors import AccessRefused, BrokerError
from gateway.broker.message import MessageContainer
from gateway.ledger import EventKind

log = logging.getLogger(__name__)

NO_ROUTE_TEXT = "NO_ROUTE"
"""reply-text of basic.return for an unroutable mandatory message (RabbitMQ's)."""
QUEUE_FULL_TEXT = "queue full"
"""Ledger reason of a publish every target queue refused (``reject-publish`` overflow)."""

# read on every publish: a module global is four times cheaper to reach
_ROUTED = EventKind.ROUTED
# members the per-message paths compare with (a read through the enum class is a lookup)
_WRITE, _TX, _CONFIRM = Action.WRITE, PublishMode.TX, PublishMode.CONFIRM


class ChannelPublishing:
    """Publishing methods of ``BrokerChannel``; they use its ``vhost``, ``broker``,
    ``writer``, ``mode``, ``confirms``, ``tx``, ``_store``, ``_ledger_ctx`` and ``_permit``."""

    def _permit_global(self, method: m.Method) -> None:
        """A publish to ``node@container`` through the default exchange forwards when the
        container is another one: it needs WRITE on the whole address as well (RabbitMQ-
        style patterns match ``node@container``)."""
        key = method.routing_key
        if key.rpartition("@")[2] != self.broker.container_id:
            self._permit(_WRITE, key, method)

    # ---- basic: publish ------------------------------------------------------------------

    def _basic_publish(self, method: m.Method, content: Content | None) -> None:
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
                self._permit(_WRITE, exchange, method)
                self.may_publish.add(exchange)
            if "@" in method.routing_key and not method.exchange:
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
            self.tx.add(PendingPublish(method, content, message))
            return
        self._route(method, content, message, received=True)

    def _route(self, method: m.Method, content: Content, message: MessageContainer,
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
        if not result.queues and not result.routed:  # (``queues`` first: no property call)
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
            seq = confirms.next_seq()
            if result.rejected:
                self._flush_confirms()
                self.writer.send_method(m.BasicNack(delivery_tag=seq, multiple=False, requeue=False))
            elif confirms.hold(seq) if self._store.write_count != writes else confirms.add_ack(seq):
                self.writer.at_batch_end(self._flush_confirms)

    def _flush_confirms(self) -> None:
        """Send the pending run of acks as one basic.ack, and hand the held tags to the
        store (an end-of-batch hook)."""
        confirms = self.confirms
        ack = confirms.take_ack()
        if ack is not None:
            self.writer.send_method(ack)
        if confirms.held:
            upto = confirms.take_held()
            self._store.after_commit(lambda error: self._confirm_durable(upto, error))

    def _confirm_durable(self, upto: int, error: Exception | None) -> None:
        """The store committed (or failed) the writes of the publishes up to ``upto``."""
        if self.is_open:
            if error is not None:
                log.warning("nacking publishes up to %d on channel %d: %s", upto, self.channel_id, error)
            self.writer.send_method(self.confirms.answer(upto, error))

    # ---- confirm -------------------------------------------------------------------------

    def _confirm_select(self, method: m.Method, _: Content | None) -> None:
        if self.mode is PublishMode.TX:
            raise ChannelException(ReplyCode.PRECONDITION_FAILED, "cannot switch from tx to confirm mode",
                                   method.CLASS_ID, method.METHOD_ID)
        self.mode = PublishMode.CONFIRM
        if not method.nowait:
            self.writer.send_method(m.ConfirmSelectOk())
