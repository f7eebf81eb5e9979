"""A stand-in for ``LedgerWriter`` that keeps every ``record(...)`` call for assertions."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["CapturedEvent", "LedgerCapture"]


@dataclass
class CapturedEvent:
    """One ``record`` call: the event kind (its string value), ``now`` and the fields."""

    event: str
    now: float
    fields: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Any:
        return self.fields.get(name)


class LedgerCapture:
    """``broker.ledger = LedgerCapture()``; then ``kinds()`` / ``of(kind)`` to look."""

    def __init__(self) -> None:
        self.events: list[CapturedEvent] = []

    def record(self, event: Any, now: float, **fields: Any) -> None:
        then = fields.pop("then", None)
        if then is None:
            self.events.append(CapturedEvent(getattr(event, "value", event), now, fields))
            return
        # two events in one row, as the writer splits them
        first = {k: v for k, v in fields.items() if k not in ("routed_to", "reason")}
        second = {k: v for k, v in fields.items() if k != "headers"}
        self.events.append(CapturedEvent(getattr(event, "value", event), now, first))
        self.events.append(CapturedEvent(getattr(then, "value", then), now, second))

    def _delivery(self, event: Any, now: float, context: tuple, key: tuple, queue: Any,
                  delivery_count: Any, outcome: Any = None, reason: Any = None) -> None:
        """The compact form, captured with the fields ``record`` would have had (protocol
        and outcome as the ledger's enums, as the call sites used to pass them)."""
        from gateway.ledger import Outcome, Protocol

        vhost, user, proto_out, connection, link, address = context
        proto_in, exchange, routing_key, message_id, correlation_id, gateway_id, size, received_at = key
        kind = getattr(event, "value", event)
        fields = dict(vhost=vhost, user=user, proto_in=Protocol(proto_in),
                      proto_out=Protocol(proto_out), connection=connection, link=link,
                      address=address, queue=queue, message_id=message_id,
                      correlation_id=correlation_id, gateway_id=gateway_id, size=size,
                      delivery_count=delivery_count,
                      outcome=None if outcome is None else Outcome(getattr(outcome, "value", outcome)),
                      reason=reason, received_at=received_at)
        if kind == "delivered":
            fields.update(exchange=exchange, routing_key=routing_key)
        self.events.append(CapturedEvent(kind, now, fields))

    def delivered(self, now: float, context: tuple, key: tuple, queue: Any,
                  delivery_count: Any) -> list:
        self._delivery("delivered", now, context, key, queue, delivery_count)
        return [self.events[-1]]

    def settled(self, row: Any, now: float, context: tuple, key: tuple, queue: Any,
                delivery_count: Any, outcome: Any, reason: Any = None) -> None:
        self._delivery("settled", now, context, key, queue, delivery_count, outcome, reason)

    def publish_event(self, event: Any, then: Any, now: float, context: tuple, key: tuple,
                      routed_to: Any = None, reason: Any = None, headers: Any = None) -> None:
        """The compact publish row, captured as the two events ``record(then=...)`` gives."""
        from gateway.ledger import Protocol

        vhost, user, _proto, connection, link, address = context
        proto_in, exchange, routing_key, message_id, correlation_id, gateway_id, size, _ = key
        self.record(event, now, vhost=vhost, user=user, proto_in=Protocol(proto_in),
                    connection=connection, link=link, exchange=exchange,
                    routing_key=routing_key, address=address, routed_to=routed_to,
                    message_id=message_id, correlation_id=correlation_id,
                    gateway_id=gateway_id, size=size, reason=reason, headers=headers, then=then)

    def kinds(self) -> list[str]:
        return [e.event for e in self.events]

    def of(self, kind: str) -> list[CapturedEvent]:
        return [e for e in self.events if e.event == kind]

    def clear(self) -> None:
        self.events.clear()
