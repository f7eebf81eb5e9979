"""The coordinator target (AMQP 1.0 part 4): a client's link to it declares and discharges
transactions; what they hold is ``transactions.ConnectionTransactions``.

A client attaches a sender whose target is a ``coordinator`` (proton:
``Terminus.COORDINATOR``); we answer with a coordinator offering
``amqp:local-transactions``, ``amqp:multi-txns-per-ssn`` (a connection may have many
transactions open at once) and ``amqp:multi-ssns-per-txn`` (a txn-id is the
connection's: links of any of its sessions may use it), and give the link credit. A
client whose coordinator asks for ``amqp:distributed-transactions`` or
``amqp:promotable-transactions`` is refused with ``amqp:not-implemented`` naming them;
capabilities this spec does not define are ignored. Each transfer on it is a control
message whose amqp-value is a described list:

* ``declare`` (0x31, ``amqp:declare:list``): a new transaction; settled with the
  ``declared`` state (0x33) carrying its txn-id. A ``global-id`` asks for a distributed
  transaction: rejected with ``amqp:not-implemented``.
* ``discharge`` (0x32, ``amqp:discharge:list``): ``[txn-id, fail]``; accepted once
  rolled back or committed (a commit's store writes go to one store commit,
  ``Store.one_commit``, so a crash leaves all or none of them, and the discharge is
  answered once the store synced them, as 0-9-1's tx.commit-ok is); rejected with the
  ``amqp:transaction:*`` condition when it cannot be (``transactions``).

Anything else on the link is rejected with ``amqp:decode-error`` naming what came. The
link's detach rolls back the transactions it declared (the connection's end rolls back
all: ``Amqp10Engine.teardown``).

Transactional acquisition (a ``txn-id`` in a receiving link's attach properties) is not
supported: :func:`refuse_transactional_acquisition` refuses the attach with
``amqp:not-implemented`` naming it.
"""
from __future__ import annotations

import logging
from typing import Any, Optional

from proton import Condition, Delivery, Described, Link, Message, Terminus, symbol, ulong

from gateway.amqp10.conditions import Amqp10Error, ErrorCondition
from gateway.amqp10.link_credit import grant, over_credit
from gateway.amqp10.link_host import LinkHost
from gateway.amqp10.unroutable_outcome import capability_symbols, echo_capabilities
from gateway.amqp10.transactions import DECLARED, ConnectionTransactions, txn_label
from gateway.broker.store_marks import StoreMark, not_saved_text, store_full
from translators.amqp10_sections import owned_value

__all__ = ["CoordinatorLink", "attach_coordinator", "is_coordinator",
           "refuse_transactional_acquisition", "refuse_unsupported_capabilities",
           "LOCAL_TRANSACTIONS", "REFUSED_CAPABILITIES", "SUPPORTED_CAPABILITIES"]

log = logging.getLogger(__name__)

LOCAL_TRANSACTIONS = symbol("amqp:local-transactions")
#: the txn-capabilities of spec 4.5.8 we offer (a coordinator's attach reply lists them)
SUPPORTED_CAPABILITIES = (LOCAL_TRANSACTIONS, "amqp:multi-txns-per-ssn", "amqp:multi-ssns-per-txn")
#: those we refuse, and why
REFUSED_CAPABILITIES = {
    "amqp:distributed-transactions": "distributed transactions",
    "amqp:promotable-transactions": "promotable transactions",
}
#: control messages a coordinator takes: descriptor (code or symbol) -> its name
_CONTROLS = {ulong(0x31): "declare", symbol("amqp:declare:list"): "declare",
             ulong(0x32): "discharge", symbol("amqp:discharge:list"): "discharge"}
#: credit kept open on a coordinator link (control messages are answered at once)
COORDINATOR_CREDIT = 100
_TXN_ID = symbol("txn-id")


def is_coordinator(link: Link) -> bool:
    """Whether the client's attach is a sender to a coordinator."""
    return link.is_receiver and link.remote_target.type == Terminus.COORDINATOR


def refuse_unsupported_capabilities(link: Link) -> None:
    """Raise ``Amqp10Error(amqp:not-implemented)`` when the client's coordinator asks
    for a transaction capability we do not offer, naming each."""
    refused = [s for s in capability_symbols(link.remote_target.capabilities)
               if s in REFUSED_CAPABILITIES]
    if refused:
        named = ", ".join(f"{s} ({REFUSED_CAPABILITIES[s]})" for s in refused)
        raise Amqp10Error(ErrorCondition.NOT_IMPLEMENTED,
                          f"coordinator capabilities not supported: {named}; this coordinator "
                          f"offers {', '.join(SUPPORTED_CAPABILITIES)}")


def refuse_transactional_acquisition(link: Link) -> None:
    """Raise ``Amqp10Error(amqp:not-implemented)`` for an attach whose properties carry
    a ``txn-id`` (transactional acquisition, spec 4.4.3)."""
    properties = link.remote_properties
    if isinstance(properties, dict) and _TXN_ID in properties:
        raise Amqp10Error(ErrorCondition.NOT_IMPLEMENTED,
                          "transactional acquisition (a txn-id in the link's attach properties) "
                          "is not supported; post and retire in transactions instead")


