"""Edge mode for 1.0 clients on an amqp091 backend: the backend connection that carries a
1.0 connection's links (``gateway.backend.BridgeConnection``), sans-I/O.

Theory of operation. One 0-9-1 client connection to the backend (``ClientConnection``
without a channel of its own) per 1.0 client connection, and one channel per 1.0 link,
known by the link's ``key``:

* a publisher (the client sends): channel.open -> confirm.select -> ``channel_ready``;
  each message is a ``basic.publish`` with ``mandatory``, its properties what a 0-9-1
  consumer of ours would get (``message_mapping.delivery_payload``: the translators);
  ``basic.ack`` -> ``published(accepted)``, ``basic.nack`` or a ``basic.return`` ->
  refused with the backend's reason (``client_confirms`` matches them);
* a consumer (the client receives): channel.open -> basic.qos (global, so a new
  prefetch applies at once) -> basic.consume -> ``channel_ready``; each basic.deliver is a
  broker ``MessageContainer`` in 0-9-1 encoding (``delivered``), translated for the client
  as in local mode; ``set_prefetch`` follows the link's credit; ``drain`` is a basic.qos
  round trip (``drained`` when its qos-ok comes: the backend had its chance to send);
  ``settle`` acks, nacks with requeue or rejects.

A channel the backend closes (404 no queue, 403 no access, a publish it refused) is
``channel_failed`` with the code, the text and the publishes left in doubt; a
server-side basic.cancel (the queue went) too. The connection itself is the edge's
(``BackendConnector``): opened, refused (``backend_relay.backend_failure``) or lost.
"""
from __future__ import annotations

import enum
import itertools
import logging
from typing import Any, Optional

from gateway.amqp091 import methods as m
from gateway.amqp091.backend_relay import BackendEngine
from gateway.amqp091.client import ClientConnection, ConnectionLost, FlowChanged
from gateway.amqp091.client_confirms import PublishesConfirmed, UnconfirmedPublishes
from gateway.amqp091.content import ContentAssembler
from gateway.amqp091.error_map import broker_error_for
from gateway.amqp091.errors import AmqpException
from gateway.amqp091.frames import MethodFrame, content_frame_parts, encode_method_frame
from gateway.amqp091.message_mapping import container_from_publish, delivery_payload
from gateway.amqp091.spec import ClassId, ReplyCode
from gateway.backend.contract import BackendLogin, BridgeEvents
from gateway.backend.mapping import Disposition
from gateway.backend.nodes import BackendNode
from gateway.backend.settings import BackendSettings
from gateway.broker.errors import ResourceLimitExceeded

__all__ = ["BackendBridge"]

log = logging.getLogger(__name__)

_BASIC = int(ClassId.BASIC)
_MAX_BODY = 512 * 1024 * 1024
_tags = itertools.count(1)


class _Kind(enum.Enum):
    PUBLISHER = "publisher"
    CONSUMER = "consumer"


class _Channel:
    __slots__ = ("number", "key", "kind", "queue", "prefetch", "assembler", "unconfirmed", "qos_waits",
                 "closing", "consumer_tag")

    def __init__(self, number: int, key: Any, kind: _Kind, queue: str = "", prefetch: int = 0) -> None:
        self.number = number
        self.key = key
        self.kind = kind
        self.queue = queue
        self.prefetch = prefetch
        self.assembler = ContentAssembler(_MAX_BODY)
        self.unconfirmed = UnconfirmedPublishes()
        #: one entry per basic.qos sent: True for a drain's round trip
        self.qos_waits: list[bool] = []
        self.closing = False
        self.consumer_tag = ""


