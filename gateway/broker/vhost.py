"""VirtualHost: the namespace of exchanges, queues and bindings.

Declares, deletes and equivalence checks follow RabbitMQ 3.x (error kinds and texts that
name the entity and the vhost). Publishing routes through the exchange graph with a
visited set (exchange-to-exchange bindings may form cycles; each queue gets a message at
most once), falling back to an exchange's ``alternate-exchange`` when it routes nothing.

Decisions where RabbitMQ and the brief differ: redeclaring a queue of the *same* owner
with a different ``exclusive`` flag is PreconditionFailed naming ``exclusive`` (RabbitMQ
says 405); another owner's exclusive queue is ResourceLocked for every operation.
"""
from __future__ import annotations

import base64
import logging
import secrets
from typing import TYPE_CHECKING, Any, Mapping, NamedTuple, Optional, Protocol

from gateway.ledger import EventKind
from gateway.store.interface import BindingRecord, ExchangeRecord, NullStore, QueueRecord, Store

from .consumers import Consumer
from .errors import AccessRefused, NotFound, PreconditionFailed, ResourceLocked
from .exchanges import Binding, DefaultExchange, DestinationKind, Exchange, exchange_class
from .flow import ProducerGate
from .message import MessageContainer
from .queue_storage import QueueStorage
from .queues import Queue
from .service_calls import ServiceCaller, call_service
from .vhost_checks import check_exchange_equivalence, check_queue_equivalence

if TYPE_CHECKING:
    from .broker import Broker

__all__ = ["VirtualHost", "PublishResult", "ServiceNode", "PREDECLARED_EXCHANGES", "INTERNAL_EXCHANGES"]

log = logging.getLogger(__name__)

#: name -> type of the exchanges every vhost starts with
PREDECLARED_EXCHANGES: dict[str, str] = {
    "amq.direct": "direct",
    "amq.fanout": "fanout",
    "amq.topic": "topic",
    "amq.match": "headers",
    "amq.headers": "headers",
    "amq.rabbitmq.event": "topic",
}
#: pre-declared exchanges clients may bind to but not publish to (the broker's events)
INTERNAL_EXCHANGES = frozenset({"amq.rabbitmq.event"})

_DEFAULT_EXCHANGE_REFUSED = "operation not permitted on the default exchange"


class ServiceNode(Protocol):
    """A node that is not a queue (``amqp$transfer``, ``amqp$management``, forwarders),
    registered with ``Broker.register_service`` and reachable like a queue."""

    def publish(self, message: MessageContainer, now: float) -> None: ...


class PublishResult(NamedTuple):
    """What a publish did.

    ``queues``: queues that took the message; ``rejected``: queues that refused it
    (``reject-publish`` overflow: 0-9-1 nacks the confirm); ``service``: the service node
    name it was handed to, if any. ``routed`` is False for an unroutable message
    (0-9-1 ``mandatory`` returns it).

    A named tuple, not a frozen dataclass: one is made per publish, and a frozen
    dataclass's ``__init__`` costs twice as much.
    """

    queues: tuple[Queue, ...] = ()
    rejected: tuple[Queue, ...] = ()
    service: Optional[str] = None

    @property
    def routed(self) -> bool:
        return bool(self.queues or self.rejected or self.service is not None)

    @property
    def count(self) -> int:
        """Number of queues that took the message."""
        return len(self.queues)


_NOTHING = PublishResult()


def _took_alone(queue: Queue) -> PublishResult:
    """``queue``'s result for a message it alone took, made on first use."""
    result = queue.took_alone = PublishResult((queue,))
    return result


