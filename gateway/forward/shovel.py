"""Static routes (``forwarding.shovels``): a local queue drained to a node of a remote.

For legacy 0-9-1 applications that publish to an ordinary exchange: whatever lands in
the local queue ``queue`` goes to node ``node`` of container ``remote``. A ``Shovel`` is a
consumer of that queue (the broker's ``Consumer`` protocol) that hands each message to
``amqp$transfer`` as if it had been published to ``node@remote``, so it goes through the
remote's outbox and follows the same settlement rules (accepted removes it, released
retries it, rejected dead-letters it; annotations, hop trace and dedupe as for any
forwarded message).

The local entry is acknowledged only once the outbox has the message: after the store
committed the outbox row (``store.after_commit``); a failed commit puts the entry back
in the queue (a duplicate is possible, a loss is not). A crash between the two commits
also leaves the message in both, so a shovel gives at-least-once, like RabbitMQ's
``ack-mode: on-confirm``.

Backpressure: the outbox is in memory as well as on disk, so the shovel does not pour a
long queue into it. Its window is link credit (``CreditWindow.link_credit``) set by
``tick`` to what the remote's outbox lacks to hold ``backlog`` messages; the queue keeps
the rest, paged as usual. The edge calls ``tick`` often (a fraction of a second); the
shovel also ticks itself when its acknowledgements come back.

Identity: a shovelled copy's gateway id (its outbox entry id and the forwarded
``x-opt-forward-id``) is derived from the queue entry's stored identity (vhost, queue and
the message's gateway id, under which the store keeps it), not drawn from the counter.
After a crash between the two commits the queue gives the entry again and the copy
gets the same id: the forwarder already holding it, the entry is only acknowledged; the
remote having had it, its dedupe window drops the second copy. (A new id each time let
that duplicate through.) Derived ids have bit 62 set: the counter's ids (boot
microseconds x 1000) stay below it.

A message the transfer service refuses (a forwarding loop, the remote gone from the
config) is rejected in the local queue: dead-lettered if the queue has a dead-letter
exchange, else dropped, with a warning naming the shovel and the reason.
"""
from __future__ import annotations

import hashlib
import logging
from functools import partial
from typing import Any, Optional

from gateway.broker.errors import BrokerError
from gateway.broker.flow import CreditWindow
from gateway.forward.settings import ShovelSettings

__all__ = ["Shovel", "DEFAULT_BACKLOG", "shovelled_id"]

log = logging.getLogger(__name__)

#: messages a shovel keeps in its remote's outbox at most (at least twice the credit)
DEFAULT_BACKLOG = 1000


_DERIVED = 1 << 62


def shovelled_id(vhost: str, queue: str, gateway_id: int) -> int:
    """The gateway id of the copy a shovel makes of message ``gateway_id`` in ``queue``
    of ``vhost``: the same on every delivery of that queue entry, across restarts."""
    digest = hashlib.blake2b(f"{vhost}\0{queue}\0{gateway_id}".encode(), digest_size=8).digest()
    return _DERIVED | (int.from_bytes(digest, "big") & (_DERIVED - 1))


