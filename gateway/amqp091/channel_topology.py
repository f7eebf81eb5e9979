"""The exchange and queue methods of a 0-9-1 channel (declare, bind, unbind, purge,
delete), as a mixin of ``BrokerChannel``.

They change the broker's topology and reply; the channel's other methods are in
``channel.py`` and its other mixins (publish, settlement, transactions).

A method that wrote to the store (a durable entity, persistent messages purged) is
answered once the store committed it (``broker.store_marks``). The channel handles the
methods after it meanwhile (a publish after a queue.declare routes to the queue, which
exists in memory already), but what it sends waits behind the reply
(``ChannelWriter.hold``), so replies keep their order. A failed commit closes the
connection, 506 RESOURCE_ERROR when space ran out, else 541 INTERNAL_ERROR, with a text
naming the method and the problem (a nowait method's too: it has no reply to carry it)."""
from __future__ import annotations

import logging

from gateway.amqp091 import methods as m
from gateway.amqp091.content import Content
from gateway.amqp091.error_map import access_refused
from gateway.amqp091.handlers import HeldReply
from gateway.amqp091.spec import ReplyCode
from gateway.auth.permissions import Action
from gateway.broker.exchanges import DestinationKind
from gateway.broker.store_marks import StoreMark, not_saved_text, store_full

log = logging.getLogger(__name__)


