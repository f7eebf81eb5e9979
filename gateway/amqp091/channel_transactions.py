"""The transaction methods of a 0-9-1 channel (tx.select, tx.commit, tx.rollback), as a
mixin of ``BrokerChannel``: a commit routes the buffered publishes and settles the
buffered acks, and is answered once the store synced what it wrote."""
from __future__ import annotations

from gateway.amqp091 import methods as m
from gateway.amqp091.content import Content
from gateway.amqp091.errors import ChannelException
from gateway.amqp091.spec import ReplyCode
from gateway.amqp091.transactions import PendingPublish, PublishMode, TxBuffer
from gateway.broker.store_marks import StoreMark


class ChannelTransactions:
    """Transaction methods of ``BrokerChannel``; they use its ``mode``, ``tx``,
    ``unacked``, ``writer``, ``_store``, ``_route`` and ``_settle``."""

    def _tx_select(self, method: m.Method, _: Content | None) -> None:
        if self.mode is PublishMode.CONFIRM:
            raise ChannelException(ReplyCode.PRECONDITION_FAILED, "cannot switch from confirm to tx mode",
                                   method.CLASS_ID, method.METHOD_ID)
        self.mode = PublishMode.TX
        if self.tx is None:
            self.tx = TxBuffer()
        self.writer.send_method(m.TxSelectOk())

    def _transaction(self, method: m.Method) -> TxBuffer:
        if self.tx is None:
            raise ChannelException(ReplyCode.PRECONDITION_FAILED, "channel is not transactional",
                                   method.CLASS_ID, method.METHOD_ID)
        return self.tx

    def _tx_commit(self, method: m.Method, _: Content | None) -> None:
        mark = StoreMark(self._store)
        for work in self._transaction(method).take():
            if isinstance(work, PendingPublish):
                self._route(work.method, work.content, work.message)
            else:
                self._settle(work.kind, work.items)
        mark.answer(self._tx_durable)

    def _tx_durable(self, error: Exception | None) -> None:
        """The store committed (or failed) what a tx.commit wrote: answer it."""
        if not self.is_open:
            return
        if error is None:
            self.writer.send_method(m.TxCommitOk())
        else:
            self.context.close_connection(
                ReplyCode.INTERNAL_ERROR, f"tx.commit failed, its messages may not be stored: {error}")

    def _tx_rollback(self, method: m.Method, _: Content | None) -> None:
        tx = self._transaction(method)
        self.unacked.restore(tx.settled_items())
        tx.take()
        self.writer.send_method(m.TxRollbackOk())
