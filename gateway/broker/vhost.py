"""VirtualHost: the namespace of exchanges, queues and bindings.

Declares, deletes and equivalence checks follow RabbitMQ 3.x (error kinds and texts that
name the entity and the vhost). The vhost owns its maps of exchanges and queues and the
exclusive queues by owner; two collaborators own the rest: ``vhost_bindings.Bindings``
the bindings' index by destination, their records and events, and
``vhost_publish.Publisher`` routing and enqueueing (``publish``, ``route``,
``dead_letter`` and ``publish_own`` are the publisher's own bound methods).

Decisions where RabbitMQ and the brief differ: redeclaring a queue of the *same* owner
with a different ``exclusive`` flag is PreconditionFailed naming ``exclusive`` (RabbitMQ
says 405); another owner's exclusive queue is ResourceLocked for every operation.
"""
from __future__ import annotations

import base64
import logging
import secrets
from typing import Any, Callable, Mapping, Optional, Protocol

from gateway.store.interface import ExchangeRecord, NullStore, QueueRecord, Store

from .consumers import Consumer
from .entity_names import GlobalNames, check_new_name
from .errors import AccessRefused, NotFound, PreconditionFailed, ResourceLocked
from .exchanges import Binding, DefaultExchange, DestinationKind, Exchange, exchange_class
from .flow import ProducerGate
from .message import MessageContainer
from .queue_storage import QueueStorage
from .queues import Queue
from .vhost_bindings import DEFAULT_EXCHANGE_REFUSED, Bindings
from .vhost_checks import check_exchange_equivalence, check_queue_equivalence, no_exchange
from .vhost_policies import VhostLimits, VhostPolicies, apply_exchange_policy
from .vhost_publish import PublishResult, Publisher


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


class ServiceNode(Protocol):
    """A node that is not a queue (``amqp$transfer``, ``amqp$management``, forwarders),
    registered with ``Broker.register_service`` and reachable like a queue."""

    def publish(self, message: MessageContainer, now: float) -> None: ...


