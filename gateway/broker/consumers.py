"""Consumers of a queue: the ``Consumer`` protocol and round-robin selection.

A consumer is whatever a protocol puts behind a 0-9-1 ``basic.consume`` or a 1.0
outgoing link. The queue hands it messages synchronously through :meth:`Consumer.deliver`
and counts each one against its :class:`~gateway.broker.flow.CreditWindow`.

Round robin: acquiring consumers sit in a ring; each delivery goes to the first consumer
in ring order that has credit (and is not excluded by a 1.0 ``undeliverable-here``), and
that consumer moves to the back. While the front consumers have credit this is O(1) per
message; a full turn without credit ends the dispatch, so the cost is O(consumers) per
dispatch call, not per message.

A message excluded from every consumer with credit (1.0 ``undeliverable-here``) stays at
the head and ends the dispatch until another consumer (or ``get``) can take it.

Consumers are used as dict keys and set members: they must hash by identity (do not make
them ``eq=True`` dataclasses).

Browsers (``acquires`` False, 1.0 distribution-mode ``copy``) are kept apart, each with a
cursor: the ``seq`` of the last message it was shown. So are filtered consumers (a
``message_filter`` that is not None: a 1.0 link with a selector), acquiring or not: each
scans forward from its own cursor and skips what its filter refuses, leaving it for the
others (Qpid Broker-J's per-consumer queue context), so the ring's round robin, and every
unfiltered consumer, never pay for a filter. A filtered consumer tests each message once,
until a release puts one back behind its cursor (:meth:`ConsumerSet.rewind`).
"""
from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Iterator, Optional, Protocol

from .errors import ResourceLocked
from .flow import CreditWindow

if TYPE_CHECKING:
    from .queued_message import QueuedMessage

__all__ = ["Consumer", "ConsumerSet"]


class Consumer(Protocol):
    """What the queue needs from a consumer (0-9-1 consumer or 1.0 outgoing link).

    - ``tag``: the consumer tag / link name (for logs and error texts).
    - ``exclusive``: an exclusive consumer must be the queue's only consumer.
    - ``acquires``: False for a browser (1.0 ``copy``): messages stay available.
    - ``credit``: the window the queue consumes from on every delivery.
    """

    tag: str
    exclusive: bool
    acquires: bool
    credit: CreditWindow

    def deliver(self, entry: "QueuedMessage", now: float) -> None:
        """Take ``entry`` (already acquired unless browsing) at time ``now``, the
        dispatch's. Called synchronously from the queue's dispatch; must not call
        ``queue.dispatch`` synchronously (settling, e.g. for no-ack consumers, is
        allowed). ``now`` is the dispatching caller's time: a delivery caused by another
        connection's publish happens at that publish's time, not at the consumer's
        connection's last input."""

    def cancelled_by_broker(self, reason: str) -> None:
        """The queue went away (deleted, expired, owner gone): 0-9-1 sends
        ``basic.cancel``, 1.0 detaches the link."""


class ConsumerSet:
    """The consumers of one queue; enforces consumer exclusivity."""

    __slots__ = ("_ring", "browsers", "_exclusive", "_label", "acquiring")

    def __init__(self, label: str) -> None:
        self._ring: deque[Consumer] = deque()
        #: the number of acquiring consumers (a plain int: read on every dispatch)
        self.acquiring = 0
        #: browser -> seq of the last message it was shown
        self.browsers: dict[Consumer, int] = {}
        self._exclusive: Optional[Consumer] = None
        self._label = label

    def __len__(self) -> int:
        return len(self._ring) + len(self.browsers)

    def __iter__(self) -> Iterator[Consumer]:
        yield from list(self._ring)
        yield from list(self.browsers)

    def __contains__(self, consumer: object) -> bool:
        return consumer in self.browsers or consumer in self._ring

    def add(self, consumer: Consumer) -> None:
        """Add ``consumer``; raises :class:`ResourceLocked` if it asks for exclusivity
        while others exist, or if an exclusive consumer is already there."""
        if self._exclusive is not None or (consumer.exclusive and len(self)):
            raise ResourceLocked(f"{self._label} in exclusive use")
        if consumer.exclusive:
            self._exclusive = consumer
        if consumer.acquires and getattr(consumer, "message_filter", None) is None:
            self._ring.append(consumer)
            self.acquiring = len(self._ring)
        else:
            self.browsers[consumer] = 0

    def remove(self, consumer: Consumer) -> bool:
        """Remove ``consumer``; False if it was not there."""
        if self._exclusive is consumer:
            self._exclusive = None
        if consumer in self.browsers:
            del self.browsers[consumer]
            return True
        try:
            self._ring.remove(consumer)
        except ValueError:
            return False
        self.acquiring = len(self._ring)
        return True

    def rewind(self, seq: int) -> None:
        """An entry with ``seq`` is available again: acquiring filtered consumers whose
        cursor passed it look again from there (a browser saw it already)."""
        for consumer, cursor in self.browsers.items():
            if cursor >= seq and consumer.acquires:
                self.browsers[consumer] = seq - 1

    def pick(self, excluded: Optional[set] = None) -> Optional[Consumer]:
        """The next acquiring consumer in ring order that has credit and is not in
        ``excluded``; it is moved to the back. ``None`` after one full turn."""
        ring = self._ring
        turns = len(ring)
        for _ in range(turns):
            consumer = ring[0]
            if turns > 1:  # the usual queue has one consumer: nothing to rotate
                ring.rotate(-1)
            if consumer.credit.has_credit() and (excluded is None or consumer not in excluded):
                return consumer
        return None

    def clear(self) -> list[Consumer]:
        """Remove and return every consumer."""
        out = list(self)
        self._ring.clear()
        self.acquiring = 0
        self.browsers.clear()
        self._exclusive = None
        return out
