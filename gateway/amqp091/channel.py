"""``BrokerChannel``: the 0-9-1 channel handler backed by the shared broker model.

``ServerConnection`` creates one per open channel through ``BrokerChannel.factory(broker)``
and passes it every exchange/queue/basic/confirm/tx method and channel.flow. Everything is
synchronous: a publish is routed (and delivered to waiting consumers, possibly of other
connections, whose output the edge flushes through ``ServerConnection.on_output``) before
``handle`` returns, so confirms can be sent at once.

Semantics follow RabbitMQ 3.x where the specification leaves room:

* basic.qos: a non-zero ``prefetch_size`` is 540 NOT_IMPLEMENTED "prefetch_size!=0 (N)",
  a connection error (class 60, method 10) exactly as RabbitMQ answers it: byte-based
  prefetch is not implemented there either, and silently accepting it would let a client
  believe it is limited. ``global=false`` sets the prefetch of consumers created
  afterwards, ``global=true`` a limit shared by all consumers of the channel
  (``per_consumer_qos``). No-ack consumers are not limited.
* basic.publish ``immediate`` is 540 (connection); an ``expiration`` that is not a
  non-negative integer string, or a ``user_id`` naming another user, is 406.
* Queue name ``""`` in bind/consume/get/purge/delete means the channel's last declared
  queue (404 "no previously declared queue" if none); an empty routing key on queue.bind
  with queue ``""`` becomes that queue's name.
* Reusing a consumer tag on a channel is 530 (connection); an exclusive-consumer conflict is
  403, another connection's exclusive queue 405. ``no_local`` and consumer arguments
  (``x-priority`` ...) are accepted and ignored, as RabbitMQ ignores ``no_local``.
* channel.flow from the client: ``active=false`` stops deliveries to this channel's
  consumers (basic.get still works) until ``active=true``; both are answered with flow-ok.
* ack/nack/reject of a tag that is not outstanding is 406 "unknown delivery tag N".
* basic.recover with ``requeue=false`` is 540, as in RabbitMQ 3.
* Unacknowledged deliveries (including those acked in an uncommitted transaction) go back
  to their queues, flagged redelivered, when the channel closes.
* Publisher confirms: the acks of consecutive publishes of one batch of input go out as one
  basic.ack ``multiple=true`` (see ``transactions``), at the end of the batch, before any
  other reply on this channel, or before the channel closes; nacks are sent one by one.
  A publish the durable store wrote is acked once the store synced it, with the ones after
  it (see ``transactions``); a failed write nacks them. tx.commit-ok waits the same way; a
  failed write closes the connection, 541 naming the problem (no other way to fail it).

Ledger (``broker.ledger``, a ``gateway.ledger.Ledger``): received, the routing verdict
(routed / unroutable / returned / refused), delivered (deliver and get-ok) and settled
(ack: accepted; reject/nack: rejected or, with requeue, released; no-ack: accepted at
once; unacked at channel close: released) are recorded here, under the channel's context
(``link`` the channel number, ``connection`` the edge's connection id).

Where: the channel's life, consumers, deliveries, basic.get, channel.flow, and the
methods that involve both sides below (ack/nack/reject/recover, tx.commit/rollback) are
here. Its collaborators own their state and never call each other: publishing (publish
mode, confirms, the tx buffer) is ``channel_publish.ChannelPublishing``, the unacked
deliveries and their settlement ``channel_settlement.ChannelSettlement``, exchanges and
queues (and the last declared queue) ``channel_topology.ChannelTopology``.
"""
from __future__ import annotations

import base64
import logging
import secrets
from typing import Any, Callable

from gateway.amqp091 import methods as m
from gateway.amqp091.channel_publish import ChannelPublishing
from gateway.amqp091.channel_settlement import ChannelSettlement
from gateway.amqp091.channel_topology import ChannelTopology
from gateway.amqp091.connection_scope import ConnectionScope, scope_for
from gateway.amqp091.consumer import ChannelConsumer, Unacked
from gateway.amqp091.content import Content
from gateway.amqp091.error_map import amqp_error
from gateway.amqp091.errors import ChannelException, ConnectionException
from gateway.amqp091.handlers import ChannelHandlerFactory, CloseReason, ConnectionContext
from gateway.amqp091.message_mapping import delivery_payload, with_delivery_count
from gateway.amqp091.spec import ReplyCode
from gateway.amqp091.transactions import PendingSettle, PublishMode, SettleKind
from gateway.auth.permissions import Action
from gateway.broker.errors import BrokerError, ResourceLocked
from gateway.broker.flow import CreditWindow
from gateway.broker.queues import QueuedMessage
from gateway.broker.store_marks import StoreMark
from gateway.broker.transaction import WorkKind
from gateway.ledger import Protocol as WireProtocol

