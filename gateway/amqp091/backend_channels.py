"""Edge mode for 0-9-1 clients on an amqp10 backend (a 1.0-only broker such as ActiveMQ).

Theory of operation. connection.open of a vhost proxied to an amqp10 backend calls
``open_linked``: the gateway's own checks (as ``backend_relay.open_proxied``), then a
``LinkSession`` asks the proxy for a 1.0 connection to the backend
(``VhostProxy.connect_links``: ``amqp10.backend_client``). connection.open-ok goes to the
client once it opened; a refusal or no reachable node closes the client as for an
amqp091 backend. The channels are then the gateway's own (decoded), each a
``BackendChannel`` that carries its methods to links, by the address templates
(``gateway.backend.addresses``):

* basic.publish(X, RK) -> a sender link for the address the template makes (one per
  channel and address); in confirm mode basic.ack only after the backend's ``accepted``,
  basic.nack for any other outcome or a link the backend closed. Nothing is confirmed
  without the backend.
* basic.consume(Q) -> a receiver link with credit equal to the prefetch (basic.qos; the
  backend's ``prefetch`` ceiling, which is also the credit of a no-ack consumer); each
  settlement gives one credit back. basic.ack -> ``accepted``, basic.nack / basic.reject
  -> ``released`` with requeue, ``rejected`` without; basic.recover releases every unacked.
  basic.cancel stops the credit, releases what arrives after it and closes the link once
  its deliveries are settled.
* queue.declare(Q) is answered only after the backend attached a link to Q's address
  (a broker that makes queues on first use, as ActiveMQ 5 does, has then made it; one
  that does not refuses the attach, and the client gets 404 with its reason); the counts
  are 0, since 1.0 has no way to ask. exchange.declare of a direct or topic exchange and
  queue.bind are answered when the templates already route that way (``binding_refusal``).
  Everything else (server-named, exclusive or auto-delete queues, arguments, fanout and
  headers exchanges, deletes, purges, unbinds, basic.get, transactions) is refused with
  540 NOT_IMPLEMENTED naming the backend: never a silent no-op.

A lost backend connection closes the client's with 320 "backend NAME lost: ..."; the
client going closes the backend connection after releasing its unsettled deliveries.
"""
from __future__ import annotations

import itertools
import logging
from typing import Any, Optional

from gateway.amqp091 import methods as m
from gateway.amqp091.backend_relay import admit_backend_login, refuse_client
from gateway.amqp091.content import Content
from gateway.amqp091.errors import ChannelException, ConnectionException
from gateway.amqp091.handlers import CloseReason, ConnectionContext
from gateway.amqp091.message_mapping import container_from_publish, delivery_payload
from gateway.amqp091.spec import ReplyCode
from gateway.backend.addresses import (ACCEPTED, binding_refusal, outcome_for, publish_address,
                                       queue_address)
from gateway.backend.contract import BackendFailure, BackendLogin, lost_text
from gateway.backend.nodes import BackendNode, BackendNodes

__all__ = ["open_linked", "LinkSession", "BackendChannel"]

log = logging.getLogger(__name__)

_ctags = itertools.count(1)
#: exchange types whose routing the address templates (by routing key) can stand for
_ROUTED_TYPES = ("direct", "topic")
_DECLARE = object()  # the kind of a link opened only to check a queue's address


def open_linked(connection: Any, method: m.Method, backend: BackendNodes) -> None:
    """connection.open of a vhost on an amqp10 backend (see the module docstring)."""
    login = admit_backend_login(connection, method, backend)
    LinkSession(connection, backend, login)


