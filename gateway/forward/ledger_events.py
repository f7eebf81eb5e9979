"""The forwarding events of the ledger, through the broker's ``Ledger`` (None: the ledger
is off): ``forwarded`` when an outbox entry is sent to its remote (again on each retry:
the report counts one message), ``forward_settled`` when the remote settles it
(``outcome`` accepted, rejected or released, ``reason`` the remote's error),
``dead_lettered`` when the entry leaves the outbox for the remote's dead-letter queue
here, at the source (with its copy there, followed like a queue's dead-letter copy).
Never on the path of local traffic.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

from gateway.forward.outbound import ForwardOutcome
from gateway.ledger import EventKind, Outcome

__all__ = ["ForwardLedger"]

_OUTCOME = {ForwardOutcome.ACCEPTED: Outcome.ACCEPTED.value,
            ForwardOutcome.REJECTED: Outcome.REJECTED.value,
            ForwardOutcome.RELEASED: Outcome.RELEASED.value}


class ForwardLedger:
    def __init__(self, broker: Any) -> None:
        self._broker = broker

    def forwarded(self, remote: str, entries: Sequence[Any], now: float) -> None:
        """``entries`` (outbox entries) were sent to ``remote`` in one turn."""
        ledger = self._broker.ledger
        if ledger is not None:
            ledger.forwarded_many(now, [entry.message for entry in entries], remote)

    def settled(self, remote: str, entries: Sequence[Any], outcome: ForwardOutcome,
                reason: Optional[str], now: float) -> None:
        """``remote`` settled ``entries`` with ``outcome`` (``reason``: its error)."""
        ledger = self._broker.ledger
        if ledger is not None:
            ledger.forward_settled_many(now, [entry.message for entry in entries], remote,
                                        _OUTCOME[outcome], reason)

    def dead_lettered(self, remote: str, entry: Any, error: str, copy: Any, vhost: str,
                      queues: Sequence[Any], now: float) -> None:
        """``entry`` for ``remote`` was dead-lettered here (``error`` why), its ``copy``
        published in ``vhost`` to ``queues``."""
        ledger = self._broker.ledger
        if ledger is not None:
            ledger.forward_dead_lettered(now, entry.message, remote, error)
            ledger.dead_letter_copy(now, vhost, copy,
                                    EventKind.ROUTED if queues else EventKind.UNROUTABLE,
                                    queues, f"forward: {error}")