class BackendBridge(BackendEngine):
    """See the module docstring: the engine surface the edge drives, and the operations of
    ``BridgeConnection`` (``key``: the link's)."""

    def __init__(self, node: BackendNode, settings: BackendSettings, login: BackendLogin,
                 events: Any) -> None:
        self.events: BridgeEvents = events
        super().__init__(node, settings.name, ClientConnection(
            user=login.user, password=login.password, vhost=login.vhost, mechanism=login.mechanism,
            peer=node.address, heartbeat=settings.heartbeat, handshake_timeout=settings.connect_timeout,
            connection_name=login.connection_name, open_channel=False))
        self.client.on_channel_frame = self._frame
        self._channels: dict[int, _Channel] = {}
        self._by_key: dict[Any, _Channel] = {}
        self._last_number = 0

    # ---- BridgeConnection ------------------------------------------------------------------
    def open_publisher(self, key: Any) -> None:
        self._open(_Channel(self._number(), key, _Kind.PUBLISHER))

    def open_consumer(self, key: Any, queue: str, prefetch: int) -> None:
        self._open(_Channel(self._number(), key, _Kind.CONSUMER, queue, max(1, prefetch)))

    def publish(self, key: Any, token: Any, exchange: str, routing_key: str, message: Any) -> None:
        """Publish ``message`` (a ``MessageContainer``) with ``mandatory``. Raises
        ``ValueError`` or ``TranslationError`` when it cannot be rendered for 0-9-1."""
        ch = self._by_key[key]
        properties, body = delivery_payload(message)
        ch.unconfirmed.add(token, exchange, routing_key, body)
        n = ch.number
        self.client.send_raw(b"".join((
            encode_method_frame(n, m.BasicPublish.make(0, exchange, routing_key, True, False)),
            *content_frame_parts(n, _BASIC, properties, body, self.frame_max))))
        self.output_ready()

    def set_prefetch(self, key: Any, prefetch: int) -> None:
        ch = self._by_key.get(key)
        prefetch = max(1, prefetch)
        if ch is not None and not ch.closing and prefetch != ch.prefetch:
            ch.prefetch = prefetch
            self._qos(ch, drain=False)

    def drain(self, key: Any) -> None:
        ch = self._by_key.get(key)
        if ch is not None and not ch.closing:
            self._qos(ch, drain=True)

    def settle(self, key: Any, delivery_tag: int, disposition: Disposition) -> None:
        ch = self._by_key.get(key)
        log.debug("backend %s: %s delivery %d on channel %s", self.name, disposition.value, delivery_tag,
                  ch.number if ch is not None else None)
        if ch is None or ch.closing:
            return  # the channel went: the backend requeued it already
        if disposition is Disposition.ACK:
            method: m.Method = m.BasicAck(delivery_tag=delivery_tag, multiple=False)
        elif disposition is Disposition.REJECT:
            method = m.BasicReject(delivery_tag=delivery_tag, requeue=False)
        else:
            method = m.BasicNack(delivery_tag=delivery_tag, multiple=False, requeue=True)
        self._send(ch.number, method)

    def close_channel(self, key: Any) -> None:
        """The link went: close its channel (the backend requeues what was not settled)."""
        ch = self._by_key.pop(key, None)
        if ch is None or ch.closing or self.client.closed:
            return
        ch.closing = True
        self._send(ch.number, m.ChannelClose(reply_code=int(ReplyCode.REPLY_SUCCESS),
                                             reply_text="link detached", class_id=0, method_id=0))

    # ---- channels --------------------------------------------------------------------------
    def _number(self) -> int:
        limit = self.channel_max or 2047
        for _ in range(limit):
            self._last_number = self._last_number % limit + 1
            if self._last_number not in self._channels:
                return self._last_number
        raise ValueError(f"backend {self.name}: every channel (channel-max {limit}) is in use")

    def _open(self, ch: _Channel) -> None:
        self._channels[ch.number] = ch
        self._by_key[ch.key] = ch
        self._send(ch.number, m.ChannelOpen())

    def _qos(self, ch: _Channel, *, drain: bool) -> None:
        ch.qos_waits.append(drain)
        self._send(ch.number, m.BasicQos(prefetch_size=0, prefetch_count=ch.prefetch, global_=True))

    def _send(self, channel: int, method: m.Method) -> None:
        self.client.send_raw(encode_method_frame(channel, method))
        self.output_ready()

    def _frame(self, frame: Any) -> None:
        ch = self._channels.get(frame.channel)
        if ch is None:
            return
        if type(frame) is MethodFrame and not frame.method.CONTENT and not ch.assembler.busy:
            self._method(ch, frame.method)
            return
        done = ch.assembler.accept(frame)
        if done is None:
            return
        method, content = done
        if type(method) is m.BasicDeliver:
            self._delivered(ch, method, content)
        elif type(method) is m.BasicReturn:
            error = (f"backend {self.name}: basic.return {method.reply_code} {method.reply_text}: "
                     f"exchange '{method.exchange}' has no route for routing key '{method.routing_key}'")
            ch.unconfirmed.returned(method.exchange, method.routing_key, content.body, error)

    def _delivered(self, ch: _Channel, method: m.Method, content: Any) -> None:
        if ch.closing:
            return
        try:
            message = container_from_publish(method, content, now=self.client.now, user_name=None)
        except AmqpException as exc:
            log.warning("backend %s: delivery %d from queue '%s' cannot be carried (%s): rejected",
                        self.name, method.delivery_tag, ch.queue, exc)
            self._send(ch.number, m.BasicReject(delivery_tag=method.delivery_tag, requeue=False))
            return
        self.events.delivered(ch.key, method.delivery_tag, method.redelivered, message)

    def _method(self, ch: _Channel, method: m.Method) -> None:
        kind = type(method)
        events = self.events
        if kind is m.BasicAck or kind is m.BasicNack:
            take = ch.unconfirmed.acked if kind is m.BasicAck else ch.unconfirmed.nacked
            for settled in take(method.delivery_tag, method.multiple):
                if type(settled) is PublishesConfirmed:
                    for token in settled.tokens:
                        events.published(ch.key, token, True, None)
                else:
                    events.published(ch.key, settled.token, False, self._refusal(settled.error))
        elif kind is m.BasicQosOk:
            if ch.qos_waits and ch.qos_waits.pop(0) and not ch.closing:
                events.drained(ch.key)
        elif kind is m.ChannelOpenOk:
            if ch.kind is _Kind.PUBLISHER:
                self._send(ch.number, m.ConfirmSelect(nowait=False))
            else:
                self._qos(ch, drain=False)
                ch.consumer_tag = f"amqp-gateway.{next(_tags)}"
                self._send(ch.number, m.BasicConsume(ticket=0, queue=ch.queue, consumer_tag=ch.consumer_tag,
                                                     no_local=False, no_ack=False, exclusive=False,
                                                     nowait=False, arguments={}))
        elif kind is m.ConfirmSelectOk or kind is m.BasicConsumeOk:
            if not ch.closing:
                events.channel_ready(ch.key)
        elif kind is m.ChannelClose:
            self._send(ch.number, m.ChannelCloseOk())
            self._channel_gone(ch, method.reply_code, str(method.reply_text), method)
        elif kind is m.ChannelCloseOk:
            self._channels.pop(ch.number, None)
        elif kind is m.BasicCancel:  # the backend cancelled the consumer (its queue went)
            self._channel_gone(ch, int(ReplyCode.NOT_FOUND),
                               f"the backend cancelled the consumer of queue '{ch.queue}'", None)
            self.close_channel_number(ch)
        elif kind is m.ChannelFlow:
            self._send(ch.number, m.ChannelFlowOk(active=method.active))

    def close_channel_number(self, ch: _Channel) -> None:
        ch.closing = True
        self._send(ch.number, m.ChannelClose(reply_code=int(ReplyCode.REPLY_SUCCESS),
                                             reply_text="consumer cancelled", class_id=0, method_id=0))

    def _channel_gone(self, ch: _Channel, code: int, text: str, close: Optional[m.Method]) -> None:
        if close is not None:
            self._channels.pop(ch.number, None)
        closing = ch.closing
        ch.closing = True
        if self._by_key.get(ch.key) is ch:
            del self._by_key[ch.key]
        if closing:
            return
        error = broker_error_for(code, f"backend {self.name}: {text}")
        if close is not None and (close.class_id, close.method_id) == (_BASIC, m.BasicPublish.METHOD_ID):
            culprit = ch.unconfirmed.channel_failed(text, error.text)
            if culprit is not None:
                self.events.published(ch.key, culprit.token, False, error)
        self.events.channel_failed(ch.key, error, tuple(ch.unconfirmed.drop_all()))

    def _refusal(self, text: str) -> Any:
        """A refused publish as a broker error: a return is a route not found, a nack a
        queue that would not take it (RabbitMQ: x-overflow reject-publish)."""
        if "basic.return" in text:
            return broker_error_for(int(ReplyCode.NOT_FOUND), text)
        return ResourceLimitExceeded(f"backend {self.name}: {text}")

    # ---- the connection's events -----------------------------------------------------------
    def _flow(self, event: FlowChanged) -> None:
        self.events.flow(event.blocked)

    def _lost(self, event: ConnectionLost) -> None:
        self.events.lost(event.error)