class LinkSession:
    """The 0-9-1 connection's side of its 1.0 backend connection: the connector's and the
    engine's events, each link's passed to the channel that opened it."""

    def __init__(self, connection: Any, backend: BackendNodes, login: BackendLogin) -> None:
        self.connection = connection
        self.backend = backend
        self.settings = backend.settings
        self.name = backend.name
        self.engine: Any = None
        self.node: Optional[BackendNode] = None
        #: link key -> the channel that opened it
        self.channels: dict[Any, "BackendChannel"] = {}
        connection.relay.use_session(self)
        connection.add_close_callback(self._client_gone)
        self.handle = connection.relay.vhost_proxy.connect_links(backend, login, self)
        if connection.closed:
            self.handle.close("the client's connection closed")

    # ---- the connector ---------------------------------------------------------------------
    def opened(self, engine: Any, node: BackendNode) -> None:
        self.engine, self.node = engine, node
        self.connection.relay.open_with_handlers(self.connection, lambda context, channel_id: BackendChannel(self, context, channel_id))
        self.connection.output_ready()

    def failed(self, failure: BackendFailure) -> None:
        refuse_client(self.connection, failure)

    def lost(self, error: str) -> None:
        conn = self.connection
        if not conn.closed:
            conn.close(ReplyCode.CONNECTION_FORCED, lost_text(self.name, error))
            conn.output_ready()

    def _client_gone(self) -> None:
        if self.engine is not None and not self.engine.closed:
            self.engine.close("the client's connection closed")
        self.handle.close("the client's connection closed")

    # ---- the engine's link events, to their channel ------------------------------------------
    def link_ready(self, key: Any) -> None:
        self._to(key, "link_ready", key)

    def link_failed(self, key: Any, error: str, in_doubt: tuple) -> None:
        self._to(key, "link_failed", key, error, in_doubt)
        self.channels.pop(key, None)

    def outcome(self, key: Any, token: Any, outcome: str, error: str) -> None:
        self._to(key, "outcome", token, outcome)

    def delivered(self, key: Any, delivery: Any, message: Any, redelivered: bool) -> None:
        channel = self.channels.get(key)
        if channel is None:
            self.engine.settle(key, delivery, "released")
        else:
            channel.delivered(key, delivery, message, redelivered)
        self.connection.output_ready()

    def _to(self, key: Any, what: str, *args: Any) -> None:
        channel = self.channels.get(key)
        if channel is not None:
            getattr(channel, what)(*args)
            self.connection.output_ready()


class _Consumer:
    __slots__ = ("tag", "queue", "no_ack", "nowait", "ready", "cancelled", "unacked")

    def __init__(self, tag: str, queue: str, no_ack: bool, nowait: bool) -> None:
        self.tag, self.queue, self.no_ack, self.nowait = tag, queue, no_ack, nowait
        self.ready = False
        self.cancelled = False
        self.unacked = 0


