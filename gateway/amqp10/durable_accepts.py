"""Accepted outcomes that wait for the durable store: a 1.0 client's unsettled transfer of
a message the store wrote (``durable`` header, a durable queue) is settled ``accepted``
only once the store has committed and synced it, as RabbitMQ promises.

The link hands such deliveries to :class:`DurableAccepts` instead of settling them.
Deliveries written in the same store batch (generation) share one ``after_commit``
callback; when it runs, each gets ``accepted`` and is settled, or, if the batch failed to
reach the disk, ``rejected`` with ``amqp:resource-limit-exceeded`` (no space) or
``amqp:internal-error`` (any other write error) and a description naming the problem, so
no client believes a message is stored that is not. (``released`` would invite a resend
but carries no condition to say why.) Once the link is gone nothing is touched: its
deliveries may have been freed with it.

``count`` (deliveries held) comes off the link's credit window, as a 0-9-1 publisher's
confirm window bounds what waits for the disk: a sender can never have more than the
window in flight and unanswered, so the store's backlog, and the time an accepted
outcome takes, stay bounded however fast the client sends. Once a batch is answered
``answered()`` (the link's refill) gives the credit back.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Optional

from proton import Condition, Delivery

from gateway import timeline
from gateway.amqp10.conditions import ErrorCondition
from gateway.amqp10.proton_calls import pn_delivery_settle, pn_delivery_update

__all__ = ["DurableAccepts"]

log = logging.getLogger(__name__)

_ACCEPTED = Delivery.ACCEPTED


def _nothing() -> None:
    pass


class DurableAccepts:
    """Held deliveries of one incoming link. ``output_ready`` asks the edge to flush."""

    __slots__ = ("_store", "_output_ready", "_answered", "_batch", "_batch_gen", "closed", "count")

    def __init__(self, store: Any, output_ready: Callable[[], None],
                 answered: Callable[[], Any] = lambda: None) -> None:
        self._store = store
        self._output_ready = output_ready
        self._answered = answered
        self._batch: Optional[list] = None
        self._batch_gen = -1
        self.closed = False
        #: deliveries held, not yet answered
        self.count = 0

    def hold(self, d: Any) -> None:
        """Settle proton delivery ``d`` (a ``pn_delivery_t``) once the store's latest
        write is on disk."""
        gen = self._store.latest_generation
        batch = self._batch
        if batch is None or gen != self._batch_gen:
            batch = self._batch = []
            self._batch_gen = gen
            self._store.after_commit(lambda error: self._answer(batch, error))
        batch.append(d)
        self.count += 1

    def close(self) -> None:
        """The link is gone: answer nothing more, and drop the callbacks (the link's own
        methods: a cycle that would keep a closed connection for a full collection)."""
        self.closed = True
        self._output_ready = self._answered = _nothing

    def _answer(self, batch: list, error: Optional[Exception]) -> None:
        if self._batch is batch:
            self._batch = None
        self.count -= len(batch)
        if self.closed:
            return
        if error is None:
            for d in batch:
                pn_delivery_update(d, _ACCEPTED)
                pn_delivery_settle(d)
            marks = timeline.recorder
            if marks is not None:
                marks.mark("accepted", len(batch))
        else:
            full = getattr(error, "full", False)
            cond = ErrorCondition.RESOURCE_LIMIT_EXCEEDED if full else ErrorCondition.INTERNAL_ERROR
            text = f"message not stored: {error}"
            log.warning("rejecting %d durable transfer(s): %s", len(batch), error)
            for d in batch:
                delivery = Delivery.wrap(d)
                delivery.local.condition = Condition(cond.value, text)
                delivery.update(Delivery.REJECTED)
                pn_delivery_settle(d)
        self._answered()
        self._output_ready()