class ChannelTopology:
    """Topology methods of ``BrokerChannel``; they use its ``vhost``, ``writer``,
    ``_store``, ``context``, ``is_open``, ``_permit`` and ``_queue_name``."""

    def _answer_saved(self, mark: StoreMark, method: m.Method, reply: m.Method | None, what: str) -> None:
        """Send ``reply`` (None: nowait) once what ``method`` wrote since ``mark`` is
        committed; ``what`` names the change for the error of a failed commit."""
        if not mark.wrote:
            if reply is not None:
                self.writer.send_method(reply)
            return
        place = self.writer.hold() if reply is not None else None
        mark.answer(lambda error: self._saved(method, reply, place, what, error))

    def _saved(self, method: m.Method, reply: m.Method | None, place: HeldReply | None, what: str,
               error: Exception | None) -> None:
        if not self.is_open:
            return
        if error is None:
            if place is not None:
                self.writer.give(place, reply)
            return
        text = not_saved_text(f"{method.NAME} of {what}", error)
        log.warning("channel %d: %s", self.channel_id, text)
        self.writer.drop_held()  # the connection closes: nothing after it goes out
        self.context.close_connection(
            ReplyCode.RESOURCE_ERROR if store_full(error) else ReplyCode.INTERNAL_ERROR, text)

    def _vhost_label(self) -> str:
        return f"in vhost '{self.vhost.name}'"

    # ---- exchange ------------------------------------------------------------------------

    def _exchange_declare(self, method: m.Method, _: Content | None) -> None:
        if not method.passive:
            self._permit(Action.CONFIGURE, method.exchange, method)
        mark = StoreMark(self._store)
        self.vhost.declare_exchange(
            method.exchange, method.type, passive=method.passive, durable=method.durable,
            auto_delete=method.auto_delete, internal=method.internal, arguments=method.arguments or {})
        self._answer_saved(mark, method, None if method.nowait else m.ExchangeDeclareOk(),
                           f"exchange '{method.exchange}' {self._vhost_label()}")

    def _exchange_delete(self, method: m.Method, _: Content | None) -> None:
        self._permit(Action.CONFIGURE, method.exchange, method)
        mark = StoreMark(self._store)
        self.vhost.delete_exchange(method.exchange, if_unused=method.if_unused)
        self._answer_saved(mark, method, None if method.nowait else m.ExchangeDeleteOk(),
                           f"exchange '{method.exchange}' {self._vhost_label()}")

    def _exchange_bind(self, method: m.Method, _: Content | None) -> None:
        self._permit(Action.WRITE, method.destination, method)
        self._permit(Action.READ, method.source, method)
        mark = StoreMark(self._store)
        self.vhost.bind(DestinationKind.EXCHANGE, method.destination, method.source, method.routing_key,
                        method.arguments or {}, owner=self.owner)
        self._answer_saved(mark, method, None if method.nowait else m.ExchangeBindOk(),
                           f"the binding of exchange '{method.destination}' to exchange "
                           f"'{method.source}' {self._vhost_label()}")

    def _exchange_unbind(self, method: m.Method, _: Content | None) -> None:
        self._permit(Action.WRITE, method.destination, method)
        self._permit(Action.READ, method.source, method)
        mark = StoreMark(self._store)
        self.vhost.unbind(DestinationKind.EXCHANGE, method.destination, method.source, method.routing_key,
                          method.arguments or {}, owner=self.owner)
        self._answer_saved(mark, method, None if method.nowait else m.ExchangeUnbindOk(),
                           f"the binding of exchange '{method.destination}' to exchange "
                           f"'{method.source}' {self._vhost_label()}")

    # ---- queue ---------------------------------------------------------------------------

    def _queue_declare(self, method: m.Method, _: Content | None) -> None:
        name = method.queue
        if name and not method.passive:
            self._permit(Action.CONFIGURE, name, method)
        mark = StoreMark(self._store)
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
        reply = None if method.nowait else m.QueueDeclareOk(
            queue=queue.name, message_count=queue.message_count, consumer_count=queue.consumer_count)
        self._answer_saved(mark, method, reply, f"queue '{queue.name}' {self._vhost_label()}")

    def _queue_bind(self, method: m.Method, _: Content | None) -> None:
        name = self._queue_name(method.queue, method)
        key = method.routing_key if (method.queue or method.routing_key) else name
        self._permit(Action.WRITE, name, method)
        self._permit(Action.READ, method.exchange, method)
        mark = StoreMark(self._store)
        self.vhost.bind(DestinationKind.QUEUE, name, method.exchange, key, method.arguments or {},
                        owner=self.owner)
        self._answer_saved(mark, method, None if method.nowait else m.QueueBindOk(),
                           f"the binding of queue '{name}' to exchange '{method.exchange}' "
                           f"{self._vhost_label()}")

    def _queue_unbind(self, method: m.Method, _: Content | None) -> None:
        name = self._queue_name(method.queue, method)
        key = method.routing_key if (method.queue or method.routing_key) else name
        self._permit(Action.WRITE, name, method)
        self._permit(Action.READ, method.exchange, method)
        mark = StoreMark(self._store)
        self.vhost.unbind(DestinationKind.QUEUE, name, method.exchange, key, method.arguments or {},
                          owner=self.owner)
        self._answer_saved(mark, method, m.QueueUnbindOk(),
                           f"the binding of queue '{name}' to exchange '{method.exchange}' "
                           f"{self._vhost_label()}")

    def _queue_purge(self, method: m.Method, _: Content | None) -> None:
        name = self._queue_name(method.queue, method)
        self._permit(Action.READ, name, method)
        mark = StoreMark(self._store)
        count = self.vhost.purge_queue(name, owner=self.owner)
        self._answer_saved(mark, method, None if method.nowait else m.QueuePurgeOk(message_count=count),
                           f"queue '{name}' {self._vhost_label()}")

    def _queue_delete(self, method: m.Method, _: Content | None) -> None:
        name = self._queue_name(method.queue, method)
        self._permit(Action.CONFIGURE, name, method)
        mark = StoreMark(self._store)
        count = self.vhost.delete_queue(name, if_unused=method.if_unused, if_empty=method.if_empty,
                                        owner=self.owner)
        self._answer_saved(mark, method, None if method.nowait else m.QueueDeleteOk(message_count=count),
                           f"queue '{name}' {self._vhost_label()}")