class VirtualHost:
    """See the module docstring. ``broker`` supplies the memory gate, the store, the
    service registry and gateway ids; without one (tests) the vhost makes its own."""

    #: ``Publisher.publish``: route ``message`` from an exchange and enqueue it
    publish: Callable[[str, str, MessageContainer, float], PublishResult]
    #: ``Publisher.route``: the queues a message reaches from an exchange
    route: Callable[[Exchange, MessageContainer], list[Queue]]
    #: ``Publisher.dead_letter`` (QueueHost): publish a dead-lettered copy
    dead_letter: Callable[[MessageContainer, float], PublishResult]
    #: ``Publisher.publish_own``: the broker's own message (a dead-lettered copy, an event)
    publish_own: Callable[..., PublishResult]
    #: ``Publisher.move``: management's move of ready messages from one queue to another
    move_messages: Callable[[str, str, Optional[int], float], int]

    def __init__(self, name: str, broker: Any = None) -> None:
        self.name = name
        self.broker = broker
        self.gate: ProducerGate = broker.gate if broker is not None else ProducerGate()
        self.store: Store = broker.store if broker is not None else NullStore()
        self.exchanges: dict[str, Exchange] = {}
        self.queues: dict[str, Queue] = {}
        self._exclusive: dict[Any, dict[str, None]] = {}
        #: policies and limits (management sets them; ``vhost_policies``)
        self.policies = VhostPolicies(self)
        self.limits = VhostLimits(name)
        self._bindings = Bindings(name, self.store, broker, self.exchanges, self._drop_exchange)
        publisher = Publisher(name, broker, self.exchanges, self.queues)
        self.publish = publisher.publish
        self.publish_recorded = publisher.publish_recorded
        self.route = publisher.route
        self.dead_letter = publisher.dead_letter
        self.publish_own = publisher.publish_own
        self.move_messages = publisher.move
        self.default_exchange = DefaultExchange(publisher.queue_for_key, vhost_name=name)
        self.exchanges[""] = self.default_exchange
        for xname, xtype in PREDECLARED_EXCHANGES.items():
            self.exchanges[xname] = exchange_class(xtype)(
                xname, vhost_name=name, durable=True, predeclared=True, internal=xname in INTERNAL_EXCHANGES
            )

    # ------------------------------------------------------------------ lookups
    @property
    def global_names(self) -> Optional[GlobalNames]:
        """Which ``node@container`` names are global addresses here (``entity_names``)."""
        return self.broker.global_names if self.broker is not None else None

    def exchange(self, name: str) -> Optional[Exchange]:
        return self.exchanges.get(name)

    def queue(self, name: str) -> Optional[Queue]:
        return self.queues.get(name)

    def service(self, name: str) -> Optional[ServiceNode]:
        """The service node registered under ``name`` in the broker, if any."""
        return self.broker.service(name) if self.broker is not None else None

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
            raise no_exchange(name, self.name)
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
        restored: bool = False,
    ) -> Exchange:
        """Declare (or with ``passive`` only look up) an exchange; ``restored``: from the
        store, its name not checked again.

        Raises NotFound (passive, missing), CommandInvalid (unknown type),
        AccessRefused (the default exchange, a new ``amq.*`` name), PreconditionFailed
        (inequivalent redeclare, naming the field), InvalidArgument (a new name that
        breaks a rule of ``entity_names``).
        """
        if passive:
            return self.checked_exchange(name)
        cls = exchange_class(type)
        if name == "":
            raise AccessRefused(DEFAULT_EXCHANGE_REFUSED)
        existing = self.exchanges.get(name)
        if existing is None:
            if name.startswith("amq."):
                raise AccessRefused(f"exchange name '{name}' contains reserved prefix 'amq.*'")
            if not restored:
                check_new_name("exchange", name, self.global_names)
            existing = cls(
                name,
                vhost_name=self.name,
                durable=durable,
                auto_delete=auto_delete,
                internal=internal,
                arguments=arguments,
            )
            self.exchanges[name] = existing
            if len(self.policies):
                apply_exchange_policy(existing, self.policies.for_exchange(name))
            if self.broker is not None:
                self.broker.entity_event("exchange.created", self.name, existing)
            if durable:
                self.store.save_exchange(self._exchange_record(existing))
            return existing
        check_exchange_equivalence(existing, type, durable, auto_delete, internal, arguments or {})
        if existing.durable and not existing.predeclared:
            # writes nothing unless its first write is not committed yet: then the caller
            # waits for that commit too (``gateway/store/sqlite_entities.py``)
            self.store.save_exchange(self._exchange_record(existing))
        return existing

    def _exchange_record(self, exchange: Exchange) -> ExchangeRecord:
        return ExchangeRecord(self.name, exchange.name, exchange.type.value, True, exchange.auto_delete,
                              exchange.internal, dict(exchange.arguments))

    def delete_exchange(self, name: str, *, if_unused: bool = False) -> None:
        """Delete an exchange and every binding to or from it. A missing exchange is not
        an error (RabbitMQ). Raises AccessRefused for the default and pre-declared
        exchanges, PreconditionFailed if ``if_unused`` and it is a binding source."""
        if name == "":
            raise AccessRefused(DEFAULT_EXCHANGE_REFUSED)
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
        self._bindings.remove_from(exchange)
        self._bindings.remove_to(DestinationKind.EXCHANGE, exchange.name)
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
        restored: bool = False,
    ) -> Queue:
        """Declare (or with ``passive`` look up) a queue; ``owner`` is the caller's owner
        token (needed for ``exclusive``). An empty name gets a server name
        ``amq.gen-<22 base64url chars>``. ``restored``: from the store, its name and the
        vhost's queue limit not checked again. The vhost's best policy applies to a new
        queue.

        Raises NotFound (passive, missing), AccessRefused (a new name starting with
        ``amq.``), ResourceLocked (another owner's exclusive queue), PreconditionFailed
        (inequivalent redeclare), InvalidArgument / FeatureNotImplemented (arguments, or a
        new name that breaks a rule of ``entity_names``), ResourceLimitExceeded (the
        vhost's ``max-queues``).
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
            if existing.storable:
                self.store.save_queue(self._queue_record(existing))  # as for exchanges above
            return existing
        if not restored:
            check_new_name("queue", name, self.global_names)
            self.limits.check_new_queue(name, len(self.queues))
        queue = Queue(
            name,
            self,
            durable=durable,
            exclusive_owner=owner if exclusive else None,
            auto_delete=auto_delete,
            arguments=arguments,
            now=now,
            policy=self.policies.for_queue(name) if len(self.policies) else None,
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
        key = self.store.save_queue(self._queue_record(queue))
        if not self.store.persistent:
            return None
        loader = self.broker.message_loader if self.broker is not None else None
        return QueueStorage(queue, self.store, key, loader)

    def _queue_record(self, queue: Queue) -> QueueRecord:
        return QueueRecord(self.name, queue.name, True, False, dict(queue.arguments))

    def _server_name(self) -> str:
        while True:
            token = base64.urlsafe_b64encode(secrets.token_bytes(16)).rstrip(b"=").decode("ascii")
            name = f"amq.gen-{token}"
            if name not in self.queues:
                return name

    def delete_queue(
        self, name: str, *, if_unused: bool = False, if_empty: bool = False, owner: Any = None,
        now: Optional[float] = None,
    ) -> int:
        """Delete a queue; returns its available message count. A missing queue gives 0
        (RabbitMQ). Raises ResourceLocked / PreconditionFailed. ``now``: the time the
        ledger records its messages' deletion at (else the queue's last)."""
        if name not in self.queues:
            return 0
        return self.checked_queue(name, owner).delete(if_unused=if_unused, if_empty=if_empty,
                                                      now=now)

    def purge_queue(self, name: str, *, owner: Any = None, now: Optional[float] = None) -> int:
        """Purge available messages; returns how many. Raises NotFound / ResourceLocked."""
        return self.checked_queue(name, owner).purge(now)

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
        self._bindings.remove_to(DestinationKind.QUEUE, queue.name, store=False)
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
            raise AccessRefused(DEFAULT_EXCHANGE_REFUSED)
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
            raise AccessRefused(DEFAULT_EXCHANGE_REFUSED)
        source = self.checked_exchange(source_exchange)
        dest = self._destination(destination_kind, destination, owner)
        binding = Binding.create(source_exchange, destination_kind, destination, routing_key, arguments)
        return self._bindings.add(source, binding, dest)

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
            raise AccessRefused(DEFAULT_EXCHANGE_REFUSED)
        source = self.checked_exchange(source_exchange)
        self._destination(destination_kind, destination, owner)
        binding = Binding.create(source_exchange, destination_kind, destination, routing_key, arguments)
        if binding not in source.bindings:
            return False
        self._bindings.remove(source, binding, cascade=True)
        return True

    def bindings(self) -> list[Binding]:
        """Every explicit binding in the vhost (for management and tests)."""
        return self._bindings.all()

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
