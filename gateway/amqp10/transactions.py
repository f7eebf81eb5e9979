"""``ConnectionTransactions``: the open AMQP 1.0 transactions of one connection (spec part 4).

Theory of operation
-------------------
A client attaches a link to a coordinator (``coordinator.py``), which makes this object
the connection's ``transactions`` (``LinkHost.transactions``; None until then, so a
connection that never declares a transaction never looks at a transfer's state). Each
``declare`` opens a transaction: a txn-id and the broker's one transaction buffer
(``broker.transaction.TransactionWork``) of posts and retirements, in arrival order.

* Transactional posting: a transfer whose ``state`` is a ``transactional-state``
  (``TRANSACTIONAL_STATE``) naming an open txn-id is taken in by its link as any
  (decoded, checked, its address resolved: a refusal is the usual ``rejected`` outcome),
  but not routed: the route is posted. The transfer is settled at once with
  ``transactional-state{txn-id, accepted}`` (or ``rejected`` with the condition). Nobody
  sees the message before the commit routes it; a rollback drops it. Only local queues
  and exchanges take transactional posts; a service node or a forwarded address is
  refused with ``amqp:not-implemented``.
* Transactional retirement: a disposition of one of our deliveries whose state is a
  ``transactional-state`` carrying an outcome is retired: the delivery stays acquired and
  unsettled until the discharge. A commit applies the outcome (as a plain disposition
  would) and settles the delivery. A rollback discards the outcome (spec 4.4.2): the
  delivery is acquired and unsettled again, for the client to settle anew (proton's
  client releases them itself after an abort); one the client had already settled
  (``settle_before_discharge``) cannot be settled anew and is released to its queue.
* Discharge: ``fail = true`` rolls back; else, if every retired delivery is still held
  by its link, the transaction commits: posts routed, outcomes applied, in order. A
  retired delivery that went back to its queue meanwhile (its link detached) makes the
  commit impossible as a whole: the transaction is rolled back instead and the
  discharge refused with ``amqp:transaction:rollback`` naming it.
* Unknown txn-ids: a transfer naming one is rejected with
  ``amqp:transaction:unknown-id``; a disposition naming one detaches its link with it
  (there is no outcome for a disposition); a discharge naming one is rejected with it.
* Rollback without a discharge: every open transaction of the connection when it ends
  (close, or the socket lost), and those a coordinator link declared when it detaches.
"""
from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass
from typing import Any, NamedTuple, Optional

from proton import Condition, Delivery, Described, symbol, ulong

from gateway.amqp10.conditions import Amqp10Error, ErrorCondition
from gateway.broker.message import MessageContainer
from gateway.broker.transaction import TransactionWork, WorkKind
from translators.amqp10_sections import owned_value

__all__ = ["ConnectionTransactions", "DECLARED", "TRANSACTIONAL_STATE", "retire_transactional",
           "txn_label"]

log = logging.getLogger(__name__)

#: the descriptors of the two delivery states of spec 4.5.5 and 4.5.6, as proton's
#: delivery state numbers
DECLARED = 0x33
TRANSACTIONAL_STATE = 0x34
_ERROR = ulong(0x1D)
#: an outcome inside a transactional-state: its descriptor (code or symbol) -> proton's
#: delivery state number (accepted, rejected, released, modified)
_OUTCOMES: dict[Any, int] = {}
for _number, _name in ((Delivery.ACCEPTED, "accepted"), (Delivery.REJECTED, "rejected"),
                       (Delivery.RELEASED, "released"), (Delivery.MODIFIED, "modified")):
    _OUTCOMES[int(_number)] = _OUTCOMES[symbol(f"amqp:{_name}:list")] = int(_number)


class ModifiedFields(NamedTuple):
    """A ``modified`` outcome's fields, as ``OutgoingLink`` reads them from proton."""

    failed: bool
    undeliverable: bool
    annotations: Optional[dict]


