"""``ChannelTopology``: the exchange and queue methods of a 0-9-1 channel (declare, bind,
unbind, purge, delete) over the channel's vhost.

They change the broker's topology and reply. The one state they keep is the channel's
last declared queue, which queue name ``""`` means in bind/consume/get/purge/delete
(:meth:`ChannelTopology.queue_name`; the channel's consume and get ask it too)."""
from __future__ import annotations

from typing import Any

from gateway.amqp091 import methods as m
from gateway.amqp091.connection_scope import ConnectionScope
from gateway.amqp091.content import Content
from gateway.amqp091.error_map import access_refused
from gateway.amqp091.errors import ChannelException
from gateway.amqp091.spec import ReplyCode
from gateway.auth.permissions import Action
from gateway.broker.exchanges import DestinationKind

__all__ = ["ChannelTopology"]


class ChannelTopology:
    """The topology methods of one channel, on ``vhost`` for the connection ``scope``
    (permissions, the owner of exclusive queues); replies go to ``writer``."""

    __slots__ = ("vhost", "scope", "owner", "writer", "connection", "last_queue")

    def __init__(self, vhost: Any, scope: ConnectionScope, writer: Any, connection: Any) -> None:
        self.vhost = vhost
        self.scope = scope
        self.owner = scope.owner
        self.writer = writer
        #: the connection (its ``now`` stamps a declared queue)
        self.connection = connection
        self.last_queue = ""

    def queue_name(self, name: str, method: m.Method) -> str:
        """``name``, or for ``""`` the last queue this channel declared (404 "no
        previously declared queue" when none)."""
        if name:
            return name
        if not self.last_queue:
            raise ChannelException(ReplyCode.NOT_FOUND, "no previously declared queue",
                                   method.CLASS_ID, method.METHOD_ID)
        return self.last_queue

    # ---- exchange ------------------------------------------------------------------------

    def exchange_declare(self, method: m.Method, _: Content | None) -> None:
        if not method.passive:
            self.scope.require(Action.CONFIGURE, method.exchange, method)
        self.vhost.declare_exchange(
            method.exchange, method.type, passive=method.passive, durable=method.durable,
            auto_delete=method.auto_delete, internal=method.internal, arguments=method.arguments or {})
        if not method.nowait:
            self.writer.send_method(m.ExchangeDeclareOk())

    def exchange_delete(self, method: m.Method, _: Content | None) -> None:
        self.scope.require(Action.CONFIGURE, method.exchange, method)
        self.vhost.delete_exchange(method.exchange, if_unused=method.if_unused)
        if not method.nowait:
            self.writer.send_method(m.ExchangeDeleteOk())

    def exchange_bind(self, method: m.Method, _: Content | None) -> None:
        self.scope.require(Action.WRITE, method.destination, method)
        self.scope.require(Action.READ, method.source, method)
        self.vhost.bind(DestinationKind.EXCHANGE, method.destination, method.source, method.routing_key,
                        method.arguments or {}, owner=self.owner)
        if not method.nowait:
            self.writer.send_method(m.ExchangeBindOk())

    def exchange_unbind(self, method: m.Method, _: Content | None) -> None:
        self.scope.require(Action.WRITE, method.destination, method)
        self.scope.require(Action.READ, method.source, method)
        self.vhost.unbind(DestinationKind.EXCHANGE, method.destination, method.source, method.routing_key,
                          method.arguments or {}, owner=self.owner)
        if not method.nowait:
            self.writer.send_method(m.ExchangeUnbindOk())

    # ---- queue ---------------------------------------------------------------------------

    def queue_declare(self, method: m.Method, _: Content | None) -> None:
        name = method.queue
        if name and not method.passive:
            self.scope.require(Action.CONFIGURE, name, method)
        queue = self.vhost.declare_queue(
            name, passive=method.passive, durable=method.durable, exclusive=method.exclusive,
            auto_delete=method.auto_delete, arguments=method.arguments or {}, owner=self.owner,
            now=self.connection.now)
        if not name and not method.passive:
            # a server-named queue needs CONFIGURE on the generated name (RabbitMQ), which
            # only exists now: refuse and take the fresh queue away again
            refusal = self.scope.check(Action.CONFIGURE, queue.name)
            if refusal is not None:
                self.vhost.delete_queue(queue.name, owner=self.owner)
                raise access_refused(refusal, method)
        self.last_queue = queue.name
        if not method.nowait:
            self.writer.send_method(m.QueueDeclareOk(queue=queue.name, message_count=queue.message_count,
                                                     consumer_count=queue.consumer_count))

    def queue_bind(self, method: m.Method, _: Content | None) -> None:
        name = self.queue_name(method.queue, method)
        key = method.routing_key if (method.queue or method.routing_key) else name
        self.scope.require(Action.WRITE, name, method)
        self.scope.require(Action.READ, method.exchange, method)
        self.vhost.bind(DestinationKind.QUEUE, name, method.exchange, key, method.arguments or {},
                        owner=self.owner)
        if not method.nowait:
            self.writer.send_method(m.QueueBindOk())

    def queue_unbind(self, method: m.Method, _: Content | None) -> None:
        name = self.queue_name(method.queue, method)
        key = method.routing_key if (method.queue or method.routing_key) else name
        self.scope.require(Action.WRITE, name, method)
        self.scope.require(Action.READ, method.exchange, method)
        self.vhost.unbind(DestinationKind.QUEUE, name, method.exchange, key, method.arguments or {},
                          owner=self.owner)
        self.writer.send_method(m.QueueUnbindOk())

    def queue_purge(self, method: m.Method, _: Content | None) -> None:
        name = self.queue_name(method.queue, method)
        self.scope.require(Action.READ, name, method)
        count = self.vhost.purge_queue(name, owner=self.owner)
        if not method.nowait:
            self.writer.send_method(m.QueuePurgeOk(message_count=count))

    def queue_delete(self, method: m.Method, _: Content | None) -> None:
        name = self.queue_name(method.queue, method)
        self.scope.require(Action.CONFIGURE, name, method)
        count = self.vhost.delete_queue(name, if_unused=method.if_unused, if_empty=method.if_empty,
                                        owner=self.owner)
        if not method.nowait:
            self.writer.send_method(m.QueueDeleteOk(message_count=count))

