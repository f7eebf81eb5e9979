"""Broker: the root of the model (vhosts, memory accounting, service nodes, ids).

One ``Broker`` per gateway process. Protocol engines get a vhost with
:meth:`Broker.vhost`, register a :class:`~gateway.broker.flow.BlockListener` per
connection for memory alarms, and the edge calls :meth:`Broker.tick` on a timer.
"""
from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Optional

from gateway.ledger import EventKind
from gateway.store.interface import NullStore, Store

from .entity_names import GlobalNames
from .errors import BrokerError, NotFound
from .exchanges import DestinationKind
from .flow import BlockListener, ProducerGate, PublishFlow
from .paging import MemoryPager
from .queue_storage import MessageLoader, stand_in
from .unroutable import UnroutableCounts
from .vhost import ServiceNode, VirtualHost

__all__ = ["Broker", "RestoredCounts"]

log = logging.getLogger(__name__)

ServiceResolver = Callable[[str], Optional[ServiceNode]]
#: ``listener(kind, vhost_name, entity)``, e.g. ``("queue.created", "/", queue)``
EntityListener = Callable[[str, str, Any], None]


@dataclass
class RestoredCounts:
    """What ``Broker.restore`` rebuilt in one vhost (for the start-up log)."""

    exchanges: int = 0
    queues: int = 0
    bindings: int = 0
    messages: int = 0
    #: messages that had been delivered and not settled
    redelivered: int = 0