@dataclass(slots=True)
class _Post:
    link: Any  # IncomingLink
    route: Any
    message: MessageContainer
    address: Optional[str]


@dataclass(slots=True)
class _Retirement:
    link: Any  # OutgoingLink
    delivery: Delivery  # the wrapper keeps proton's C delivery alive until the discharge
    state: int
    fields: Optional[ModifiedFields]


@dataclass(slots=True)
class _Open:
    work: TransactionWork[_Post, _Retirement]
    #: the coordinator link that declared it (its detach rolls it back)
    coordinator: Any


def txn_label(txn_id: Any) -> str:
    """A txn-id as a text names it (ours are ASCII)."""
    raw = bytes(txn_id) if isinstance(txn_id, (bytes, bytearray, memoryview)) else str(txn_id).encode()
    return raw.decode("ascii", "backslashreplace")


def _unknown(txn_id: Any) -> str:
    return f"unknown transaction id '{txn_label(txn_id)}' on this connection"


def _state_fields(delivery: Delivery) -> tuple[bytes, Any]:
    """The txn-id and the outcome (a ``Described``, or None) of the peer's
    ``transactional-state``; raises ``Amqp10Error(amqp:decode-error)`` if malformed."""
    data = delivery.remote.data
    if not data or not isinstance(data[0], (bytes, memoryview)):
        raise Amqp10Error(ErrorCondition.DECODE_ERROR, "a transactional-state without a txn-id")
    # copied: proton's binaries are views into the delivery's buffer
    return bytes(data[0]), owned_value(data[1]) if len(data) > 1 else None


