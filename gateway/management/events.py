"""Broadcast events: the broker's happenings as messages on ``amq.rabbitmq.event``.

RabbitMQ's event-exchange style: every vhost has the internal topic exchange
``amq.rabbitmq.event`` (pre-declared by the broker); an operator binds a queue to it
with a pattern (``connection.*``, ``queue.#``, ``#``) over either protocol, and each
event arrives as a message whose routing key names it and whose headers (1.0
application-properties) carry its properties and ``timestamp_in_ms``; the body is
empty. Events: ``connection.created`` / ``connection.closed`` (in the connection's
vhost), ``queue.created`` / ``queue.deleted``, ``exchange.created`` /
``exchange.deleted``, ``binding.created`` / ``binding.deleted`` (RabbitMQ's headers:
``source_name``, ``source_kind``, ``destination_name``, ``destination_kind``,
``routing_key``, ``arguments``, ``vhost``), ``alarm.set`` / ``alarm.cleared`` and the
threshold alerts' ``alert.raised`` / ``alert.cleared`` (every vhost for node-wide ones),
and ``forward.dead_lettered`` (a forwarded message a remote refused: ``remote``, ``node``,
``reason``, ``error``, ``queue``, in the dead-letter queue's vhost). Nothing is built
while no one is bound, so an idle event exchange costs a dict lookup per event.

The event is published as the broker's own message (``VirtualHost.publish_own``: to
internal exchanges too, with a gateway id and a ledger verdict of its own, not a
dead-letter copy's).
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Optional

from gateway.broker import Binding, Broker, Exchange, Queue
from gateway.broker.connection_views import plain

from .messages import event_container

__all__ = ["EVENT_EXCHANGE", "EventPublisher"]

log = logging.getLogger(__name__)

EVENT_EXCHANGE = "amq.rabbitmq.event"


class EventPublisher:
    """Publishes events; also the listener the broker, the connection registry and the
    producer gate call (``entity``, ``admitted``/``released``, ``blocked``/``unblocked``)."""

    def __init__(self, broker: Broker, clock: Callable[[], float]) -> None:
        self.broker = broker
        self.clock = clock
        #: the alarm sources last reported set (cleared together when producers resume)
        self._alarms: list[str] = []

    def attach(self, connections: Any) -> None:
        """Listen to the broker's entities, the connections and the resource alarms."""
        self.broker.add_entity_listener(self.entity)
        connections.watch(self)
        self.broker.add_blocked_listener(self)

    def emit(self, kind: str, vhost: Optional[str], properties: dict[str, Any]) -> int:
        """Publish event ``kind`` in ``vhost`` (None: every vhost); returns how many
        vhosts had someone listening."""
        now = self.clock()
        targets = [self.broker.vhost(vhost)] if vhost is not None else list(self.broker.vhosts.values())
        sent = 0
        for target in targets:
            exchange = target.exchange(EVENT_EXCHANGE) if target is not None else None
            if exchange is None or not exchange.bindings:
                continue
            headers = {**plain(properties), "timestamp_in_ms": int(now * 1000)}
            message = event_container(headers, now)
            message.exchange, message.routing_key = EVENT_EXCHANGE, kind
            target.publish_own(message, now)
            sent += 1
        return sent

    # ------------------------------------------------------------------ listeners
    def entity(self, kind: str, vhost: str, entity: Any) -> None:
        if isinstance(entity, Queue):
            props = {"name": entity.name, "vhost": vhost, "durable": entity.durable,
                     "auto_delete": entity.auto_delete, "exclusive": entity.exclusive,
                     "arguments": entity.arguments}
        elif isinstance(entity, Exchange):
            if entity.name == EVENT_EXCHANGE:
                return
            props = {"name": entity.name, "vhost": vhost, "type": entity.type.value,
                     "durable": entity.durable, "auto_delete": entity.auto_delete,
                     "internal": entity.internal, "arguments": entity.arguments}
        elif isinstance(entity, Binding):
            self.emit(kind, vhost, {"source_name": entity.source, "source_kind": "exchange",
                                    "destination_name": entity.destination,
                                    "destination_kind": entity.destination_kind.value,
                                    "routing_key": entity.routing_key,
                                    "arguments": entity.arguments, "vhost": vhost})
            return
        else:
            return
        if kind.endswith(".deleted"):
            props = {"name": props["name"], "vhost": vhost}
        self.emit(kind, vhost, props)

    def _connection(self, kind: str, connection: Any) -> None:
        try:
            view = connection.view()
        except Exception:  # noqa: BLE001 - an event must never break a connection
            log.exception("no view of %r for its %s event", connection, kind)
            return
        props = {"name": view.name, "user": view.user, "vhost": view.vhost, "node": self.broker.container_id}
        if kind == "connection.created":
            props.update(protocol=view.protocol, peer_host=view.peer_host, peer_port=view.peer_port,
                         connected_at=int(view.connected_at * 1000), ssl=view.ssl, type="network")
        self.emit(kind, view.vhost or None, props)

    def admitted(self, connection: Any) -> None:
        self._connection("connection.created", connection)

    def released(self, connection: Any) -> None:
        self._connection("connection.closed", connection)

    def _alarm_sources(self) -> list[str]:
        return list(self.broker.gate.alarms) or ["memory"]

    def blocked(self, reason: str) -> None:
        self._alarms = self._alarm_sources()
        for source in self._alarms:
            self.emit("alarm.set", None, {"source": source, "reason": reason, "node": self.broker.container_id})

    def unblocked(self) -> None:
        for source in self._alarms or ["memory"]:
            self.emit("alarm.cleared", None, {"source": source, "node": self.broker.container_id})
