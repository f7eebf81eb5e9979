"""What an incoming and an outgoing link share: the link's ledger context, the ledger's
outcome and reason names, and the error texts that name the address the client used.

It exists so that ``links.py`` (incoming links and attaching) and ``outgoing_link.py``
can each be read alone without importing one another."""
from __future__ import annotations

from typing import Optional

from proton import Condition, Delivery

from addressing import AddressError, AddressErrorKind
from gateway.amqp10.conditions import Amqp10Error, ErrorCondition, Scope, error_from_broker
from gateway.amqp10.link_host import LinkHost
from gateway.auth import Action
from gateway.broker.errors import BrokerError
from gateway.ledger import EventKind, Outcome as LedgerOutcome, Protocol as WireProtocol

__all__ = ["INCOMING_CREDIT", "LEDGER_ACCEPTED", "LEDGER_OUTCOME", "LEDGER_RELEASED", "LINK_CLOSED",
           "QUEUE_FULL", "ROUTED", "TERMINAL_STATES", "UNTRANSLATABLE", "WRITE", "address_error",
           "broker_error", "end_ledger_context", "ledger_context", "make_condition",
           "naming_address"]

INCOMING_CREDIT = 256
#: the window of a link to ``amqp$transfer`` (another gateway's forwarder): larger than a
#: forwarder's default ``credit`` (500) and topped up at three quarters, so the sender
#: always has credit while a store commit holds the previous batch's outcomes (a window
#: that a held batch filled made the two gateways take turns)
TRANSFER_CREDIT = 2048
#: a link to ``amqp$transfer`` is topped up to less of its window as messages wait ready
#: in the queue its last forwarded message went to, to the floor below at this many
#: (end-to-end credit, as Qpid Dispatch propagates a receiver's credit): while the
#: consumers there are behind, the backlog waits at the sender, whose publishers are
#: paused (``Forwarder.flow``), instead of in the queue, and the receiving gateway takes
#: in small bites between serving them; with the queue drained, the whole window
TRANSFER_BACKLOG = 256
#: ... but never below this: a queue's drain is not an event the link hears, the next
#: transfers are (a link left without credit waits for the 50 ms poll), and a queue
#: without consumers still takes everything (store-and-forward), in bites of this size
TRANSFER_FLOOR = 64

_P10 = WireProtocol.AMQP10.value
# read on every message: a module global is four times cheaper to reach (the links
# import them under short private aliases of their own)
ROUTED = EventKind.ROUTED
LEDGER_ACCEPTED, LEDGER_RELEASED = LedgerOutcome.ACCEPTED.value, LedgerOutcome.RELEASED.value
WRITE = Action.WRITE  # per publish: a read through the enum class is a lookup
#: proton's terminal delivery states -> the ledger's settlement outcome (anything else:
#: released)
LEDGER_OUTCOME = {
    Delivery.ACCEPTED: LEDGER_ACCEPTED,
    Delivery.REJECTED: LedgerOutcome.REJECTED.value,
    Delivery.RELEASED: LEDGER_RELEASED,
    Delivery.MODIFIED: LedgerOutcome.MODIFIED.value,
}
#: ledger reasons
LINK_CLOSED = "link closed"
QUEUE_FULL = "queue full"
UNTRANSLATABLE = "cannot translate"


def ledger_context(host: LinkHost, name: str, address: Optional[str]) -> Optional[int]:
    """A link's ledger context (None: no ledger), for its life."""
    ledger = host.broker.ledger
    if ledger is None:
        return None
    return ledger.context(host.now, host.vhost.name, host.user.name, _P10, host.connection_id,
                          name, address)


def end_ledger_context(host: LinkHost, ctx: Optional[int]) -> None:
    ledger = host.broker.ledger
    if ledger is not None:
        ledger.close_context(host.now, ctx)


def naming_address(text: str, address: Optional[str]) -> str:
    """``text`` plus the address the client used, unless the text already names it: the
    node a resolver names (``amqp$transfer`` for ``x@elsewhere``, ``q`` for
    ``/amq/queue/q``) is not always what the client wrote."""
    if address is None or f"address '{address}'" in text:
        return text
    return f"{text} (address '{address}')"


def address_error(exc: AddressError, address: Optional[str]) -> Amqp10Error:
    condition = (ErrorCondition.NOT_FOUND if exc.kind is AddressErrorKind.NOT_FOUND
                 else ErrorCondition.INVALID_FIELD)
    return Amqp10Error(condition, naming_address(exc.text, address))


def broker_error(exc: BrokerError, address: Optional[str], scope: Scope = Scope.LINK) -> Amqp10Error:
    error = error_from_broker(exc, scope)
    if error.condition is ErrorCondition.NOT_FOUND:
        error = Amqp10Error(error.condition, naming_address(error.description, address), scope)
    return error


# Outcomes that end a delivery (proton's DispositionType values, as ints).
TERMINAL_STATES = frozenset((Delivery.ACCEPTED, Delivery.REJECTED, Delivery.RELEASED, Delivery.MODIFIED))


def make_condition(cond: ErrorCondition, text: str) -> Condition:
    return Condition(cond.value, text)


# --------------------------------------------------------------------- incoming