class ConnectionTransactions:
    """See the module docstring. ``owner`` names the connection in logs."""

    __slots__ = ("_owner", "_open", "_ids", "_retired")

    def __init__(self, owner: str) -> None:
        self._owner = owner
        self._open: dict[bytes, _Open] = {}
        self._ids = itertools.count(1)
        #: C delivery -> txn-id of every retired delivery (a settle that follows its
        #: transactional disposition is not retired twice)
        self._retired: dict[Any, bytes] = {}

    def __len__(self) -> int:
        return len(self._open)

    # ------------------------------------------------------------------ coordinator
    def declare(self, coordinator: Any) -> bytes:
        """Open a transaction declared on ``coordinator``; its txn-id."""
        txn_id = b"txn:%d" % next(self._ids)
        self._open[txn_id] = _Open(TransactionWork(), coordinator)
        return txn_id

    def discharge(self, txn_id: bytes, fail: bool) -> None:
        """End ``txn_id``: roll back (``fail``), or commit. Raises ``Amqp10Error`` with
        ``amqp:transaction:unknown-id``, or ``amqp:transaction:rollback`` when a retired
        delivery is no longer held (the transaction is rolled back then)."""
        found = self._open.pop(txn_id, None)
        if found is None:
            raise Amqp10Error(ErrorCondition.TRANSACTION_UNKNOWN_ID, _unknown(txn_id))
        work = found.work
        if fail:
            self._roll_back(work)
            return
        lost = next((r for r in work.retirements() if not r.link.holds(r.delivery._impl)), None)
        if lost is not None:
            self._roll_back(work)
            raise Amqp10Error(
                ErrorCondition.TRANSACTION_ROLLBACK,
                f"transaction '{txn_label(txn_id)}' rolled back: delivery "
                f"'{txn_label(lost.delivery.tag)}' of link '{lost.link.tag}' is no longer held "
                f"(its link detached and it went back to its queue)")
        for kind, item in work.take():
            if kind is WorkKind.POST:
                item.link.route_posted(item.route, item.message, item.address)
            else:
                d = item.delivery._impl
                self._retired.pop(d, None)
                item.link.commit_retirement(d, item.state, item.fields)

    def roll_back_declared_by(self, coordinator: Any) -> None:
        """``coordinator`` detached: roll back the transactions it declared."""
        for txn_id, found in list(self._open.items()):
            if found.coordinator is coordinator:
                del self._open[txn_id]
                self._roll_back(found.work)

    def roll_back_all(self) -> None:
        """The connection ended: roll back every open transaction."""
        opened, self._open = self._open, {}
        for found in opened.values():
            self._roll_back(found.work)

    def _roll_back(self, work: TransactionWork[_Post, _Retirement]) -> None:
        for kind, item in work.take():
            if kind is WorkKind.RETIRE:
                d = item.delivery._impl
                self._retired.pop(d, None)
                item.link.roll_back_retirement(d)

    # ------------------------------------------------------------------ the links' hooks
    def post(self, link: Any, d: Any, encoded: bytes) -> None:
        """A transfer ``d`` (C delivery) on ``link`` (an ``IncomingLink``) with a
        transactional-state: hold it in its transaction, or reject it."""
        delivery = Delivery.wrap(d)
        try:
            txn_id, _ = _state_fields(delivery)
        except Amqp10Error as exc:
            _reject(delivery, exc)
        else:
            found = self._open.get(txn_id)
            if found is None:
                _reject(delivery, Amqp10Error(ErrorCondition.TRANSACTION_UNKNOWN_ID, _unknown(txn_id)))
            else:
                posted, outcome, condition = link.take_in_posted(d, encoded)
                for route, message, address in posted:
                    found.work.post(_Post(link, route, message, address))
                state: list[Any] = []
                if condition is not None:
                    state = [Described(_ERROR, [symbol(condition.name), condition.description, None])]
                delivery.local.data = [txn_id, Described(ulong(outcome), state)]
                delivery.update(TRANSACTIONAL_STATE)
                delivery.settle()
        link.refill()

    def retire(self, link: Any, delivery: Delivery) -> None:
        """A disposition of ``link``'s (an ``OutgoingLink``) delivery with a
        transactional-state: hold its outcome in the transaction. Raises ``Amqp10Error``
        (the link's): an unknown txn-id, a malformed state, or none outcome
        (transactional acquisition, not supported)."""
        d = delivery._impl
        txn_id, outcome = _state_fields(delivery)
        found = self._open.get(txn_id)
        if found is None:
            raise Amqp10Error(ErrorCondition.TRANSACTION_UNKNOWN_ID, _unknown(txn_id))
        if self._retired.get(d) == txn_id:
            return  # its settle, after the transactional disposition
        state = _OUTCOMES.get(getattr(outcome, "descriptor", None))
        if state is None:
            raise Amqp10Error(ErrorCondition.NOT_IMPLEMENTED,
                              f"a transactional-state without an outcome (transactional "
                              f"acquisition) is not supported (transaction '{txn_label(txn_id)}')")
        fields = None
        if state == Delivery.MODIFIED:
            values = list(outcome.value or []) + [None, None, None]
            fields = ModifiedFields(bool(values[0]), bool(values[1]), values[2])
        self._retired[d] = txn_id
        found.work.retire(_Retirement(link, delivery, state, fields))


def _reject(delivery: Delivery, error: Amqp10Error) -> None:
    delivery.local.condition = Condition(error.condition.value, error.description)
    delivery.update(Delivery.REJECTED)
    delivery.settle()


def retire_transactional(host: Any, link: Any, d: Any) -> None:
    """The hook of ``OutgoingLink.on_delivery`` for a disposition ``d`` (C delivery) with a
    transactional-state; raises ``Amqp10Error(amqp:transaction:unknown-id)`` on a
    connection that declared no transaction. A delivery the link no longer holds (settled
    at a commit, then settled by the client too) needs nothing."""
    if not link.holds(d):
        return  # a settle after its transaction was discharged: nothing left to do
    delivery = Delivery.wrap(d)
    transactions = host.transactions
    if transactions is None:
        txn_id, _ = _state_fields(delivery)
        raise Amqp10Error(ErrorCondition.TRANSACTION_UNKNOWN_ID, _unknown(txn_id))
    transactions.retire(link, delivery)