class BackendChannel:
    """One 0-9-1 channel of a connection on an amqp10 backend (a ``ChannelHandler``; see
    the module docstring)."""

    def __init__(self, session: LinkSession, context: ConnectionContext, channel_id: int) -> None:
        self.session = session
        self.context = context
        self.writer = context.writer(channel_id)
        self.channel_id = channel_id
        self.confirm = False
        self._published = 0
        self._prefetch = 0
        self._keys = itertools.count(1)
        #: sender links by address, consumers and queue checks by link key
        self._senders: dict[str, Any] = {}
        self._consumers: dict[Any, _Consumer] = {}
        self._by_tag: dict[str, Any] = {}
        self._declares: dict[Any, m.QueueDeclare] = {}
        #: delivery tag -> (link key, the engine's delivery), in tag order
        self._unacked: dict[int, tuple[Any, Any]] = {}
        self._delivery_tags = itertools.count(1)
        self._last_queue = ""

    @property
    def _engine(self) -> Any:
        return self.session.engine

    def _key(self) -> Any:
        key = (self.channel_id, next(self._keys))
        self.session.channels[key] = self
        return key

    def _refuse(self, method: m.Method, what: str) -> None:
        raise ConnectionException(ReplyCode.NOT_IMPLEMENTED,
                                  f"{method.NAME}: {what} on backend {self.session.name} (amqp10)",
                                  method.CLASS_ID, method.METHOD_ID)

    # ---- ChannelHandler ----------------------------------------------------------------------
    def handle(self, method: m.Method, content: Content | None) -> None:
        kind = type(method)
        if kind is m.BasicPublish:
            self._publish(method, content)
        elif kind in (m.BasicAck, m.BasicNack, m.BasicReject):
            self._settle(method)
        elif kind is m.BasicQos:
            self._prefetch = method.prefetch_count
            self.writer.send_method(m.BasicQosOk())
        elif kind is m.ConfirmSelect:
            self.confirm = True
            if not method.nowait:
                self.writer.send_method(m.ConfirmSelectOk())
        elif kind is m.BasicConsume:
            self._consume(method)
        elif kind is m.BasicCancel:
            self._cancel(method)
        elif kind is m.BasicRecover:
            self._recover()
            self.writer.send_method(m.BasicRecoverOk())
        elif kind is m.QueueDeclare:
            self._declare_queue(method)
        elif kind is m.ExchangeDeclare:
            if method.type not in _ROUTED_TYPES or method.arguments:
                self._refuse(method, f"exchange type '{method.type}'"
                             + (" with arguments" if method.arguments else "")
                             + " cannot be carried (its publishes go by backends[].address)")
            if not method.nowait:
                self.writer.send_method(m.ExchangeDeclareOk())
        elif kind is m.QueueBind:
            refusal = binding_refusal(self.session.settings.address, self.session.name,
                                      method.queue or self._last_queue, method.exchange, method.routing_key)
            if refusal is not None:
                self._refuse(method, refusal)
            if not method.nowait:
                self.writer.send_method(m.QueueBindOk())
        elif kind is m.ChannelFlow:
            self.writer.send_method(m.ChannelFlowOk(active=method.active))
        else:
            self._refuse(method, "not carried")

    def closed(self, reason: CloseReason) -> None:
        engine = self._engine
        keys = [k for k, ch in self.session.channels.items() if ch is self]
        for key in keys:
            self.session.channels.pop(key, None)
            if engine is not None and not engine.closed:
                engine.close_link(key)  # releases what the client had not acked
        self._unacked.clear()

    def user_changed(self) -> None:
        pass  # the backend (passthrough) or the login's checks decided access

    # ---- publishing ----------------------------------------------------------------------------
    def _publish(self, method: m.Method, content: Content | None) -> None:
        assert content is not None
        message = container_from_publish(method, content, now=self.context.now,
                                         user_name=getattr(self.context.user, "name", None))
        address = publish_address(self.session.settings.address, method.exchange, method.routing_key)
        key = self._senders.get(address)
        if key is None:
            key = self._senders[address] = self._key()
            self._engine.open_sender(key, address)
        self._published += 1
        self._engine.send(key, self._published if self.confirm else None, message)

    def outcome(self, token: Any, outcome: str) -> None:
        if token is None:
            if outcome != ACCEPTED:
                log.warning("backend %s: a publish without confirms was %s", self.session.name, outcome)
            return
        self.writer.send_method(m.BasicAck(delivery_tag=token, multiple=False) if outcome == ACCEPTED
                                else m.BasicNack(delivery_tag=token, multiple=False, requeue=False))

    # ---- links ---------------------------------------------------------------------------------
    def link_ready(self, key: Any) -> None:
        declare = self._declares.pop(key, None)
        if declare is not None:
            self.session.channels.pop(key, None)
            self._engine.close_link(key)
            self._last_queue = declare.queue
            if not declare.nowait:
                self.writer.send_method(m.QueueDeclareOk(queue=declare.queue, message_count=0,
                                                         consumer_count=0))
            return
        consumer = self._consumers.get(key)
        if consumer is not None and not consumer.ready:
            consumer.ready = True
            if not consumer.nowait:
                self.writer.send_method(m.BasicConsumeOk(consumer_tag=consumer.tag))

    def link_failed(self, key: Any, error: str, in_doubt: tuple) -> None:
        text = f"backend {self.session.name}: {error}"
        declare = self._declares.pop(key, None)
        consumer = self._consumers.pop(key, None)
        if declare is not None:
            self.writer.close(ReplyCode.NOT_FOUND, f"NOT_FOUND - queue '{declare.queue}': {text}",
                              m.QueueDeclare.CLASS_ID, m.QueueDeclare.METHOD_ID)
            return
        if consumer is not None:
            self._by_tag.pop(consumer.tag, None)
            if consumer.ready:
                self.writer.send_method(m.BasicCancel(consumer_tag=consumer.tag, nowait=True))
            else:
                self.writer.close(ReplyCode.NOT_FOUND, f"NOT_FOUND - queue '{consumer.queue}': {text}",
                                  m.BasicConsume.CLASS_ID, m.BasicConsume.METHOD_ID)
            self._unacked = {t: v for t, v in self._unacked.items() if v[0] != key}
            return
        for address, sender in list(self._senders.items()):
            if sender == key:
                del self._senders[address]
        for token in in_doubt:
            if token is not None:
                self.writer.send_method(m.BasicNack(delivery_tag=token, multiple=False, requeue=False))

    # ---- consuming -----------------------------------------------------------------------------
    def _consume(self, method: m.Method) -> None:
        queue = method.queue or self._last_queue
        if not queue:
            raise ChannelException(ReplyCode.NOT_FOUND, "NOT_FOUND - no previously declared queue",
                                   method.CLASS_ID, method.METHOD_ID)
        if method.exclusive or method.arguments:
            self._refuse(method, "exclusive consumers and consumer arguments are not carried")
        tag = method.consumer_tag or f"amq.ctag-gw-{next(_ctags)}"
        if tag in self._by_tag:
            raise ConnectionException(ReplyCode.NOT_ALLOWED, f"NOT_ALLOWED - attempt to reuse consumer tag '{tag}'",
                                      method.CLASS_ID, method.METHOD_ID)
        ceiling = self.session.settings.prefetch
        credit = ceiling if method.no_ack or not self._prefetch else min(self._prefetch, ceiling)
        key = self._key()
        self._consumers[key] = _Consumer(tag, queue, method.no_ack, method.nowait)
        self._by_tag[tag] = key
        self._engine.open_receiver(key, queue_address(self.session.settings.address, queue), credit)

    def delivered(self, key: Any, delivery: Any, message: Any, redelivered: bool) -> None:
        consumer = self._consumers.get(key)
        engine = self._engine
        if consumer is None or consumer.cancelled:
            engine.settle(key, delivery, "released")
            return
        tag = next(self._delivery_tags)
        properties, body = delivery_payload(message)
        sent = self.writer.send_deliver(consumer.tag, tag, redelivered, message.exchange or "",
                                        message.routing_key or consumer.queue, properties, body)
        if not sent:
            engine.settle(key, delivery, "released")
        elif consumer.no_ack:
            engine.settle(key, delivery, ACCEPTED)
            engine.add_credit(key, 1)
        else:
            consumer.unacked += 1
            self._unacked[tag] = (key, delivery)

    def _settle(self, method: m.Method) -> None:
        tag = method.delivery_tag
        if type(method) is m.BasicAck:
            outcome = ACCEPTED
        else:
            outcome = outcome_for(method.requeue)
        multiple = getattr(method, "multiple", False)
        if multiple:
            tags = [t for t in self._unacked if t <= tag] if tag else list(self._unacked)
        elif tag in self._unacked:
            tags = [tag]
        else:
            raise ChannelException(ReplyCode.PRECONDITION_FAILED,
                                   f"PRECONDITION_FAILED - unknown delivery tag {tag}",
                                   method.CLASS_ID, method.METHOD_ID)
        for t in tags:
            self._settle_one(t, outcome)

    def _settle_one(self, tag: int, outcome: str) -> None:
        key, delivery = self._unacked.pop(tag)
        engine = self._engine
        engine.settle(key, delivery, outcome)
        consumer = self._consumers.get(key)
        if consumer is None:
            return
        consumer.unacked -= 1
        if not consumer.cancelled:
            engine.add_credit(key, 1)
        elif not consumer.unacked:
            self._close_consumer(key)

    def _recover(self) -> None:
        for tag in list(self._unacked):
            self._settle_one(tag, "released")

    def _cancel(self, method: m.Method) -> None:
        key = self._by_tag.pop(method.consumer_tag, None)
        consumer = self._consumers.get(key) if key is not None else None
        if consumer is not None:
            consumer.cancelled = True
            if not consumer.unacked:
                self._close_consumer(key)
        if not method.nowait:
            self.writer.send_method(m.BasicCancelOk(consumer_tag=method.consumer_tag))

    def _close_consumer(self, key: Any) -> None:
        self._consumers.pop(key, None)
        self.session.channels.pop(key, None)
        self._engine.close_link(key)

    # ---- declaring -----------------------------------------------------------------------------
    def _declare_queue(self, method: m.Method) -> None:
        if not method.queue:
            self._refuse(method, "server-named queues cannot be made")
        if method.exclusive or method.auto_delete or method.arguments:
            what = [n for n, v in (("exclusive", method.exclusive), ("auto-delete", method.auto_delete),
                                   ("arguments", bool(method.arguments))) if v]
            self._refuse(method, f"queue '{method.queue}': {', '.join(what)} cannot be carried")
        key = self._key()
        self._declares[key] = method
        self._engine.open_receiver(key, queue_address(self.session.settings.address, method.queue), 0)