class VirtualHost:
    """See the module docstring. ``broker`` supplies the memory gate, the store, the
    service registry and gateway ids; without one (tests) the vhost makes its own."""

    def __init__(self, name: str, broker: Optional["Broker"] = None) -> None:
        self.name = name
        self.broker = broker
        self.gate: ProducerGate = broker.gate if broker is not None else ProducerGate()
        self.store: Store = broker.store if broker is not None else NullStore()
        self.exchanges: dict[str, Exchange] = {}
        self.queues: dict[str, Queue] = {}
        #: bindings by destination, so deleting a queue/exchange finds its bindings
        self._inbound: dict[tuple[DestinationKind, str], dict[Binding, None]] = {}
        self._exclusive: dict[Any, dict[str, None]] = {}
        self.default_exchange = DefaultExchange(self._queue_for_key, vhost_name=name)
        self.exchanges[""] = self.default_exchange
        for xname, xtype in PREDECLARED_EXCHANGES.items():
            self.exchanges[xname] = exchange_class(xtype)(
                xname, vhost_name=name, durable=True, predeclared=True, internal=xname in INTERNAL_EXCHANGES
            )

    # ------------------------------------------------------------------ lookups
    def _queue_for_key(self, routing_key: str) -> "Optional[Queue]":
        """The default exchange's lookup: a queue name, or ``node@container`` naming this
        gateway's own container (DESIGN.md: 0-9-1 reaches global addresses this way)."""
        queue = self.queues.get(routing_key)
        if queue is None and "@" in routing_key:
            node, _, container = routing_key.rpartition("@")
            if self.broker is not None and container == self.broker.container_id:
                queue = self.queues.get(node)
        return queue

    def exchange(self, name: str) -> Optional[Exchange]:
        return self.exchanges.get(name)

    def queue(self, name: str) -> Optional[Queue]:
        return self.queues.get(name)

    def service(self, name: str) -> Optional[ServiceNode]:
        """The service node registered under ``name`` in the broker, if any."""
        return self.broker.service(name) if self.broker is not None else None

    def _no_exchange(self, name: str) -> NotFound:
        return NotFound(f"no exchange '{name}' in vhost '{self.name}'")

    def _no_queue(self, name: str) -> NotFound:
        return NotFound(f"no queue '{name}' in vhost '{self.name}'")

    def checked_queue(self, name: str, owner: Any = None) -> Queue:
        """The queue ``name``, usable by ``owner``. Raises NotFound, or ResourceLocked for
        another owner's exclusive queue."""
        queue = self.queues.get(name)
        if queue is None:
            raise self._no_queue(name)
        if queue.exclusive_owner is not None and queue.exclusive_owner != owner:
            raise ResourceLocked(
                f"cannot obtain exclusive access to locked {queue.label}. It could be "
                "originally declared on another connection or the exclusive property "
                "value does not match that of the original declaration."
            )
        return queue

    def checked_exchange(self, name: str) -> Exchange:
        exchange = self.exchanges.get(name)
        if exchange is None:
            raise self._no_exchange(name)
        return exchange

    # ------------------------------------------------------------------ exchanges
    def declare_exchange(
        self,
        name: str,
        type: str = "direct",
        *,
        passive: bool = False,
        durable: bool = False,
        auto_delete: bool = False,
        internal: bool = False,
        arguments: Optional[Mapping[str, Any]] = None,
    ) -> Exchange:
        """Declare (or with ``passive`` only look up) an exchange.

        Raises NotFound (passive, missing), CommandInvalid (unknown type),
        AccessRefused (the default exchange, a new ``amq.*`` name), PreconditionFailed
        (inequivalent redeclare, naming the field).
        """
        if passive:
            return self.checked_exchange(name)
        cls = exchange_class(type)
        if name == "":
            raise AccessRefused(_DEFAULT_EXCHANGE_REFUSED)
        existing = self.exchanges.get(name)
        if existing is None:
            if name.startswith("amq."):
                raise AccessRefused(f"exchange name '{name}' contains reserved prefix 'amq.*'")
            existing = cls(
                name,
                vhost_name=self.name,
                durable=durable,
                auto_delete=auto_delete,
                internal=internal,
                arguments=arguments,
            )
            self.exchanges[name] = existing
            if self.broker is not None:
                self.broker.entity_event("exchange.created", self.name, existing)
            if durable:
                self.store.save_exchange(
                    ExchangeRecord(self.name, name, type, durable, auto_delete, internal, dict(existing.arguments))
                )
            return existing
        check_exchange_equivalence(existing, type, durable, auto_delete, internal, arguments or {})
        return existing

    def delete_exchange(self, name: str, *, if_unused: bool = False) -> None:
        """Delete an exchange and every binding to or from it. A missing exchange is not
        an error (RabbitMQ). Raises AccessRefused for the default and pre-declared
        exchanges, PreconditionFailed if ``if_unused`` and it is a binding source."""
        if name == "":
            raise AccessRefused(_DEFAULT_EXCHANGE_REFUSED)
        exchange = self.exchanges.get(name)
        if exchange is None:
            return
        if exchange.predeclared:
            raise AccessRefused(f"{exchange.label} is pre-declared and cannot be deleted")
        if if_unused and exchange.bindings:
            raise PreconditionFailed(f"{exchange.label} in use")
        self._drop_exchange(exchange)

    def _drop_exchange(self, exchange: Exchange) -> None:
        if exchange.deleted:
            return
        exchange.deleted = True
        del self.exchanges[exchange.name]
        for binding in list(exchange.bindings):
            self._remove_binding(exchange, binding, cascade=True)
        for binding in list(self._inbound.get((DestinationKind.EXCHANGE, exchange.name), ())):
            source = self.exchanges.get(binding.source)
            if source is not None:
                self._remove_binding(source, binding, cascade=True)
        self._inbound.pop((DestinationKind.EXCHANGE, exchange.name), None)
        if exchange.durable:
            self.store.delete_exchange(self.name, exchange.name)
        if self.broker is not None:
            self.broker.entity_event("exchange.deleted", self.name, exchange)

    # ------------------------------------------------------------------ queues
    def declare_queue(
        self,
        name: str = "",
        *,
        passive: bool = False,
        durable: bool = False,
        exclusive: bool = False,
        auto_delete: bool = False,
        arguments: Optional[Mapping[str, Any]] = None,
        owner: Any = None,
        now: float = 0.0,
    ) -> Queue:
        """Declare (or with ``passive`` look up) a queue; ``owner`` is the caller's owner
        token (needed for ``exclusive``). An empty name gets a server name
        ``amq.gen-<22 base64url chars>``.

        Raises NotFound (passive, missing), AccessRefused (a new name starting with
        ``amq.``), ResourceLocked (another owner's exclusive queue), PreconditionFailed
        (inequivalent redeclare), InvalidArgument / FeatureNotImplemented (arguments).
        """
        if passive:
            queue = self.checked_queue(name, owner)
            queue.touch(now)
            return queue
        if exclusive and owner is None:
            raise ValueError("an exclusive queue needs an owner token")
        if name == "":
            name = self._server_name()
        elif name.startswith("amq."):
            raise AccessRefused(f"queue name '{name}' contains reserved prefix 'amq.*'")
        existing = self.queues.get(name)
        if existing is not None:
            if existing.exclusive_owner is not None and existing.exclusive_owner != owner:
                self.checked_queue(name, owner)  # raises ResourceLocked
            check_queue_equivalence(existing, durable, exclusive, auto_delete, arguments or {})
            existing.touch(now)
            return existing
        queue = Queue(
            name,
            self,
            durable=durable,
            exclusive_owner=owner if exclusive else None,
            auto_delete=auto_delete,
            arguments=arguments,
            now=now,
        )
        self.queues[name] = queue
        if self.broker is not None:
            self.broker.entity_event("queue.created", self.name, queue)
        if exclusive:
            self._exclusive.setdefault(owner, {})[name] = None
        return queue

    # QueueHost (besides name, gate and dead_letter)
    @property
    def ledger(self) -> Any:
        """The broker's ledger buffer, or None (no broker, ledger off)."""
        return self.broker.ledger if self.broker is not None else None

    def queue_storage(self, queue: Queue) -> Optional[QueueStorage]:
        """Write the storable ``queue``'s record; its ``QueueStorage`` when the store keeps
        messages, else None."""
        key = self.store.save_queue(QueueRecord(self.name, queue.name, True, False, dict(queue.arguments)))
        if not self.store.persistent:
            return None
        loader = self.broker.message_loader if self.broker is not None else None
        return QueueStorage(queue, self.store, key, loader, self.gate)

    def _server_name(self) -> str:
        while True:
            token = base64.urlsafe_b64encode(secrets.token_bytes(16)).rstrip(b"=").decode("ascii")
            name = f"amq.gen-{token}"
            if name not in self.queues:
                return name

    def delete_queue(
        self, name: str, *, if_unused: bool = False, if_empty: bool = False, owner: Any = None
    ) -> int:
        """Delete a queue; returns its available message count. A missing queue gives 0
        (RabbitMQ). Raises ResourceLocked / PreconditionFailed."""
        if name not in self.queues:
            return 0
        return self.checked_queue(name, owner).delete(if_unused=if_unused, if_empty=if_empty)

    def purge_queue(self, name: str, *, owner: Any = None) -> int:
        """Purge available messages; returns how many. Raises NotFound / ResourceLocked."""
        return self.checked_queue(name, owner).purge()

    def forget_queue(self, queue: Queue, reason: str) -> int:
        """QueueHost: called by ``Queue.delete``/auto-delete/expiry, the owner's close or
        the vhost's removal: unregister and tear down."""
        if self.queues.get(queue.name) is not queue:
            return queue.tear_down(reason)
        del self.queues[queue.name]
        if queue.exclusive_owner is not None:
            owned = self._exclusive.get(queue.exclusive_owner)
            if owned is not None:
                owned.pop(queue.name, None)
                if not owned:
                    del self._exclusive[queue.exclusive_owner]
        for binding in list(self._inbound.pop((DestinationKind.QUEUE, queue.name), ())):
            source = self.exchanges.get(binding.source)
            if source is not None:
                self._remove_binding(source, binding, cascade=True, store=False)
        if queue.storable:
            self.store.delete_queue(self.name, queue.name)
        count = queue.tear_down(reason)
        if self.broker is not None:
            self.broker.entity_event("queue.deleted", self.name, queue)
        return count

    def consume(self, queue_name: str, consumer: Consumer, *, owner: Any = None, now: float) -> Queue:
        """Attach ``consumer`` to a queue usable by ``owner`` and dispatch. Raises
        NotFound, ResourceLocked (exclusive queue or exclusive-consumer conflict)."""
        queue = self.checked_queue(queue_name, owner)
        queue.add_consumer(consumer, now)
        return queue

    def owner_closed(self, owner: Any) -> list[str]:
        """The owner (connection) went away: delete its exclusive queues; returns their
        names."""
        names = list(self._exclusive.pop(owner, {}))
        for name in names:
            queue = self.queues.get(name)
            if queue is not None:
                self.forget_queue(queue, f"{queue.label}: its owner closed")
        return names

    # ------------------------------------------------------------------ bindings
    def _destination(self, kind: DestinationKind, name: str, owner: Any) -> Any:
        if kind is DestinationKind.QUEUE:
            return self.checked_queue(name, owner)
        if name == "":
            raise AccessRefused(_DEFAULT_EXCHANGE_REFUSED)
        return self.checked_exchange(name)

    def bind(
        self,
        destination_kind: DestinationKind,
        destination: str,
        source_exchange: str,
        routing_key: str = "",
        arguments: Optional[Mapping[str, Any]] = None,
        *,
        owner: Any = None,
    ) -> bool:
        """Bind ``destination`` (a queue or exchange name) to ``source_exchange``;
        returns False if the binding existed. Raises AccessRefused (default exchange),
        NotFound, ResourceLocked, InvalidArgument (headers ``x-match``)."""
        if source_exchange == "":
            raise AccessRefused(_DEFAULT_EXCHANGE_REFUSED)
        source = self.checked_exchange(source_exchange)
        dest = self._destination(destination_kind, destination, owner)
        binding = Binding.create(source_exchange, destination_kind, destination, routing_key, arguments)
        if not source.add_binding(binding, dest):
            return False
        self._inbound.setdefault((destination_kind, destination), {})[binding] = None
        if source.durable and _stored(dest):
            self.store.save_binding(_binding_record(self.name, binding))
        if self.broker is not None:
            self.broker.entity_event("binding.created", self.name, binding)
        return True

    def unbind(
        self,
        destination_kind: DestinationKind,
        destination: str,
        source_exchange: str,
        routing_key: str = "",
        arguments: Optional[Mapping[str, Any]] = None,
        *,
        owner: Any = None,
    ) -> bool:
        """Remove a binding; returns False if there was none (not an error, like
        RabbitMQ). Raises AccessRefused, NotFound, ResourceLocked."""
        if source_exchange == "":
            raise AccessRefused(_DEFAULT_EXCHANGE_REFUSED)
        source = self.checked_exchange(source_exchange)
        self._destination(destination_kind, destination, owner)
        binding = Binding.create(source_exchange, destination_kind, destination, routing_key, arguments)
        if binding not in source.bindings:
            return False
        self._remove_binding(source, binding, cascade=True)
        return True

    def _remove_binding(self, source: Exchange, binding: Binding, *, cascade: bool, store: bool = True) -> None:
        dest = source.remove_binding(binding)
        if dest is None:
            return
        inbound = self._inbound.get((binding.destination_kind, binding.destination))
        if inbound is not None:
            inbound.pop(binding, None)
            if not inbound:
                del self._inbound[(binding.destination_kind, binding.destination)]
        if store and source.durable and _stored(dest):
            self.store.delete_binding(_binding_record(self.name, binding))
        if self.broker is not None:
            self.broker.entity_event("binding.deleted", self.name, binding)
        if cascade and source.auto_delete and not source.bindings and not source.deleted:
            self._drop_exchange(source)

    def bindings(self) -> list[Binding]:
        """Every explicit binding in the vhost (for management and tests)."""
        return [b for x in self.exchanges.values() for b in x.bindings]

    # ------------------------------------------------------------------ publish
    def publish(self, exchange: str, routing_key: str, message: MessageContainer, now: float) -> PublishResult:
        """Route ``message`` from ``exchange`` and enqueue it.

        ``exchange``/``routing_key`` are written into the message if they differ (the
        container is new at publish time). A ``gateway_id`` is assigned if unset.
        Raises NotFound (unknown exchange), AccessRefused (internal exchange).
        Through the default exchange, a key naming a registered service node (and no
        queue) hands the message to that node.
        """
        source = self.exchanges.get(exchange)
        if source is None:
            raise self._no_exchange(exchange)
        if source.internal:
            raise AccessRefused(f"cannot publish to internal {source.label}")
        source.published_in += 1
        if message.routing_key != routing_key:
            message.routing_key = routing_key
        if message.exchange != exchange:
            message.exchange = exchange
        if not message.gateway_id and self.broker is not None:
            message.gateway_id = self.broker.next_gateway_id()
        if exchange == "":
            queue = self.queues.get(routing_key)
            if queue is None and "@" in routing_key:
                queue = self._queue_for_key(routing_key)
            if queue is None:
                node = self.service(routing_key) if self.broker is not None else None
                if node is None:
                    return _NOTHING
                call_service(node, message, now, ServiceCaller(None, self.name))
                return PublishResult(service=routing_key)
            if queue.enqueue(message, now):
                return queue.took_alone or _took_alone(queue)
            return PublishResult(rejected=(queue,))
        return self._deliver(self.route(source, message), message, now)

    def route(self, source: Exchange, message: MessageContainer) -> list[Queue]:
        """The queues ``message`` reaches from ``source``, each once, following
        exchange-to-exchange bindings and alternate exchanges; cycle-safe."""
        queues: dict[Queue, None] = {}
        seen = {source}
        stack = [source]
        while stack:
            exchange = stack.pop()
            hit = False
            for dest in exchange.route(message):
                hit = True
                if isinstance(dest, Queue):
                    queues[dest] = None
                elif dest not in seen:
                    seen.add(dest)
                    stack.append(dest)
            if not hit and exchange.alternate_exchange is not None:
                alt = self.exchanges.get(exchange.alternate_exchange)
                if alt is not None and alt not in seen:
                    seen.add(alt)
                    stack.append(alt)
        return list(queues)

    def _deliver(self, queues: list[Queue], message: MessageContainer, now: float) -> PublishResult:
        if not queues:
            return _NOTHING
        took: list[Queue] = []
        refused: list[Queue] = []
        for queue in queues:
            (took if queue.enqueue(message, now) else refused).append(queue)
        if len(took) == 1 and not refused:
            return took[0].took_alone or _took_alone(took[0])
        return PublishResult(tuple(took), tuple(refused))  # by position: no kwargs dict

    def dead_letter(self, message: MessageContainer, now: float) -> PublishResult:
        """Publish a dead-lettered copy (made by ``MessageContainer.with_death``) to its
        ``exchange`` with its ``routing_key``: ``publish_own`` as a dead-letter copy."""
        return self.publish_own(message, now, dead_letter=True)

    def publish_own(self, message: MessageContainer, now: float, *, dead_letter: bool = False) -> PublishResult:
        """The broker publishes a message of its own (a dead-lettered copy, a broadcast
        event) to its ``exchange`` with its ``routing_key``: internal exchanges take it,
        it gets a new ``gateway_id``, and its routing verdict goes to the ledger as what
        it was (``dead_letter``: a copy, ``reason`` = the death reason; else the
        broker's event). A missing exchange drops it. For a dead-letter copy, like
        RabbitMQ, a queue already in the message's x-death is skipped unless some death
        was a rejection (a cycle of automatic dead-lettering would never end)."""
        source = self.exchanges.get(message.exchange)
        if source is None:
            log.debug("exchange %r of the broker's own message missing in vhost %r: dropped",
                      message.exchange, self.name)
            self._record_own_verdict(message, _NOTHING, now, dead_letter, copied=False)
            return _NOTHING
        if self.broker is not None:
            message.gateway_id = self.broker.next_gateway_id()
        if source is self.default_exchange:
            queue = self.queues.get(message.routing_key)
            queues = [queue] if queue is not None else []
        else:
            queues = self.route(source, message)
        deaths = message.deaths or ()
        if dead_letter and queues and not any(d.get("reason") == "rejected" for d in deaths):
            seen = {d.get("queue") for d in deaths}
            queues = [q for q in queues if q.name not in seen]
        result = self._deliver(queues, message, now)
        self._record_own_verdict(message, result, now, dead_letter)
        return result

    def _record_own_verdict(self, message: MessageContainer, result: PublishResult, now: float,
                            dead_letter: bool, copied: bool = True) -> None:
        ledger = self.ledger
        if ledger is None:
            return
        if result.queues:
            event = EventKind.ROUTED
        elif result.rejected:
            event = EventKind.REFUSED
        else:
            event = EventKind.UNROUTABLE
        if not dead_letter:
            if copied:
                ledger.broker_message(now, self.name, message, event, result.queues)
            return
        deaths = message.deaths
        ledger.dead_letter_copy(now, self.name, message, event, result.queues,
                                str(deaths[0].get("reason")) if deaths else None, copied)

    # ------------------------------------------------------------------ time
    def tick(self, now: float) -> Optional[float]:
        """Expire messages and delete queues unused past ``x-expires``; returns the next
        deadline (seconds) or ``None``."""
        deadline: Optional[float] = None
        for queue in list(self.queues.values()):
            if queue.deleted:
                continue
            queue.expire(now)
            expires = queue.expires_at()
            if expires is not None and now >= expires:
                self.forget_queue(queue, f"{queue.label} expired")
                continue
            nxt = queue.next_deadline()
            if nxt is not None and (deadline is None or nxt < deadline):
                deadline = nxt
        return deadline

    def __repr__(self) -> str:
        return f"VirtualHost({self.name!r}, exchanges={len(self.exchanges)}, queues={len(self.queues)})"


def _stored(destination: Any) -> bool:
    """A binding's destination is in the store: a durable exchange, a storable queue."""
    if isinstance(destination, Queue):
        return destination.storable
    return bool(destination.durable)


def _binding_record(vhost: str, binding: Binding) -> BindingRecord:
    return BindingRecord(
        vhost,
        binding.source,
        binding.destination_kind.value,
        binding.destination,
        binding.routing_key,
        dict(binding.arguments),
    )
