"""The exchange and queue methods of a 0-9-1 channel (declare, bind, unbind, purge,
delete), as a mixin of ``BrokerChannel``.

They only change the broker's topology and reply; the channel's other methods are in
``channel.py`` and its other mixins (publish, settlement, transactions)."""
from __future__ import annotations

from gateway.amqp091 import methods as m
from gateway.amqp091.content import Content
from gateway.amqp091.error_map import access_refused
from gateway.auth.permissions import Action
from gateway.broker.exchanges import DestinationKind


class ChannelTopology:
    """Topology methods of ``BrokerChannel``; they use its ``vhost``, ``writer``,
    ``_permit`` and ``_queue_name``."""

    # ---- exchange ------------------------------------------------------------------------

    def _exchange_declare(self, method: m.Method, _: Content | None) -> None:
        if not method.passive:
            self._permit(Action.CONFIGURE, method.exchange, method)
        self.vhost.declare_exchange(
            method.exchange, method.type, passive=method.passive, durable=method.durable,
            auto_delete=method.auto_delete, internal=method.internal, arguments=method.arguments or {})
        if not method.nowait:
            self.writer.send_method(m.ExchangeDeclareOk())

    def _exchange_delete(self, method: m.Method, _: Content | None) -> None:
        self._permit(Action.CONFIGURE, method.exchange, method)
        self.vhost.delete_exchange(method.exchange, if_unused=method.if_unused)
        if not method.nowait:
            self.writer.send_method(m.ExchangeDeleteOk())

    def _exchange_bind(self, method: m.Method, _: Content | None) -> None:
        self._permit(Action.WRITE, method.destination, method)
        self._permit(Action.READ, method.source, method)
        self.vhost.bind(DestinationKind.EXCHANGE, method.destination, method.source, method.routing_key,
                        method.arguments or {}, owner=self.owner)
        if not method.nowait:
            self.writer.send_method(m.ExchangeBindOk())

    def _exchange_unbind(self, method: m.Method, _: Content | None) -> None:
        self._permit(Action.WRITE, method.destination, method)
        self._permit(Action.READ, method.source, method)
        self.vhost.unbind(DestinationKind.EXCHANGE, method.destination, method.source, method.routing_key,
                          method.arguments or {}, owner=self.owner)
        if not method.nowait:
            self.writer.send_method(m.ExchangeUnbindOk())

    # ---- queue ---------------------------------------------------------------------------

    def _queue_declare(self, method: m.Method, _: Content | None) -> None:
        name = method.queue
        if name and not method.passive:
            self._permit(Action.CONFIGURE, name, method)
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

    def _queue_bind(self, method: m.Method, _: Content | None) -> None:
        name = self._queue_name(method.queue, method)
        key = method.routing_key if (method.queue or method.routing_key) else name
        self._permit(Action.WRITE, name, method)
        self._permit(Action.READ, method.exchange, method)
        self.vhost.bind(DestinationKind.QUEUE, name, method.exchange, key, method.arguments or {},
                        owner=self.owner)
        if not method.nowait:
            self.writer.send_method(m.QueueBindOk())

    def _queue_unbind(self, method: m.Method, _: Content | None) -> None:
        name = self._queue_name(method.queue, method)
        key = method.routing_key if (method.queue or method.routing_key) else name
        self._permit(Action.WRITE, name, method)
        self._permit(Action.READ, method.exchange, method)
        self.vhost.unbind(DestinationKind.QUEUE, name, method.exchange, key, method.arguments or {},
                          owner=self.owner)
        self.writer.send_method(m.QueueUnbindOk())

    def _queue_purge(self, method: m.Method, _: Content | None) -> None:
        name = self._queue_name(method.queue, method)
        self._permit(Action.READ, name, method)
        count = self.vhost.purge_queue(name, owner=self.owner)
        if not method.nowait:
            self.writer.send_method(m.QueuePurgeOk(message_count=count))

    def _queue_delete(self, method: m.Method, _: Content | None) -> None:
        name = self._queue_name(method.queue, method)
        self._permit(Action.CONFIGURE, name, method)
        count = self.vhost.delete_queue(name, if_unused=method.if_unused, if_empty=method.if_empty,
                                        owner=self.owner)
        if not method.nowait:
            self.writer.send_method(m.QueueDeleteOk(message_count=count))

