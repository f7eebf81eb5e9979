"""``Publisher``: where a message published in a vhost goes.

A collaborator of ``VirtualHost``: routing through the exchange graph (a visited set,
since exchange-to-exchange bindings may form cycles; each queue gets a message at most
once; an exchange's ``alternate-exchange`` when it routes nothing), the default
exchange's lookup (a queue name, or a global address ``node@container``: its node, or no
local queue when it is forwarded), enqueueing, the broker's own publishes (dead-lettered
copies, events) with their ledger verdicts, and management's moves from one queue to
another with their ledger records. It reads the vhost's maps of exchanges and queues and writes neither; the
vhost hands its publishing calls straight to it (its own bound methods, so the
per-message path has no call in between)."""
from __future__ import annotations

import logging
from typing import Any, Iterator, Optional

from gateway.ledger import EventKind

from .errors import AccessRefused, NotFound
from .exchanges import Exchange
from .message import DeathReason, MessageContainer
from .publish_result import PublishResult
from .queues import Queue
from .service_calls import ServiceCaller, call_service
from .vhost_checks import no_exchange

__all__ = ["PublishResult", "Publisher", "take_ready"]

log = logging.getLogger(__name__)


_NOTHING = PublishResult()


def take_ready(queue: Queue, count: Optional[int], now: float) -> Iterator[MessageContainer]:
    """Take up to ``count`` (None: all) ready messages from the head of ``queue``, each
    gone from it (and from the store) before the caller places it elsewhere (management's
    move and dead-lettering)."""
    taken = 0
    while count is None or taken < count:
        entry = queue.get(now, ack=False)
        if entry is None:
            return
        taken += 1
        yield entry.message


class Publisher:
    """See the module docstring. ``exchanges`` and ``queues`` are the vhost's maps (read
    here); ``broker`` gives gateway ids, this gateway's container id, the service nodes
    and the ledger (None in tests)."""

    __slots__ = ("_vhost", "_broker", "_exchanges", "_queues", "_service_caller")

    def __init__(self, vhost: str, broker: Any, exchanges: dict[str, Exchange], queues: dict[str, Queue]) -> None:
        self._vhost = vhost
        self._broker = broker
        self._exchanges = exchanges
        self._queues = queues
        #: who a publish routed to a service node comes from (no user: the protocol did
        #: not say); the same for every such publish (a forwarded one: each message)
        self._service_caller = ServiceCaller(None, vhost)

    def queue_for_key(self, routing_key: str) -> Optional[Queue]:
        """The default exchange's lookup: a queue name; a global address
        (``entity_names``) always means its node: the node itself for this gateway's own
        container, no local queue for a forwarded one (the transfer service takes it;
        DESIGN.md: 0-9-1 reaches global addresses this way)."""
        if "@" in routing_key and self._broker is not None:
            found = self._broker.global_names.resolve(routing_key)
            if found is not None:
                node, _container, own = found
                return self._queues.get(node) if own else None
        return self._queues.get(routing_key)

    def publish(self, exchange: str, routing_key: str, message: MessageContainer, now: float) -> PublishResult:
        """Route ``message`` from ``exchange`` and enqueue it.

        ``exchange``/``routing_key`` are written into the message if they differ (the
        container is new at publish time). A ``gateway_id`` is assigned if unset.
        Raises NotFound (unknown exchange), AccessRefused (internal exchange).
        Through the default exchange, a key naming a registered service node (and no
        queue) hands the message to that node.
        """
        source = self._exchanges.get(exchange)
        if source is None:
            raise no_exchange(exchange, self._vhost)
        if source.internal:
            raise AccessRefused(f"cannot publish to internal {source.label}")
        source.published_in += 1
        if message.routing_key != routing_key:
            message.routing_key = routing_key
        if message.exchange != exchange:
            message.exchange = exchange
        if not message.gateway_id and self._broker is not None:
            message.gateway_id = self._broker.next_gateway_id()
        if exchange == "":
            node = None
            if "@" in routing_key:
                # a global address always means its node, never a local queue of its name:
                # the forwarder claims it first (``GlobalNames``: forwarded is what a service
                # resolves), then this gateway's own container
                node = self._broker.service(routing_key) if self._broker is not None else None
                queue = None if node is not None else self.queue_for_key(routing_key)
            else:
                queue = self._queues.get(routing_key)
            if queue is None:
                if node is None:
                    node = self._broker.service(routing_key) if self._broker is not None else None
                if node is None:
                    return _NOTHING
                call_service(node, message, now, self._service_caller)
                return PublishResult(service=routing_key)
            if queue.enqueue(message, now):
                return queue.took_alone
            return PublishResult(rejected=(queue,))
        return self._deliver(self.route(source, message), message, now)

    def publish_recorded(self, exchange: str, routing_key: str, message: MessageContainer,
                         now: float) -> PublishResult:
        """``publish`` for a message no connection carried in (the management API's
        publish): its routing verdict goes to the ledger as one of the broker's own."""
        result = self.publish(exchange, routing_key, message, now)
        self._record_own_verdict(message, result, now, dead_letter=False)
        return result

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
                alt = self._exchanges.get(exchange.alternate_exchange)
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
            return took[0].took_alone
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
        source = self._exchanges.get(message.exchange)
        if source is None:
            log.debug("exchange %r of the broker's own message missing in vhost %r: dropped",
                      message.exchange, self._vhost)
            self._record_own_verdict(message, _NOTHING, now, dead_letter, copied=False)
            return _NOTHING
        if self._broker is not None:
            message.gateway_id = self._broker.next_gateway_id()
        if message.exchange == "":  # the default exchange
            queue = self._queues.get(message.routing_key)
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

    def move(self, source: str, target: str, count: Optional[int], now: float) -> int:
        """Move up to ``count`` (None: all) ready messages from the head of the queue
        ``source`` to the tail of ``target`` (management's poison-message handling); returns
        how many left ``source``. Each goes on as a copy with the same gateway id, recorded
        in the ledger as ``moved``; one that ``target`` refuses (a full ``reject-publish``
        queue) is dead-lettered from ``source`` (reason ``rejected``). Raises NotFound for
        a missing queue."""
        queues = self._queues
        source_queue, target_queue = queues.get(source), queues.get(target)
        for name, queue in ((source, source_queue), (target, target_queue)):
            if queue is None:
                raise NotFound(f"no queue '{name}' in vhost '{self._vhost}'")
        assert source_queue is not None and target_queue is not None
        ledger = self._broker.ledger if self._broker is not None else None
        moved = 0
        for message in take_ready(source_queue, count, now):
            moved += 1
            if not target_queue.enqueue(message.copy(), now):
                log.warning("%s refused a moved message; it is dead-lettered from %s",
                            target_queue.label, source_queue.label)
                source_queue.dead_letter(message, DeathReason.REJECTED, now)
            elif ledger is not None:
                ledger.moved(now, self._vhost, message, source, target_queue)
        return moved

    def _record_own_verdict(self, message: MessageContainer, result: PublishResult, now: float,
                            dead_letter: bool, copied: bool = True) -> None:
        ledger = self._broker.ledger if self._broker is not None else None
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
                ledger.broker_message(now, self._vhost, message, event, result.queues)
            return
        deaths = message.deaths
        ledger.dead_letter_copy(now, self._vhost, message, event, result.queues,
                                str(deaths[0].get("reason")) if deaths else None, copied)
