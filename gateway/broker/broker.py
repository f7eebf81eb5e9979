"""Broker: the root of the model (vhosts, memory accounting, service nodes, ids).

One ``Broker`` per gateway process. Protocol engines get a vhost with
:meth:`Broker.vhost`, register a :class:`~gateway.broker.flow.BlockListener` per
connection for memory alarms, and the edge calls :meth:`Broker.tick` on a timer.
"""
from __future__ import annotations

import itertools
import logging
from typing import Any, Callable, Iterable, Iterator, Optional

from gateway.store.interface import MessageRecord, NullStore, Store

from .errors import NotFound
from .exchanges import DestinationKind
from .flow import BlockListener, ProducerGate
from .message import Encoding, MessageContainer
from .unroutable import UnroutableCounts
from .vhost import ServiceNode, VirtualHost

__all__ = ["Broker"]

log = logging.getLogger(__name__)

ServiceResolver = Callable[[str], Optional[ServiceNode]]


class Broker:
    """The shared broker model.

    ``container_id`` is our globally unique container name (1.0 ``open``, and deciding
    whether ``node@container`` is local). ``memory_high_watermark`` is in bytes of queued
    message bodies (``None``: never block); the alarm clears again at
    ``memory_low_watermark_ratio`` of it (see ``flow.ProducerGate``). ``store`` receives durable writes
    (default :class:`~gateway.store.interface.NullStore`).
    """

    def __init__(
        self,
        *,
        container_id: str,
        vhosts: Iterable[str] = ("/",),
        memory_high_watermark: Optional[int] = None,
        memory_low_watermark_ratio: float = 0.9,
        store: Optional[Store] = None,
        ledger: Optional[Any] = None,
        first_gateway_id: int = 1,
    ) -> None:
        self.container_id = container_id
        self.store: Store = store if store is not None else NullStore()
        self.gate = ProducerGate(memory_high_watermark, memory_low_watermark_ratio)
        # The service starts the ids at a boot-time-derived value, so ids stay unique
        # across restarts of one container (the ledger reconciles by them).
        self._use_ids(itertools.count(first_gateway_id))
        self.use_ledger(ledger)
        self._vhosts: dict[str, VirtualHost] = {}
        self._services: dict[str, ServiceNode] = {}
        self._resolvers: list[ServiceResolver] = []
        #: unroutable publishes, counted by the protocols (read by ``gateway.metrics``)
        self.unroutable = UnroutableCounts()
        for name in vhosts:
            self.add_vhost(name)

    # ------------------------------------------------------------------ vhosts
    def vhost(self, name: str) -> Optional[VirtualHost]:
        """The vhost ``name`` or ``None``."""
        return self._vhosts.get(name)

    @property
    def vhosts(self) -> dict[str, VirtualHost]:
        return dict(self._vhosts)

    def add_vhost(self, name: str) -> VirtualHost:
        """Create vhost ``name`` (with its pre-declared exchanges), or return the existing one."""
        vhost = self._vhosts.get(name)
        if vhost is None:
            vhost = self._vhosts[name] = VirtualHost(name, self)
        return vhost

    def remove_vhost(self, name: str) -> None:
        """Delete a vhost and all its queues (consumers are cancelled). Raises NotFound."""
        vhost = self._vhosts.pop(name, None)
        if vhost is None:
            raise NotFound(f"no vhost '{name}'")
        for queue in list(vhost.queues.values()):
            vhost._forget_queue(queue, f"vhost '{name}' was deleted")

    # ------------------------------------------------------------------ durability
    def restore(self, now: float) -> int:
        """Rebuild durable exchanges, queues, bindings and persistent messages from
        ``store.load()``; call once at start-up, before any connection. Returns the number
        of messages restored. Entities that already exist (pre-declared exchanges) are
        kept; restored 0-9-1 messages have ``properties`` ``None`` (the protocol decodes
        ``payload`` when it needs them)."""
        snapshot = self.store.load()
        for rec in snapshot.exchanges:
            vhost = self.add_vhost(rec.vhost)
            if rec.name not in vhost.exchanges:
                vhost.declare_exchange(
                    rec.name, rec.type, durable=True, auto_delete=rec.auto_delete,
                    internal=rec.internal, arguments=rec.arguments,
                )
        for rec in snapshot.queues:
            vhost = self.add_vhost(rec.vhost)
            if rec.name not in vhost.queues:
                vhost.declare_queue(
                    rec.name, durable=True, auto_delete=rec.auto_delete, arguments=rec.arguments, now=now
                )
        for rec in snapshot.bindings:
            vhost = self.add_vhost(rec.vhost)
            try:
                vhost.bind(
                    DestinationKind(rec.destination_kind), rec.destination, rec.source,
                    rec.routing_key, rec.arguments,
                )
            except NotFound:
                log.warning("stored binding %r refers to a missing entity; skipped", rec)
        restored = 0
        highest = 0
        for (vhost_name, queue_name), records in snapshot.messages.items():
            vhost = self.vhost(vhost_name)
            queue = vhost.queue(queue_name) if vhost is not None else None
            if queue is None:
                log.warning("stored messages for missing queue %r in vhost %r; skipped", queue_name, vhost_name)
                continue
            for rec in sorted(records, key=lambda r: r.seq):
                queue.restore(
                    _container(rec), expires_at=rec.expires_at,
                    redelivered=rec.redelivered, delivery_count=rec.delivery_count,
                )
                highest = max(highest, rec.message_id)
                restored += 1
        if highest:
            self._use_ids(itertools.count(max(highest + 1, self.next_gateway_id())))
        return restored

    def use_ledger(self, ledger: Optional[Any]) -> None:
        """Record message events in ``ledger`` (a ``gateway.ledger.Ledger``, or None for
        none). The protocols and the queues read ``self.ledger``; recording only appends
        to a list. The ledger numbers its contexts from our gateway ids."""
        self.ledger = ledger
        if ledger is not None:
            ledger.use_gateway_ids(lambda: self.next_gateway_id())

    # ------------------------------------------------------------------ ids
    def _use_ids(self, ids: Iterator[int]) -> None:
        #: ``next_gateway_id()``: a new message id, increasing; unique across restarts
        #: when the service passes a boot-derived ``first_gateway_id`` (for the ledger).
        #: The counter's own ``__next__``: a method around it cost every publish a call.
        self.next_gateway_id: Callable[[], int] = ids.__next__

    # ------------------------------------------------------------------ memory
    @property
    def memory_used(self) -> int:
        """Bytes of message bodies held by all queues."""
        return self.gate.used

    @property
    def blocked(self) -> bool:
        """True while producers must be blocked (memory above the high watermark)."""
        return self.gate.blocked

    def add_blocked_listener(self, listener: BlockListener) -> None:
        """Register a listener; it is told ``blocked`` at once if producers are blocked."""
        self.gate.add_listener(listener)

    def remove_blocked_listener(self, listener: BlockListener) -> None:
        self.gate.remove_listener(listener)

    def set_memory_high_watermark(self, nbytes: Optional[int]) -> None:
        self.gate.set_high_watermark(nbytes)

    # ------------------------------------------------------------------ services
    def register_service(self, name: str, handler: ServiceNode) -> None:
        """Make ``handler`` reachable as node ``name`` (e.g. ``amqp$management``) in every
        vhost. Replaces an earlier registration of the same name."""
        self._services[name] = handler

    def unregister_service(self, name: str) -> None:
        self._services.pop(name, None)

    def register_service_resolver(self, resolver: ServiceResolver) -> None:
        """Add a fallback asked for names with no exact registration (e.g. the forwarder
        claiming every ``node@remote-container``); the first non-``None`` answer wins."""
        self._resolvers.append(resolver)

    def service(self, name: str) -> Optional[ServiceNode]:
        """The service node for ``name``, or ``None``."""
        node = self._services.get(name)
        if node is None:
            for resolver in self._resolvers:
                node = resolver(name)
                if node is not None:
                    break
        return node

    # ------------------------------------------------------------------ time
    def tick(self, now: float) -> Optional[float]:
        """Run expiry in every vhost; returns the earliest next deadline or ``None``."""
        deadline: Optional[float] = None
        for vhost in list(self._vhosts.values()):
            nxt = vhost.tick(now)
            if nxt is not None and (deadline is None or nxt < deadline):
                deadline = nxt
        return deadline

    def __repr__(self) -> str:
        return f"Broker({self.container_id!r}, vhosts={list(self._vhosts)})"


def _container(rec: MessageRecord) -> MessageContainer:
    return MessageContainer(
        Encoding(rec.origin),
        rec.payload,
        exchange=rec.exchange,
        routing_key=rec.routing_key,
        headers=rec.headers,
        durable=rec.durable,
        priority=rec.priority,
        ttl_ms=rec.ttl_ms,
        created_at=rec.created_at,
        size=rec.size,
        message_id=rec.amqp_message_id,
        correlation_id=rec.correlation_id,
        user_id=rec.user_id,
        gateway_id=rec.message_id,
        deaths=rec.deaths,
    )