__all__ = ["BrokerChannel"]

log = logging.getLogger(__name__)

_P091 = WireProtocol.AMQP091.value
# members the per-message paths compare with (a read through the enum class is a lookup)
_ACK, _REQUEUE, _REJECT = SettleKind.ACK, SettleKind.REQUEUE, SettleKind.REJECT


def _consumer_tag() -> str:
    token = base64.urlsafe_b64encode(secrets.token_bytes(16)).rstrip(b"=").decode("ascii")
    return f"amq.ctag-{token}"


class BrokerChannel:
    """One open 0-9-1 channel; see the module docstring for the contract."""

    def __init__(self, context: ConnectionContext, channel_id: int, broker: Any,
                 scope: ConnectionScope) -> None:
        self.context = context
        #: the connection (its ``now`` is read on every publish and settlement: the
        #: context's property would be one more call each time)
        self.connection = context.connection
        self.channel_id = channel_id
        self.broker = broker
        self.scope = scope
        self.vhost = context.vhost
        self.owner = scope.owner
        self.writer = context.writer(channel_id)
        self.consumers: dict[str, ChannelConsumer] = {}
        # window chain: consumer -> global (qos global) -> root; flow off hangs a
        # zero-credit window under root, so the hot path never checks a flag
        self._root = CreditWindow.prefetch(0)
        self._paused = CreditWindow.link_credit(0)
        self.global_window = CreditWindow.prefetch(0, parent=self._root)
        self.prefetch_count = 0
        self.flow_active = True
        self.is_open = True
        user = context.user
        user_name: str | None = getattr(user, "name", None)
        conn_id = getattr(context.connection, "connection_id", None)
        ledger = broker.ledger
        #: the channel's ledger context (None: no ledger)
        self._ledger_ctx = None if ledger is None else ledger.context(
            context.now, context.vhost_name, user_name, _P091,
            None if conn_id is None else str(conn_id), channel_id)
        self.publishing = ChannelPublishing(context, channel_id, broker, scope, self.writer, user_name,
                                            self._ledger_ctx)
        self.settlement = ChannelSettlement(ledger, self._ledger_ctx)
        self.topology = ChannelTopology(self.vhost, scope, self.writer, self.connection, broker.store,
                                        context)

    @property
    def mode(self) -> PublishMode:
        """The publish mode (plain, confirm or tx), as management shows it."""
        return self.publishing.mode

    @property
    def unacked(self) -> Any:
        """The outstanding deliveries (``len`` of it), as management shows it."""
        return self.settlement.unacked

    @classmethod
    def factory(cls, broker: Any) -> ChannelHandlerFactory:
        """The ``channel_handler_factory`` for ``ServerConnection``: ``(context,
        channel_id) -> BrokerChannel``; channels of one connection share a scope."""
        registry: dict[int, ConnectionScope] = {}

        def make(context: ConnectionContext, channel_id: int) -> "BrokerChannel":
            return cls(context, channel_id, broker, scope_for(context, broker, registry))

        return make  # type: ignore[return-value]

    # ---- ChannelHandler ----------------------------------------------------------------

    def handle(self, method: m.Method, content: Content | None) -> None:
        """Carry out ``method``. Raises ``ChannelException``/``ConnectionException`` with
        the reply code RabbitMQ uses (broker errors go through ``error_map``)."""
        kind = type(method)
        publishing = self.publishing
        if publishing.confirms.first and kind not in _NO_REPLY:
            publishing.flush_confirms()  # replies keep their place after earlier publishes' acks
        found = _HANDLERS.get(kind)
        if found is None:
            raise ConnectionException(ReplyCode.COMMAND_INVALID, f"{method.NAME} is not expected here",
                                      method.CLASS_ID, method.METHOD_ID)
        part, handler = found
        try:
            handler(self if part is None else getattr(self, part), method, content)
        except BrokerError as exc:
            raise amqp_error(exc, method) from None

    def user_changed(self) -> None:
        """The user record was re-read (update-secret): its grants are asked again (the
        scope's ``PermissionCache`` follows the record by itself)."""
        self.publishing.user_changed()

    def closed(self, reason: CloseReason) -> None:
        """The channel is gone: cancel its consumers and requeue what it did not ack."""
        if not self.is_open:
            return
        self.is_open = False
        self.topology.close()
        now = self.connection.now
        consumers, self.consumers = list(self.consumers.values()), {}
        for consumer in consumers:
            if not consumer.queue.deleted:
                consumer.queue.remove_consumer(consumer, now)
        self.settlement.release_all(self.publishing.close(), now)
        ledger = self.broker.ledger
        if ledger is not None:
            ledger.close_context(now, self._ledger_ctx)

    # ---- consumer callbacks (from the broker, possibly outside handle) -------------------

    def deliver(self, consumer: ChannelConsumer, entry: QueuedMessage, now: float) -> None:
        """basic.deliver for ``entry`` (already acquired for ``consumer``) at ``now``."""
        message = entry.message
        unacked = self.settlement.unacked
        tag = unacked.next_tag() if consumer.no_ack else unacked.track(entry, consumer.credit)
        self.context.trail.messages_out += 1
        ledger = self.broker.ledger
        if ledger is not None:
            if consumer.no_ack:
                ledger.delivered_settled(now, self._ledger_ctx, entry, consumer.queue.name)
            else:
                ledger.delivered(now, self._ledger_ctx, entry, consumer.queue.name)
        if consumer.no_ack:
            consumer.queue.settle(entry)
            consumer.credit.settle_one()
        props, body = delivery_payload(message)
        if consumer.queue.quorum:
            props = with_delivery_count(props, entry.delivery_count)
        self.writer.send_deliver(consumer.tag, tag, entry.redelivered, message.exchange,
                                 message.routing_key, props, body)

    def consumer_cancelled(self, consumer: ChannelConsumer, reason: str) -> None:
        """The queue went away: forget the consumer and tell a client that asked for
        ``consumer_cancel_notify`` with a server-sent basic.cancel."""
        if self.consumers.get(consumer.tag) is consumer:
            del self.consumers[consumer.tag]
            caps = self.context.client_properties.get("capabilities")
            if isinstance(caps, dict) and caps.get("consumer_cancel_notify") is True:
                self.writer.send_method(m.BasicCancel(consumer_tag=consumer.tag, nowait=True))
            log.debug("consumer %s cancelled by the broker: %s", consumer.tag, reason)

    # ---- channel.flow ----------------------------------------------------------------------

    def _channel_flow(self, method: m.Method, _: Content | None) -> None:
        active = bool(method.active)
        self.flow_active = active
        self._root.parent = None if active else self._paused
        self.writer.send_method(m.ChannelFlowOk(active=active))
        if active:
            self._dispatch_all()

    def _channel_flow_ok(self, method: m.Method, _: Content | None) -> None:
        """We never send channel.flow, so an unsolicited flow-ok is ignored."""

    # ---- basic: consumers ----------------------------------------------------------------

    def _basic_qos(self, method: m.Method, _: Content | None) -> None:
        if method.prefetch_size:
            raise ConnectionException(ReplyCode.NOT_IMPLEMENTED, f"prefetch_size!=0 ({method.prefetch_size})",
                                      method.CLASS_ID, method.METHOD_ID)
        count = method.prefetch_count
        if method.global_:
            self.global_window.limit = count
        else:
            self.prefetch_count = count
        self.writer.send_method(m.BasicQosOk())
        if method.global_:
            self._dispatch_all()

    def _basic_consume(self, method: m.Method, _: Content | None) -> None:
        name = self.topology.queue_name(method.queue, method)
        self.scope.require(Action.READ, name, method)
        tag = method.consumer_tag or _consumer_tag()
        if tag in self.consumers:
            raise ConnectionException(ReplyCode.NOT_ALLOWED, f"attempt to reuse consumer tag '{tag}'",
                                      method.CLASS_ID, method.METHOD_ID)
        queue = self.vhost.checked_queue(name, self.owner)
        if method.no_ack:
            window = CreditWindow.prefetch(0, parent=self._root)
        else:
            window = CreditWindow.prefetch(self.prefetch_count, parent=self.global_window)
        real_parent = window.parent
        window.parent = self._paused  # nothing may be delivered before consume-ok
        consumer = ChannelConsumer(self, tag, queue, no_ack=method.no_ack, exclusive=method.exclusive,
                                   credit=window)
        now = self.connection.now
        try:
            queue.add_consumer(consumer, now)
        except ResourceLocked:
            raise ChannelException(ReplyCode.ACCESS_REFUSED, f"{queue.label} in exclusive use",
                                   method.CLASS_ID, method.METHOD_ID) from None
        self.consumers[tag] = consumer
        if not method.nowait:
            self.writer.send_method(m.BasicConsumeOk(consumer_tag=tag))
        window.parent = real_parent
        queue.dispatch(now)

    def _basic_cancel(self, method: m.Method, _: Content | None) -> None:
        consumer = self.consumers.pop(method.consumer_tag, None)
        if not method.nowait:
            self.writer.send_method(m.BasicCancelOk(consumer_tag=method.consumer_tag))
        if consumer is not None and not consumer.queue.deleted:
            consumer.queue.remove_consumer(consumer, self.connection.now)

    def _basic_cancel_ok(self, method: m.Method, _: Content | None) -> None:
        """A client confirming our server-sent cancel; nothing to do."""

    def _dispatch_all(self) -> None:
        now = self.connection.now
        for queue in {c.queue: None for c in self.consumers.values()}:
            if not queue.deleted:
                queue.dispatch(now)


    # ---- basic: get ------------------------------------------------------------------------

    def _basic_get(self, method: m.Method, _: Content | None) -> None:
        name = self.topology.queue_name(method.queue, method)
        self.scope.require(Action.READ, name, method)
        queue = self.vhost.checked_queue(name, self.owner)
        entry = queue.get(self.connection.now, ack=not method.no_ack)
        if entry is None:
            self.writer.send_method(m.BasicGetEmpty())
            return
        unacked = self.settlement.unacked
        tag = unacked.next_tag() if method.no_ack else unacked.track(entry, None)
        self.context.trail.messages_out += 1
        message = entry.message
        ledger = self.broker.ledger
        if ledger is not None:
            now = self.connection.now
            if method.no_ack:
                ledger.delivered_settled(now, self._ledger_ctx, entry, queue.name)
            else:
                ledger.delivered(now, self._ledger_ctx, entry, queue.name)
        props, body = delivery_payload(message)
        if queue.quorum:
            props = with_delivery_count(props, entry.delivery_count)
        self.writer.send_content(
            m.BasicGetOk(delivery_tag=tag, redelivered=entry.redelivered, exchange=message.exchange,
                         routing_key=message.routing_key, message_count=queue.message_count),
            props, body)

    # ---- basic: settlement (settled at once, or held by the open transaction) -------------

    def _basic_ack(self, method: m.Method, _: Content | None) -> None:
        self._settle(_ACK, self.settlement.take(method.delivery_tag, method.multiple, method), True)

    def _basic_nack(self, method: m.Method, _: Content | None) -> None:
        kind = _REQUEUE if method.requeue else _REJECT
        self._settle(kind, self.settlement.take(method.delivery_tag, method.multiple, method), True)

    def _basic_reject(self, method: m.Method, _: Content | None) -> None:
        kind = _REQUEUE if method.requeue else _REJECT
        self._settle(kind, self.settlement.take(method.delivery_tag, False, method), True)

    def _settle(self, kind: SettleKind, items: list[Unacked], hold_in_tx: bool = False) -> None:
        """Settle ``items`` (``hold_in_tx``: unless a transaction is open, which holds them
        until commit), then let the freed windows take more: the channel's consumers' queues
        when a global prefetch limit is set, and the queues the items came from."""
        if hold_in_tx and self.publishing.tx is not None:
            self.publishing.buffer_settle(PendingSettle(kind, items))
            return
        now = self.connection.now
        queues = self.settlement.settle(kind, items, now)
        if self.global_window.limit:
            self._dispatch_all()
        for queue in queues:
            if not queue.deleted and queue.consumers:
                queue.dispatch(now)

    def _recover(self, method: m.Method, sync: bool) -> None:
        if not method.requeue:
            raise ConnectionException(ReplyCode.NOT_IMPLEMENTED, "requeue=false", method.CLASS_ID,
                                      method.METHOD_ID)
        if sync:
            self.writer.send_method(m.BasicRecoverOk())
        self._settle(_REQUEUE, self.settlement.unacked.take_all())

    def _basic_recover(self, method: m.Method, _: Content | None) -> None:
        self._recover(method, True)

    def _basic_recover_async(self, method: m.Method, _: Content | None) -> None:
        self._recover(method, False)

    # ---- tx: the publishing side buffers, the commit hands each part to its side ---------

    def _tx_commit(self, method: m.Method, _: Content | None) -> None:
        publishing = self.publishing
        store = self.broker.store
        mark = StoreMark(store)
        with store.one_commit():  # on disk all together, or not at all
            for kind, work in publishing.transaction(method).take():
                if kind is WorkKind.POST:
                    publishing.route(work.method, work.content, work.message)
                else:
                    self._settle(work.kind, work.items)
        mark.answer(self._tx_durable)

    def _tx_durable(self, error: Exception | None) -> None:
        """The store committed (or failed) what a tx.commit wrote: answer it."""
        if not self.is_open:
            return
        if error is None:
            self.writer.send_method(m.TxCommitOk())
        else:
            self.context.close_connection(
                ReplyCode.INTERNAL_ERROR, f"tx.commit failed, its messages may not be stored: {error}")

    def _tx_rollback(self, method: m.Method, _: Content | None) -> None:
        self.settlement.restore(self.publishing.rollback(method))
        self.writer.send_method(m.TxRollbackOk())


