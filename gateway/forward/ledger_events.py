"""The forwarding events of the ledger: ``forwarded`` when an outbox entry is sent to its
remote (again on each retry: the report counts one message), ``forward_settled`` when
the remote settles it (``outcome`` accepted, rejected or released, ``reason`` the remote's
error). ``gateway_id`` is this gateway's id of the message, ``origin_id`` the id the
first gateway gave it (a message this gateway forwards as a hub), ``peer_container`` the
remote. Recorded through the broker's ledger (None: the ledger is off); never on the path
of local traffic.
"""
from __future__ import annotations

from typing import Any, Optional

from gateway.broker.ledger_events import PROTOCOL_OF, EventKind, LedgerOutcome, WireProtocol
from gateway.forward import annotations as fa
from gateway.forward.outbound import ForwardOutcome

__all__ = ["ForwardLedger"]

_OUTCOME = {ForwardOutcome.ACCEPTED: LedgerOutcome.ACCEPTED,
            ForwardOutcome.REJECTED: LedgerOutcome.REJECTED,
            ForwardOutcome.RELEASED: LedgerOutcome.RELEASED}


class ForwardLedger:
    def __init__(self, broker: Any, container_id: str) -> None:
        self._broker = broker
        self._container_id = container_id

    def forwarded(self, remote: str, entry: Any, now: float) -> None:
        self._record(EventKind.FORWARDED, remote, entry, now)

    def settled(self, remote: str, entry: Any, outcome: ForwardOutcome, reason: Optional[str],
                now: float) -> None:
        self._record(EventKind.FORWARD_SETTLED, remote, entry, now, outcome=_OUTCOME[outcome],
                     reason=reason, received_at=entry.message.created_at)

    def _record(self, kind: EventKind, remote: str, entry: Any, now: float, **fields: Any) -> None:
        ledger = self._broker.ledger
        if ledger is None:
            return
        message = entry.message
        origin = entry.annotations.get(fa.ORIGIN)
        origin_id = None
        if origin is not None and origin != self._container_id:
            origin_id = entry.annotations.get(fa.GATEWAY_ID)
        ledger.record(kind, now, proto_in=PROTOCOL_OF.get(message.origin.value),
                      proto_out=WireProtocol.AMQP10, message_id=message.message_id,
                      correlation_id=message.correlation_id, gateway_id=entry.entry_id,
                      origin_id=origin_id, peer_container=remote, size=message.size, **fields)
