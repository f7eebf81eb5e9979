"""The settling methods of a 0-9-1 channel (basic.ack, nack, reject and recover), as a
mixin of ``BrokerChannel``: each settles through the broker's one outcome operation and
records the outcome in the ledger; in a transaction they are buffered until commit."""
from __future__ import annotations

from gateway.amqp091 import methods as m
from gateway.amqp091.consumer import Unacked, UnknownDeliveryTag
from gateway.amqp091.content import Content
from gateway.amqp091.errors import ChannelException, ConnectionException
from gateway.amqp091.spec import ReplyCode
from gateway.amqp091.transactions import OUTCOME_OF, PendingSettle, SettleKind
from gateway.broker.outcomes import apply_outcome
from gateway.broker.queues import Queue
from gateway.ledger import Outcome as LedgerOutcome

# members the per-message paths compare with (a read through the enum class is a lookup)
_ACK, _REQUEUE, _REJECT = SettleKind.ACK, SettleKind.REQUEUE, SettleKind.REJECT
# the ledger's settlement outcomes
_ACCEPTED, _RELEASED, _REJECTED = (LedgerOutcome.ACCEPTED.value, LedgerOutcome.RELEASED.value,
                                   LedgerOutcome.REJECTED.value)


class ChannelSettlement:
    """Settling methods of ``BrokerChannel``; they use its ``unacked``, ``tx``,
    ``global_window``, ``broker``, ``writer``, ``_ledger_ctx`` and ``_dispatch_all``."""

    def _take(self, tag: int, multiple: bool, method: m.Method) -> list[Unacked]:
        try:
            return self.unacked.take(tag, multiple)
        except UnknownDeliveryTag:
            raise ChannelException(ReplyCode.PRECONDITION_FAILED, f"unknown delivery tag {tag}",
                                   method.CLASS_ID, method.METHOD_ID) from None

    def _settle_or_buffer(self, kind: SettleKind, items: list[Unacked]) -> None:
        if self.tx is not None:
            self.tx.add(PendingSettle(kind, items))
        else:
            self._settle(kind, items)

    def _basic_ack(self, method: m.Method, _: Content | None) -> None:
        self._settle_or_buffer(_ACK, self._take(method.delivery_tag, method.multiple, method))

    def _basic_nack(self, method: m.Method, _: Content | None) -> None:
        kind = _REQUEUE if method.requeue else _REJECT
        self._settle_or_buffer(kind, self._take(method.delivery_tag, method.multiple, method))

    def _basic_reject(self, method: m.Method, _: Content | None) -> None:
        kind = _REQUEUE if method.requeue else _REJECT
        self._settle_or_buffer(kind, self._take(method.delivery_tag, False, method))

    def _settle(self, kind: SettleKind, items: list[Unacked]) -> None:
        """Give credit back first (a release dispatches at once), then settle in tag order,
        then let the touched queues dispatch to the freed windows."""
        now = self.connection.now
        for item in items:
            if item.window is not None:
                item.window.settle_one()
        queues: dict[Queue, None] = {}
        ledger = self.broker.ledger
        # ack: accepted; nack/reject with requeue: released; without: rejected
        outcome = (_ACCEPTED if kind is _ACK else _RELEASED if kind is _REQUEUE else _REJECTED)
        settled_as = OUTCOME_OF[kind]
        for item in items:
            entry = item.entry
            queue = entry.queue
            if queue is None:
                continue
            if ledger is not None:  # before the queue acts on it (a requeue redelivers)
                ledger.settled(now, self._ledger_ctx, entry, queue.name, outcome)
            apply_outcome(queue, entry, settled_as, now)
            queues[queue] = None
        if self.global_window.limit:
            self._dispatch_all()
        for queue in queues:
            if not queue.deleted and queue.consumers:
                queue.dispatch(now)

    def _recover(self, method: m.Method, sync: bool) -> None:
        if not method.requeue:
            raise ConnectionException(ReplyCode.NOT_IMPLEMENTED, "requeue=false", method.CLASS_ID,
                                      method.METHOD_ID)
        if sync:
            self.writer.send_method(m.BasicRecoverOk())
        self._settle(SettleKind.REQUEUE, self.unacked.take_all())

    def _basic_recover(self, method: m.Method, _: Content | None) -> None:
        self._recover(method, True)

    def _basic_recover_async(self, method: m.Method, _: Content | None) -> None:
        self._recover(method, False)
