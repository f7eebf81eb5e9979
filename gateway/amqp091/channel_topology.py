"""``ChannelTopology``: the exchange and queue methods of a 0-9-1 channel (declare, bind,
unbind, purge, delete) over the channel's vhost.

They change the broker's topology and reply. The one state they keep is the channel's
last declared queue, which queue name ``""`` means in bind/consume/get/purge/delete
(:meth:`ChannelTopology.queue_name`; the channel's consume and get ask it too).

A method that wrote to the store (a durable entity, persistent messages purged) is
answered once the store committed it (``broker.store_marks``). The channel handles the
methods after it meanwhile (a publish after a queue.declare routes to the queue, which
exists in memory already), but what it sends waits behind the reply
(``ChannelWriter.hold``), so replies keep their order. A failed commit closes the
connection, 506 RESOURCE_ERROR when space ran out, else 541 INTERNAL_ERROR, with a text
naming the method and the problem (a nowait method's too: it has no reply to carry it)."""
from __future__ import annotations

import logging
from typing import Any

from gateway.amqp091 import methods as m
from gateway.amqp091.connection_scope import ConnectionScope
from gateway.amqp091.content import Content
from gateway.amqp091.error_map import access_refused
from gateway.amqp091.errors import ChannelException
from gateway.amqp091.handlers import HeldReply
from gateway.amqp091.spec import ReplyCode
from gateway.auth.permissions import Action
from gateway.broker.exchanges import DestinationKind
from gateway.broker.store_marks import StoreMark, not_saved_text, store_full

__all__ = ["ChannelTopology"]

log = logging.getLogger(__name__)


class ChannelTopology:
    """The topology methods of one channel, on ``vhost`` for the connection ``scope``
    (permissions, the owner of exclusive queues); replies go to ``writer`` once ``store``
    committed what they wrote; ``context`` closes the connection when it could not."""

    __slots__ = ("vhost", "scope", "owner", "writer", "connection", "last_queue", "store", "context",
                 "is_open")

    def __init__(self, vhost: Any, scope: ConnectionScope, writer: Any, connection: Any, store: Any,
                 context: Any) -> None:
        self.vhost = vhost
        self.scope = scope
        self.owner = scope.owner
        self.writer = writer
        #: the connection (its ``now`` stamps a declared queue)
        self.connection = connection
        self.last_queue = ""
        self.store = store
        self.context = context
        #: False once the channel closed: late commit reports answer nothing
        self.is_open = True

    def close(self) -> None:
        """The channel is gone: answer nothing more, drop what waits behind a reply."""
        self.is_open = False
        self.writer.drop_held()

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
        log.warning("channel %d: %s", self.writer.channel_id, text)
        self.writer.drop_held()  # the connection closes: nothing after it goes out
        self.context.close_connection(
            ReplyCode.RESOURCE_ERROR if store_full(error) else ReplyCode.INTERNAL_ERROR, text)

    def _vhost_label(self) -> str:
        return f"in vhost '{self.vhost.name}'"

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
        mark = StoreMark(self.store)
        self.vhost.declare_exchange(
            method.exchange, method.type, passive=method.passive, durable=method.durable,
            auto_delete=method.auto_delete, internal=method.internal, arguments=method.arguments or {})
        self._answer_saved(mark, method, None if method.nowait else m.ExchangeDeclareOk(),
                           f"exchange '{method.exchange}' {self._vhost_label()}")

    def exchange_delete(self, method: m.Method, _: Content | None) -> None:
        self.scope.require(Action.CONFIGURE, method.exchange, method)
        mark = StoreMark(self.store)
        self.vhost.delete_exchange(method.exchange, if_unused=method.if_unused)
        self._answer_saved(mark, method, None if method.nowait else m.ExchangeDeleteOk(),
                           f"exchange '{method.exchange}' {self._vhost_label()}")

    def exchange_bind(self, method: m.Method, _: Content | None) -> None:
        self.scope.require(Action.WRITE, method.destination, method)
        self.scope.require(Action.READ, method.source, method)
        mark = StoreMark(self.store)
        self.vhost.bind(DestinationKind.EXCHANGE, method.destination, method.source, method.routing_key,
                        method.arguments or {}, owner=self.owner)
        self._answer_saved(mark, method, None if method.nowait else m.ExchangeBindOk(),
                           f"the binding of exchange '{method.destination}' to exchange "
                           f"'{method.source}' {self._vhost_label()}")

    def exchange_unbind(self, method: m.Method, _: Content | None) -> None:
        self.scope.require(Action.WRITE, method.destination, method)
        self.scope.require(Action.READ, method.source, method)
        mark = StoreMark(self.store)
        self.vhost.unbind(DestinationKind.EXCHANGE, method.destination, method.source, method.routing_key,
                          method.arguments or {}, owner=self.owner)
        self._answer_saved(mark, method, None if method.nowait else m.ExchangeUnbindOk(),
                           f"the binding of exchange '{method.destination}' to exchange "
                           f"'{method.source}' {self._vhost_label()}")

    # ---- queue ---------------------------------------------------------------------------

    def queue_declare(self, method: m.Method, _: Content | None) -> None:
        name = method.queue
        if name and not method.passive:
            self.scope.require(Action.CONFIGURE, name, method)
        mark = StoreMark(self.store)
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

    def queue_bind(self, method: m.Method, _: Content | None) -> None:
        name = self.queue_name(method.queue, method)
        key = method.routing_key if (method.queue or method.routing_key) else name
        self.scope.require(Action.WRITE, name, method)
        self.scope.require(Action.READ, method.exchange, method)
        mark = StoreMark(self.store)
        self.vhost.bind(DestinationKind.QUEUE, name, method.exchange, key, method.arguments or {},
                        owner=self.owner)
        self._answer_saved(mark, method, None if method.nowait else m.QueueBindOk(),
                           f"the binding of queue '{name}' to exchange '{method.exchange}' "
                           f"{self._vhost_label()}")

    def queue_unbind(self, method: m.Method, _: Content | None) -> None:
        name = self.queue_name(method.queue, method)
        key = method.routing_key if (method.queue or method.routing_key) else name
        self.scope.require(Action.WRITE, name, method)
        self.scope.require(Action.READ, method.exchange, method)
        mark = StoreMark(self.store)
        self.vhost.unbind(DestinationKind.QUEUE, name, method.exchange, key, method.arguments or {},
                          owner=self.owner)
        self._answer_saved(mark, method, m.QueueUnbindOk(),
                           f"the binding of queue '{name}' to exchange '{method.exchange}' "
                           f"{self._vhost_label()}")

    def queue_purge(self, method: m.Method, _: Content | None) -> None:
        name = self.queue_name(method.queue, method)
        self.scope.require(Action.READ, name, method)
        mark = StoreMark(self.store)
        count = self.vhost.purge_queue(name, owner=self.owner, now=self.connection.now)
        self._answer_saved(mark, method, None if method.nowait else m.QueuePurgeOk(message_count=count),
                           f"queue '{name}' {self._vhost_label()}")

    def queue_delete(self, method: m.Method, _: Content | None) -> None:
        name = self.queue_name(method.queue, method)
        self.scope.require(Action.CONFIGURE, name, method)
        mark = StoreMark(self.store)
        count = self.vhost.delete_queue(name, if_unused=method.if_unused, if_empty=method.if_empty,
                                        owner=self.owner, now=self.connection.now)
        self._answer_saved(mark, method, None if method.nowait else m.QueueDeleteOk(message_count=count),
                           f"queue '{name}' {self._vhost_label()}")