_Handler = Callable[[Any, Any, Content | None], None]

_HANDLERS: dict[type, tuple[str | None, _Handler]] = {
    m.ChannelFlow: (None, BrokerChannel._channel_flow),
    m.ChannelFlowOk: (None, BrokerChannel._channel_flow_ok),
    m.ExchangeDeclare: ("topology", ChannelTopology.exchange_declare),
    m.ExchangeDelete: ("topology", ChannelTopology.exchange_delete),
    m.ExchangeBind: ("topology", ChannelTopology.exchange_bind),
    m.ExchangeUnbind: ("topology", ChannelTopology.exchange_unbind),
    m.QueueDeclare: ("topology", ChannelTopology.queue_declare),
    m.QueueBind: ("topology", ChannelTopology.queue_bind),
    m.QueueUnbind: ("topology", ChannelTopology.queue_unbind),
    m.QueuePurge: ("topology", ChannelTopology.queue_purge),
    m.QueueDelete: ("topology", ChannelTopology.queue_delete),
    m.BasicQos: (None, BrokerChannel._basic_qos),
    m.BasicConsume: (None, BrokerChannel._basic_consume),
    m.BasicCancel: (None, BrokerChannel._basic_cancel),
    m.BasicCancelOk: (None, BrokerChannel._basic_cancel_ok),
    m.BasicPublish: ("publishing", ChannelPublishing.publish),
    m.BasicGet: (None, BrokerChannel._basic_get),
    m.BasicAck: (None, BrokerChannel._basic_ack),
    m.BasicNack: (None, BrokerChannel._basic_nack),
    m.BasicReject: (None, BrokerChannel._basic_reject),
    m.BasicRecover: (None, BrokerChannel._basic_recover),
    m.BasicRecoverAsync: (None, BrokerChannel._basic_recover_async),
    m.ConfirmSelect: ("publishing", ChannelPublishing.select_confirm),
    m.TxSelect: ("publishing", ChannelPublishing.select_tx),
    m.TxCommit: (None, BrokerChannel._tx_commit),
    m.TxRollback: (None, BrokerChannel._tx_rollback),
}
"""Method class -> (the channel's attribute holding the collaborator that handles it, None:
the channel itself; the handler); a method missing here is 503 COMMAND_INVALID."""

_NO_REPLY = frozenset({m.BasicPublish, m.BasicAck, m.BasicNack, m.BasicReject})
"""Methods that never answer on the channel, so pending confirms need not go out first
(a consume-and-republish loop on one channel still gets its acks coalesced)."""