class CoordinatorLink:
    """The client's link to the coordinator; see the module docstring."""

    def __init__(self, host: LinkHost, link: Link, transactions: ConnectionTransactions) -> None:
        self.host = host
        self.link = link
        self.transactions = transactions
        self.closed = False

    @property
    def starving(self) -> bool:
        return False

    def refill(self) -> bool:
        if self.closed or self.link.credit >= COORDINATOR_CREDIT // 2:
            return False
        grant(self.link, COORDINATOR_CREDIT)
        return True

    def on_delivery(self, d: Any) -> None:
        """A control message (``d``: proton's C delivery), once complete."""
        delivery = Delivery.wrap(d)
        if delivery.partial or self.closed:
            return
        link = self.link
        encoded = link.recv(delivery.pending) or b""
        link.advance()
        if link.credit < 0:
            raise over_credit(link)
        try:
            kind, value = _control(encoded)
            if kind == "declare":
                self._declare(delivery, value)
            else:
                self._discharge(delivery, value)
        except Amqp10Error as exc:
            log.info("1.0 coordinator on %s refused a control message: %s", self.host.connection_id, exc)
            _settle(delivery, Delivery.REJECTED, condition=Condition(exc.condition.value, exc.description))
        self.refill()

    def _declare(self, delivery: Delivery, value: list) -> None:
        if value and value[0] is not None:
            raise Amqp10Error(ErrorCondition.NOT_IMPLEMENTED,
                              "distributed transactions (a declare with a global-id) are not supported")
        txn_id = self.transactions.declare(self)
        log.debug("1.0 transaction %s declared on %s", txn_label(txn_id), self.host.connection_id)
        _settle(delivery, DECLARED, data=[txn_id])

    def _discharge(self, delivery: Delivery, value: list) -> None:
        if not value or not isinstance(value[0], (bytes, memoryview)):
            raise Amqp10Error(ErrorCondition.DECODE_ERROR, "a discharge without a txn-id")
        txn_id, fail = bytes(value[0]), bool(value[1]) if len(value) > 1 else False
        store = self.host.broker.store
        mark = StoreMark(store)
        with store.one_commit():  # a commit's writes on disk all together, or not at all
            self.transactions.discharge(txn_id, fail)
        log.debug("1.0 transaction %s %s on %s", txn_label(txn_id),
                  "rolled back" if fail else "committed", self.host.connection_id)
        mark.answer(lambda error: self._discharged(delivery, txn_id, error))

    def _discharged(self, delivery: Delivery, txn_id: bytes, error: Optional[Exception]) -> None:
        """The store synced (or failed to sync) what a commit wrote: answer the discharge."""
        if self.closed or self.host.closing:
            return
        if error is None:
            _settle(delivery, Delivery.ACCEPTED)
        else:
            condition = (ErrorCondition.RESOURCE_LIMIT_EXCEEDED if store_full(error)
                         else ErrorCondition.INTERNAL_ERROR)
            _settle(delivery, Delivery.REJECTED, condition=Condition(
                condition.value, not_saved_text(f"the commit of transaction '{txn_label(txn_id)}'", error)))
        self.host.output_ready()

    def teardown(self) -> None:
        """The link (or the connection) went: roll back what it declared."""
        if self.closed:
            return
        self.closed = True
        self.transactions.roll_back_declared_by(self)


def _control(encoded: bytes) -> tuple[str, list]:
    """The kind (declare or discharge) and the fields of a control message; raises
    ``Amqp10Error(amqp:decode-error)`` for anything else."""
    message = Message()
    try:
        message.decode(encoded)
    except Exception as exc:  # noqa: BLE001 - proton's codec raises its own kinds
        raise Amqp10Error(ErrorCondition.DECODE_ERROR, f"malformed control message: {exc}") from None
    body = message.body
    kind = _CONTROLS.get(body.descriptor) if isinstance(body, Described) else None
    if kind is None or not isinstance(body.value, list):
        raise Amqp10Error(ErrorCondition.DECODE_ERROR,
                          f"a coordinator takes declare and discharge bodies, not {body!r:.80}")
    return kind, owned_value(body.value)  # a txn-id is a view into the message's buffer


def _settle(delivery: Delivery, state: int, *, data: Optional[list] = None,
            condition: Optional[Condition] = None) -> None:
    if data is not None:
        delivery.local.data = data
    if condition is not None:
        delivery.local.condition = condition
    delivery.update(state)
    delivery.settle()


def attach_coordinator(host: LinkHost, link: Link) -> CoordinatorLink:
    """Answer an attach to the coordinator: the connection's transactions are made with
    its first one. Raises ``Amqp10Error`` (``refuse_unsupported_capabilities``)."""
    refuse_unsupported_capabilities(link)
    if host.transactions is None:
        host.transactions = ConnectionTransactions(host.owner)
    link.target.type = Terminus.COORDINATOR
    echo_capabilities(link.target, SUPPORTED_CAPABILITIES)
    link.source.address = link.remote_source.address
    link.snd_settle_mode = link.remote_snd_settle_mode
    link.rcv_settle_mode = Link.RCV_FIRST
    handler = CoordinatorLink(host, link, host.transactions)
    link.open()
    handler.refill()
    return handler
