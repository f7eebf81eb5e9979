"""The forwarding events of the ledger, through the broker's ``Ledger`` (None: the ledger
is off): ``forwarded`` when an outbox entry is sent to its remote (again on each retry:
the report counts one message), ``forward_settled`` when the remote settles it
(``outcome`` accepted, rejected or released, ``reason`` the remote's error). Never on
the path of local traffic.
"""
from __future__ import annotations

from typing import Any, Optional

from gateway.forward.outbound import ForwardOutcome
from gateway.ledger import Outcome

__all__ = ["ForwardLedger"]

_OUTCOME = {ForwardOutcome.ACCEPTED: Outcome.ACCEPTED.value,
            ForwardOutcome.REJECTED: Outcome.REJECTED.value,
            ForwardOutcome.RELEASED: Outcome.RELEASED.value}


class ForwardLedger:
    def __init__(self, broker: Any) -> None:
        self._broker = broker

    def forwarded(self, remote: str, entry: Any, now: float) -> None:
        ledger = self._broker.ledger
        if ledger is not None:
            ledger.forwarded(now, entry.message, remote)

    def settled(self, remote: str, entry: Any, outcome: ForwardOutcome, reason: Optional[str],
                now: float) -> None:
        ledger = self._broker.ledger
        if ledger is not None:
            ledger.forward_settled(now, entry.message, remote, _OUTCOME[outcome], reason)
