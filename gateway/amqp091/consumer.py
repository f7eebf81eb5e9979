"""0-9-1 consumers and the per-channel record of unacknowledged deliveries.

:class:`ChannelConsumer` is what ``basic.consume`` attaches to a broker queue (it follows
``gateway.broker.consumers.Consumer``); the queue calls :meth:`ChannelConsumer.deliver`
synchronously and the channel writes basic.deliver.

:class:`UnackedDeliveries` maps delivery tags (per channel, from 1, increasing) to the
queue entries they stand for. Tags are inserted in increasing order into an
``OrderedDict``, so ``multiple`` acknowledgements pop from the front in O(acked) and single
ones are O(1).
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Optional

from gateway.broker.flow import CreditWindow
from gateway.broker.queues import Queue, QueuedMessage


__all__ = ["ChannelConsumer", "Unacked", "UnackedDeliveries", "UnknownDeliveryTag"]


class ChannelConsumer:
    """One basic.consume. ``credit`` is a prefetch window whose parent is the channel's
    global window (basic.qos global=true); ``no_ack`` deliveries are settled at once."""

    __slots__ = ("tag", "exclusive", "acquires", "credit", "no_ack", "queue", "channel")

    def __init__(self, channel: Any, tag: str, queue: Queue, *, no_ack: bool,
                 exclusive: bool, credit: CreditWindow) -> None:
        self.channel = channel
        self.tag = tag
        self.queue = queue
        self.no_ack = no_ack
        self.exclusive = exclusive
        self.acquires = True
        self.credit = credit

    def deliver(self, entry: QueuedMessage, now: float) -> None:
        self.channel.deliver(self, entry, now)

    def cancelled_by_broker(self, reason: str) -> None:
        self.channel.consumer_cancelled(self, reason)

    def __repr__(self) -> str:
        return f"ChannelConsumer({self.tag!r} on {self.queue.name!r})"


@dataclass(slots=True)
class Unacked:
    """One unacknowledged delivery: the queue entry and the window to give credit back
    to (``None`` for basic.get)."""

    tag: int
    entry: QueuedMessage
    window: Optional[CreditWindow]


class UnknownDeliveryTag(LookupError):
    """An ack/nack/reject named a tag that is not outstanding (the channel answers 406)."""

    def __init__(self, tag: int) -> None:
        super().__init__(tag)
        self.tag = tag


class UnackedDeliveries:
    """Outstanding deliveries of one channel, by delivery tag."""

    __slots__ = ("_items", "_last_tag")

    def __init__(self) -> None:
        self._items: OrderedDict[int, Unacked] = OrderedDict()
        self._last_tag = 0

    def __len__(self) -> int:
        return len(self._items)

    def next_tag(self) -> int:
        """A new delivery tag (1, 2, ...)."""
        self._last_tag += 1
        return self._last_tag

    def add(self, item: Unacked) -> None:
        self._items[item.tag] = item

    def track(self, entry: QueuedMessage, window: Optional[CreditWindow]) -> int:
        """A new delivery tag, outstanding for ``entry`` until acked (``window``: the
        consumer's, ``None`` for basic.get): :meth:`next_tag` and :meth:`add` in one call
        (one per delivery)."""
        self._last_tag = tag = self._last_tag + 1
        self._items[tag] = Unacked(tag, entry, window)
        return tag

    def take(self, tag: int, multiple: bool) -> list[Unacked]:
        """Remove and return the deliveries an ack/nack/reject names.

        ``multiple`` with tag 0 means every outstanding delivery; otherwise ``tag`` must be
        outstanding (RabbitMQ), and ``multiple`` also takes every lower tag. Raises
        :class:`UnknownDeliveryTag` and then removes nothing.
        """
        items = self._items
        if multiple and tag == 0:
            return self.take_all()
        if tag not in items:
            raise UnknownDeliveryTag(tag)
        if not multiple:
            return [items.pop(tag)]
        out: list[Unacked] = []
        while True:
            _, item = items.popitem(last=False)
            out.append(item)
            if item.tag == tag:
                return out

    def take_all(self) -> list[Unacked]:
        out = list(self._items.values())
        self._items.clear()
        return out

    def restore(self, items: list[Unacked]) -> None:
        """Put back deliveries taken by a transactional ack that was rolled back."""
        for item in items:
            self._items[item.tag] = item
        self._items = OrderedDict(sorted(self._items.items()))