class Broker:
    """The shared broker model.

    ``container_id`` is our globally unique container name (1.0 ``open``, and deciding
    whether ``node@container`` is local). ``memory_high_watermark`` is in bytes of queued
    message bodies (``None``: never block); the alarm clears again at
    ``memory_low_watermark_ratio`` of it (see ``flow.ProducerGate``). ``store`` receives
    durable writes (default :class:`~gateway.store.interface.NullStore`);
    ``message_loader`` rebuilds a container from a stored message (the protocols'
    decoders, wired by the service); ``memory_budget`` (bytes) is where durable bodies
    start to leave memory (:class:`~gateway.broker.paging.MemoryPager`).
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
        message_loader: Optional[MessageLoader] = None,
        memory_budget: Optional[int] = None,
    ) -> None:
        self.container_id = container_id
        self.store: Store = store if store is not None else NullStore()
        self.message_loader = message_loader
        self.gate = ProducerGate(memory_high_watermark, memory_low_watermark_ratio)
        #: the paused ``PublishFlow`` the publish just made reached (set by the destination,
        #: taken by the protocol that published: ``take_paused_flow``)
        self.paused_flow: Optional[PublishFlow] = None
        self.pager = MemoryPager(self, memory_budget)
        # The service starts the ids at a boot-time-derived value, so ids stay unique
        # across restarts of one container (the ledger reconciles by them).
        self._use_ids(itertools.count(first_gateway_id))
        self.use_ledger(ledger)
        self._vhosts: dict[str, VirtualHost] = {}
        self._services: dict[str, ServiceNode] = {}
        self._resolvers: list[ServiceResolver] = []
        self._entity_listeners: list[EntityListener] = []
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
        """Delete a vhost and all its queues (consumers are cancelled) and exchanges, in the
        store too. Raises NotFound."""
        vhost = self._vhosts.pop(name, None)
        if vhost is None:
            raise NotFound(f"no vhost '{name}'")
        for queue in list(vhost.queues.values()):
            vhost.forget_queue(queue, f"vhost '{name}' was deleted")
        for exchange in list(vhost.exchanges.values()):
            if exchange.durable and not exchange.predeclared:
                self.store.delete_exchange(name, exchange.name)  # and its bindings

    # ------------------------------------------------------------------ durability
    def restore(self, now: float) -> dict[str, RestoredCounts]:
        """Rebuild durable exchanges, queues, bindings and persistent messages from
        ``store.load()``; call once at start-up, before any connection. Returns what was
        restored per vhost. Entities that already exist (pre-declared exchanges) are kept.

        Messages come back as stand-ins whose bodies stay in the store until their entry
        reaches the head (``queue_storage``); one that had been delivered and not settled
        comes back redelivered, its delivery count one higher (1.0 first-acquirer false).
        Expired messages are left to the queues' usual expiry (the service ticks the
        broker before it listens). Raises ``StoreUnusable`` from ``load``.
        """
        snapshot = self.store.load()
        counts: dict[str, RestoredCounts] = {}

        def count(vhost: str) -> RestoredCounts:
            if vhost not in counts:
                self.add_vhost(vhost)
                counts[vhost] = RestoredCounts()
            return counts[vhost]

        for rec in snapshot.exchanges:
            vhost = self.add_vhost(rec.vhost)
            count(rec.vhost).exchanges += 1
            if rec.name not in vhost.exchanges:
                vhost.declare_exchange(
                    rec.name, rec.type, durable=True, auto_delete=rec.auto_delete,
                    internal=rec.internal, arguments=rec.arguments, restored=True,
                )
        for rec in snapshot.queues:
            vhost = self.add_vhost(rec.vhost)
            count(rec.vhost).queues += 1
            if rec.name not in vhost.queues:
                vhost.declare_queue(rec.name, durable=True, arguments=rec.arguments, now=now,
                                    restored=True)
        for rec in snapshot.bindings:
            vhost = self.add_vhost(rec.vhost)
            try:
                vhost.bind(
                    DestinationKind(rec.destination_kind), rec.destination, rec.source,
                    rec.routing_key, rec.arguments,
                )
                count(rec.vhost).bindings += 1
            except BrokerError as exc:
                log.warning("stored binding %r not restored: %s", rec, exc.text)
        highest = 0
        for (vhost_name, queue_name), entries in snapshot.entries.items():
            vhost = self.vhost(vhost_name)
            queue = vhost.queue(queue_name) if vhost is not None else None
            if queue is None or queue.storage is None:
                log.warning("stored messages for missing queue %r in vhost %r; skipped", queue_name, vhost_name)
                continue
            for e in entries:
                message = stand_in(e.message_id, e.size, e.priority)
                queue.restore(message, seq=e.seq,
                              expires_at=e.expires_at, redelivered=e.redelivered or e.acquired,
                              delivery_count=e.delivery_count + e.acquired, ref=e.ref)
                highest = max(highest, e.message_id)
                if self.ledger is not None:
                    self.ledger.queue_event(now, vhost_name, message, queue_name, EventKind.RESTORED)
            restored = count(vhost_name)
            restored.messages += len(entries)
            restored.redelivered += sum(1 for e in entries if e.acquired)
        if highest:
            self._use_ids(itertools.count(max(highest + 1, self.next_gateway_id())))
        return counts

    def record_shutdown(self, now: float) -> int:
        """The gateway stops (its connections closed): what the store does not keep goes
        to the ledger as dropped (``Queue.record_shutdown``); returns how many."""
        if self.ledger is None:
            return 0
        return sum(queue.record_shutdown(now) for vhost in self._vhosts.values()
                   for queue in list(vhost.queues.values()))

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
        """Bytes of message bodies held by all queues and forwarding outboxes."""
        return self.gate.used

    def take_paused_flow(self) -> Optional[PublishFlow]:
        """The paused flow the last publish reached, if any, once (``flow.PublishFlow``):
        the protocol that published stops taking that client's publishes until it resumes."""
        flow, self.paused_flow = self.paused_flow, None
        return flow

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

    @property
    def global_names(self) -> GlobalNames:
        """Which ``node@container`` names are global addresses here: our container's,
        and those a service resolver (the forwarder) claims (``entity_names``)."""
        return GlobalNames(self.container_id, self.serves)

    def serves(self, name: str) -> bool:
        """True when a service node answers for ``name`` (a forwarded ``node@container``)."""
        return self.service(name) is not None

    def service(self, name: str) -> Optional[ServiceNode]:
        """The service node for ``name``, or ``None``."""
        node = self._services.get(name)
        if node is None:
            for resolver in self._resolvers:
                node = resolver(name)
                if node is not None:
                    break
        return node

    # ------------------------------------------------------------------ entity events
    def add_entity_listener(self, listener: EntityListener) -> None:
        """Tell ``listener`` of queues, exchanges and bindings created and deleted (kinds
        ``queue.created``, ``queue.deleted``, ``exchange.created``, ``exchange.deleted``,
        ``binding.created``, ``binding.deleted``: a queue's or exchange's deletion tells
        of each binding it took with it first);
        management publishes them as events. Never called on the message path."""
        self._entity_listeners.append(listener)

    def entity_event(self, kind: str, vhost: str, entity: Any) -> None:
        for listener in self._entity_listeners:
            try:
                listener(kind, vhost, entity)
            except Exception:  # noqa: BLE001 - an observer must not break a declare
                log.exception("entity listener failed on %s", kind)

    # ------------------------------------------------------------------ time
    def tick(self, now: float) -> Optional[float]:
        """Run expiry in every vhost and keep memory under the budget; returns the
        earliest next deadline or ``None``."""
        self.pager.relieve()
        deadline: Optional[float] = None
        for vhost in list(self._vhosts.values()):
            nxt = vhost.tick(now)
            if nxt is not None and (deadline is None or nxt < deadline):
                deadline = nxt
        return deadline

    def __repr__(self) -> str:
        return f"Broker({self.container_id!r}, vhosts={list(self._vhosts)})"
