"""``amqp$transfer``: the service node every ``node@container`` address is an alias of.

Registered by the service as the node ``amqp$transfer`` and as the broker's resolver for
``x@container`` names whose container is a configured remote (or any container when
``default_remote`` is set). Unknown containers get no node, so the protocols refuse them
their own way (a 1.0 attach or relayed message: ``amqp:not-found`` naming the container;
0-9-1: unroutable, ``basic.return`` 312 NO_ROUTE when mandatory).

:meth:`TransferService.publish` takes a message whose routing key is its global address
(the 1.0 link sets it from the link address or the ``to``; 0-9-1 publishes it so),
writes it to the durable outbox of its remote and hands it to that remote's forwarder.
The write joins the store's open generation, so the protocol's confirm (0-9-1
basic.ack, 1.0 ``accepted``) waits for its commit, as for a persistent message on a
durable queue. The receiving side (a link to ``amqp$transfer`` whose messages carry
``to``) resolves ``to`` locally through the address grammar; duplicates are dropped by
the ``DedupeWindow`` (``dedupe``, which the link asks and tells directly: once per
message).
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Optional

from addressing import split_global
from gateway.broker.errors import NotAllowed, NotFound
from gateway.broker.message import Encoding, MessageContainer
from gateway.broker.queued_message import message_row
from gateway.connection_log import DEFAULT_INTERVAL
from gateway.forward import annotations as fa
from gateway.forward.dedupe import DedupeWindow
from gateway.forward.forwarder import REMOTE_NOT_CONFIGURED, Forwarder, OutboxEntry
from gateway.forward.ledger_events import ForwardLedger
from gateway.forward.outbound import OutboundMessage
from gateway.forward.rendering import amqp10_payload
from gateway.forward.settings import ForwardingSettings
from gateway.store.interface import OutboxRow, StoredMessage
from translators.amqp10_sections import with_message_annotations
from translators.errors import TranslationError

__all__ = ["TransferService", "dead_letter_queue"]

log = logging.getLogger(__name__)

_AMQP10 = Encoding.AMQP10


def dead_letter_queue(container: str) -> str:
    """The local queue where messages ``container`` rejected go."""
    return f"forward.dead-letter.{container}"


class TransferService:
    """See the module docstring. ``broker``: the ``Broker`` (store, vhosts, gateway ids,
    message loader); ``clock()``: the loop's time; messages a remote rejects go to
    ``dead_letter_queue(remote)`` in vhost ``dead_letter_vhost``; each forwarder logs
    its dead letters once per ``log_interval`` seconds (``logging.summary_interval``)."""

    def __init__(self, broker: Any, settings: ForwardingSettings, clock: Callable[[], float],
                 dead_letter_vhost: str = "/", log_interval: float = DEFAULT_INTERVAL,
                 from_amqp10: Optional[Callable[[bytes, float], MessageContainer]] = None) -> None:
        self.broker = broker
        self.settings = settings
        self.container_id: str = broker.container_id
        self._store = broker.store
        self._clock = clock
        #: where the dead-letter queues are (management checks the caller's rights there)
        self.dead_letter_vhost = dead_letter_vhost
        #: encoded 1.0 message, receive time -> a container (the 1.0 engine's); dead
        #: letters are made 1.0 messages so the remote's error is in their bytes
        self._from_amqp10 = from_amqp10
        self.dedupe = DedupeWindow(broker.store, settings.dedupe_window)
        ledger = self._ledger = ForwardLedger(broker)
        self.forwarders: dict[str, Forwarder] = {
            r.container: Forwarder(r, broker.store, self._dead_letter, clock, ledger, broker.gate,
                                   broker.message_loader, log_interval=log_interval)
            for r in settings.remotes}
        self.refused_loops = 0
        #: the last address ``resolve`` was asked for, split, and the forwarder it reaches
        self._last_route: tuple[str, Optional[tuple[str, str]], Optional[Forwarder]] = ("", None, None)
        #: called with each dead letter's description (the service emits the
        #: ``forward.dead_lettered`` event from it); None: no one listens
        self.on_dead_letter: Optional[Callable[[dict], None]] = None

    # -- the broker's view -----------------------------------------------------------------
    def resolve(self, name: str) -> Optional["TransferService"]:
        """The broker's service resolver: this node for ``x@remote``, else None. The
        route found is kept (``_last_route``): a publish to this node asks for it next, and
        the next resolve of the same name is answered from it."""
        last = self._last_route
        if last[0] == name:  # (a stream of publishes to one address: no split each)
            return self if last[2] is not None else None
        if "@" not in name:
            return None
        parts = split_global(name)
        forwarder = None if parts is None else self.forwarder_for(parts[1])
        self._last_route = (name, parts, forwarder)
        return self if forwarder is not None else None

    def forwarder_for(self, container: str) -> Optional[Forwarder]:
        """The forwarder that reaches ``container`` (its own, or the default remote's);
        None for this gateway's own container and for an unknown one."""
        if container == self.container_id:
            return None
        forwarder = self.forwarders.get(container)
        if forwarder is None and self.settings.default_remote:
            forwarder = self.forwarders.get(self.settings.default_remote)
        return forwarder

    def publish(self, message: MessageContainer, now: float) -> None:
        """Write ``message`` (routing key: its global address) to its remote's outbox.
        Raises ``NotFound`` (no route to the container) or ``NotAllowed`` (a loop)."""
        address = message.routing_key
        last, parts, forwarder = self._last_route
        if last != address:
            parts = split_global(address)
            forwarder = None if parts is None else self.forwarder_for(parts[1])
        if forwarder is None:
            raise NotFound(f"unknown container '{address.rpartition('@')[2]}': no forwarding "
                           f"route to it (address '{address}')")
        node, container = parts  # type: ignore[misc]
        if container != forwarder.container:
            node = address  # through the hub: it resolves the whole address
        came_from = None
        received = message.received_annotations
        if received is not None:  # decoded when it was received
            came_from = fa.forwarded_in(received.annotations)
        elif message.origin is _AMQP10 and message.payload is not None:
            came_from = fa.forwarded_of(message.payload)
        if not message.gateway_id:
            message.gateway_id = self.broker.next_gateway_id()
        try:
            annotations = fa.forward_annotations(self.container_id, message.gateway_id, came_from)
        except fa.LoopError as exc:
            self.refused_loops += 1
            raise NotAllowed(str(exc)) from None
        entry = OutboxEntry(message.gateway_id, node, message, annotations)
        self._store.add_outbox(OutboxRow(entry.entry_id, forwarder.container, node,
                                         message_row(message), annotations, 0))
        forwarder.stage(entry)
        # written for every forwarded publish, paused or not: a publish path that does not
        # take it (management's) leaves nothing stale for the next one to meet
        flow = forwarder.flow
        self.broker.paused_flow = flow if flow.paused else None

    # -- start, time -----------------------------------------------------------------------
    def restore(self, now: float) -> int:
        """Refill the forwarders from the store's outbox and the dedupe window from its
        ids (before any listener opens); declare the dead-letter queues. Returns the
        number of outbox entries restored."""
        self.dedupe.restore(now)
        vhost = self.broker.vhost(self.dead_letter_vhost)
        for container in self.forwarders:
            vhost.declare_queue(dead_letter_queue(container), durable=True, now=now)
        count = 0
        for row in self._store.load_outbox():
            forwarder = self.forwarders.get(row.remote)
            if forwarder is None:
                log.warning("outbox: message %d for remote '%s', which is no longer "
                            "configured, goes to its dead-letter queue", row.entry_id, row.remote)
            message = self.broker.message_loader(StoredMessage(row.message, None))
            entry = OutboxEntry(row.entry_id, row.node, message, row.annotations or {},
                                row.attempts)
            if forwarder is None:
                self._dead_letter(row.remote, entry, REMOTE_NOT_CONFIGURED,
                                  f"remote '{row.remote}' is not configured", now)
                self._store.remove_outbox(row.entry_id)
                continue
            forwarder.add(entry)
            count += 1
        return count

    def tick(self, now: float) -> None:
        for forwarder in self.forwarders.values():
            forwarder.tick(now)
        self.dedupe.expire(now)

    def status(self) -> list[dict]:
        """Each remote's state, outbox and counts (for metrics, the log and management)."""
        return [f.status() for f in self.forwarders.values()]

    # -- dead letters ----------------------------------------------------------------------
    def redrive(self, container: str, now: float) -> tuple[int, int]:
        """Move the dead letters of remote ``container`` back to its outbox (the
        operator fixed the cause: the queue exists now, the template is right...).
        Each goes to the node it was for, with its forwarding identity (so the remote
        still dedupes it) and without the dead-letter annotations. Returns (moved,
        kept): a message that does not say its node stays in the dead-letter queue.
        Raises ``NotFound`` for a remote that is not configured."""
        forwarder = self.forwarders.get(container)
        if forwarder is None:
            raise NotFound(f"no remote '{container}' is configured")
        queue = self.broker.vhost(self.dead_letter_vhost).queue(dead_letter_queue(container))
        kept: list[MessageContainer] = []
        moved = 0
        while queue is not None:
            taken = queue.get(now, ack=False)
            if taken is None:
                break
            entry = self._redriven(taken.message, container)
            if entry is None:
                kept.append(taken.message)
                continue
            self._store.add_outbox(OutboxRow(entry.entry_id, container, entry.node,
                                             message_row(entry.message), entry.annotations, 0))
            forwarder.stage(entry)
            moved += 1
        for message in kept:
            queue.enqueue(message.copy(), now)  # type: ignore[union-attr]
        if moved or kept:
            log.info("forwarding to '%s': %d dead letter(s) re-driven to the outbox, %d kept "
                     "(no node)", container, moved, len(kept))
        return moved, len(kept)

    def _redriven(self, message: MessageContainer, container: str) -> Optional[OutboxEntry]:
        """The outbox entry of a dead-letter copy (None when it names no node)."""
        annotations = dict(message.annotations or {})
        clean = message.copy(annotations=None)
        if message.origin is Encoding.AMQP10 and message.payload is not None:
            try:
                section = fa.annotations_section(message.payload)
                annotations = {**(section[2] if section else {}), **annotations}
                if self._from_amqp10 is not None:
                    clean = self._from_amqp10(with_message_annotations(
                        message.payload, {}, drop=fa.DEAD_LETTER_KEYS), message.created_at)
            except TranslationError as exc:
                log.warning("dead letter %d cannot be re-driven: %s", message.gateway_id, exc)
                return None
        node = annotations.get(fa.NODE)
        if not isinstance(node, str) or not node:
            return None
        entry_id = self.broker.next_gateway_id()
        clean.gateway_id = entry_id
        # its global address again, as ``publish`` had it (``kind: gateway`` sends it as ``to``)
        clean.routing_key = node if "@" in node else f"{node}@{container}"
        forward = {str(k): annotations[k] for k in (fa.ORIGIN, fa.GATEWAY_ID, fa.HOPS)
                   if k in annotations}
        if len(forward) != 3:
            forward = fa.forward_annotations(self.container_id, entry_id, None)
        return OutboxEntry(entry_id, node, clean, forward)

    def _dead_letter(self, container: str, entry: OutboxEntry, reason: str, error: str,
                     now: float) -> None:
        queue = dead_letter_queue(container)
        vhost = self.broker.vhost(self.dead_letter_vhost)
        if vhost.queue(queue) is None:
            vhost.declare_queue(queue, durable=True, now=now)
        annotations = {**entry.annotations, fa.ERROR: error, fa.REMOTE: container,
                       fa.REASON: reason, fa.NODE: entry.node}
        copy = None
        if self._from_amqp10 is not None:
            try:  # the annotations inside the bytes: they survive a restart with the message
                encoded = amqp10_payload(OutboundMessage(entry.entry_id, entry.node, "",
                                                         entry.message, annotations),
                                         fill_to=False)
                copy = self._from_amqp10(encoded, entry.message.created_at)
            except TranslationError as exc:
                log.warning("dead letter of message %d kept as it is: %s", entry.entry_id, exc)
        if copy is None:
            copy = entry.message.with_annotations(annotations)
        copy.durable = True
        result = vhost.publish("", queue, copy, now)
        self._ledger.dead_lettered(container, entry, error, copy, vhost.name, result.queues, now)
        if self.on_dead_letter is not None:
            self.on_dead_letter({"remote": container, "node": entry.node, "reason": reason,
                                 "error": error, "queue": queue, "vhost": vhost.name,
                                 "gateway_id": entry.entry_id})