class Shovel:
    """See the module docstring. ``transfer``: the ``TransferService``; ``vhost``: the
    virtual host of the local queue (declared durable if missing); ``store``: the
    broker's store."""

    exclusive = False
    acquires = True

    def __init__(self, settings: ShovelSettings, transfer: Any, vhost: Any, store: Any,
                 backlog: int = DEFAULT_BACKLOG) -> None:
        self.settings = settings
        self.tag = f"shovel {settings.name}"
        self.credit = CreditWindow.link_credit(0)
        self.address = f"{settings.node}@{settings.remote}"
        self._transfer = transfer
        self._vhost = vhost
        self._store = store
        forwarder = transfer.forwarders[settings.remote]
        self._forwarder = forwarder
        self.backlog = max(backlog, 2 * forwarder.settings.credit)
        self.queue: Any = None
        self.moved = 0
        self.refused = 0
        self._waiting = 0                 # delivered, waiting for the outbox commit
        self._delivering = False
        self._now = 0.0

    def describe(self) -> dict:
        """What management shows of this static route."""
        queue = self.queue
        return {"name": self.settings.name, "queue": self.settings.queue,
                "vhost": getattr(self._vhost, "name", None), "remote": self.settings.remote,
                "node": self.settings.node, "state": "running" if queue is not None else "stopped",
                "messages": 0 if queue is None else queue.message_count,
                "moved": self.moved, "refused": self.refused, "waiting": self._waiting}

    def start(self, now: float) -> None:
        """Attach to the local queue (declared durable if missing) and start draining."""
        queue = self._vhost.queue(self.settings.queue)
        if queue is None:
            queue = self._vhost.declare_queue(self.settings.queue, durable=True, now=now)
        self.queue = queue
        self._grant()
        queue.add_consumer(self, now)
        log.info("shovel '%s': draining queue '%s' to %s", self.settings.name, self.settings.queue,
                 self.address)

    def stop(self, now: float) -> None:
        if self.queue is not None:
            self.queue.remove_consumer(self, now)
            self.queue = None

    def tick(self, now: float) -> None:
        """Top the window up to what the outbox lacks of ``backlog``, and drain."""
        self._now = now
        if self.queue is not None and self._grant():
            self.queue.dispatch(now)

    def _grant(self) -> bool:
        room = max(0, self.backlog - self._forwarder.depth - self._waiting)
        if room == self.credit.credit:
            return False
        self.credit.grant(room)
        return room > 0

    # ---- the broker's Consumer ----------------------------------------------------------

    def deliver(self, entry: Any, now: float) -> None:
        self._now = now
        # a copy addressed to node@remote, with an id of its own (the same message may sit
        # in several queues, a fanout) that is the same on each delivery of this entry
        gid = shovelled_id(self._vhost.name, self.settings.queue, entry.message.gateway_id)
        try:
            if not (entry.redelivered and self._forwarder.holds(gid)):  # else: in the outbox
                self._transfer.publish(entry.message.copy(exchange="", routing_key=self.address,
                                                          gateway_id=gid), now)
                # not a publisher to pause: its credit follows the outbox already (``room``)
                self._transfer.broker.take_paused_flow()
        except BrokerError as exc:
            self.refused += 1
            log.warning("shovel '%s': message refused for %s, rejected in queue '%s': %s",
                        self.settings.name, self.address, self.settings.queue, exc)
            self.queue.reject(entry, requeue=False, now=now)
            return
        self.moved += 1
        self._waiting += 1
        # one callback per message: "every write made so far" is this message's outbox row
        self._delivering = True
        try:
            self._store.after_commit(partial(self._committed, self.queue, entry))
        finally:
            self._delivering = False

    def cancelled_by_broker(self, reason: str) -> None:
        log.warning("shovel '%s': queue '%s' went away (%s); it is declared again on the next "
                    "tick", self.settings.name, self.settings.queue, reason)
        self.queue = None

    # ---- acknowledgements -----------------------------------------------------------------

    def _committed(self, queue: Any, entry: Any, error: Optional[Exception]) -> None:
        """Settle ``entry`` in the queue it came from (also after ``stop``: its outbox row
        is committed either way)."""
        self._waiting -= 1
        if error is not None:  # a failing store answers later, never inside ``deliver``
            log.warning("shovel '%s': the outbox write failed (%s); the message goes back to "
                        "queue '%s'", self.settings.name, error, self.settings.queue)
            queue.release(entry, now=self._now)
            return
        queue.settle(entry)
        if self.queue is not None and not self._delivering and not self._waiting:
            self.tick(self._now)   # not from inside the queue's dispatch (a store without disk)

    def ensure_attached(self, now: float) -> None:
        """Attach again after the queue was deleted (called with ``tick`` by the edge)."""
        if self.queue is None:
            self.start(now)
