"""A stand-in for ``LedgerWriter`` that keeps every event recorded, for assertions."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway.ledger import Outcome, Protocol
from gateway.ledger.buffer import (DELIVERED_ROW_LENGTH, KEY_LENGTH, PAIR_SEPARATOR,
                                   PUBLISH_ROW_LENGTH, SETTLED_ROW_LENGTH, EventBuffer)

__all__ = ["CapturedEvent", "LedgerCapture"]


@dataclass
class CapturedEvent:
    """One ``record`` call: the event kind (its string value), ``now`` and the fields."""

    event: str
    now: float
    fields: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Any:
        return self.fields.get(name)


class _RowSink:
    """``LedgerCapture.rows``: each compact row appended is captured at once."""

    def __init__(self, capture: "LedgerCapture") -> None:
        self._capture = capture

    def append(self, row: Any) -> None:
        self._capture.capture_row(row)


class LedgerCapture(EventBuffer):
    """``broker.ledger = LedgerCapture()``; then ``kinds()`` / ``of(kind)`` to look.

    The ``EventBuffer`` surface the message path uses, with every row (``record`` calls,
    and the compact rows the busiest call sites append to ``rows``) captured as the events
    the writer would write."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[CapturedEvent] = []
        self.rows = _RowSink(self)  # type: ignore[assignment]

    def record(self, event: Any, now: float, **fields: Any) -> None:  # type: ignore[override]
        then = fields.pop("then", None)
        if then is None:
            self.events.append(CapturedEvent(getattr(event, "value", event), now, fields))
            return
        # two events in one row, as the writer splits them
        first = {k: v for k, v in fields.items() if k not in ("routed_to", "reason")}
        second = {k: v for k, v in fields.items() if k != "headers"}
        self.events.append(CapturedEvent(getattr(event, "value", event), now, first))
        self.events.append(CapturedEvent(getattr(then, "value", then), now, second))

    def capture_row(self, row: tuple) -> None:
        """A compact row (``gateway.ledger.buffer``), captured as its events with the
        fields ``record`` would have had (protocol and outcome as the ledger's enums)."""
        if len(row) == DELIVERED_ROW_LENGTH:
            now, context, key, queue, delivery_count = row
            self._delivery("delivered", now, context, key, queue, delivery_count)
        elif len(row) == SETTLED_ROW_LENGTH:
            now, (_at, context, key, queue, delivery_count), outcome, reason = row
            self._delivery("settled", now, context, key, queue, delivery_count, outcome, reason)
        elif len(row) == PUBLISH_ROW_LENGTH:
            self._publish(row)
        else:
            raise AssertionError(f"not a compact ledger row: {row!r}")

    def _delivery(self, event: str, now: float, context: tuple, key: tuple, queue: Any,
                  delivery_count: Any, outcome: Any = None, reason: Any = None) -> None:
        vhost, user, proto_out, connection, link, address = context
        proto_in, exchange, routing_key, message_id, correlation_id, gateway_id, size, received_at = \
            key[:KEY_LENGTH]
        fields = dict(vhost=vhost, user=user, proto_in=Protocol(proto_in),
                      proto_out=Protocol(proto_out), connection=connection, link=link,
                      address=address, queue=queue, message_id=message_id,
                      correlation_id=correlation_id, gateway_id=gateway_id, size=size,
                      delivery_count=delivery_count,
                      outcome=None if outcome is None else Outcome(outcome),
                      reason=reason, received_at=received_at)
        if event == "delivered":
            fields.update(exchange=exchange, routing_key=routing_key)
        self.events.append(CapturedEvent(event, now, fields))

    def _publish(self, row: tuple) -> None:
        (proto_in, exchange, routing_key, message_id, correlation_id, gateway_id, size, _at,
         now, events, context, routed_to, reason, headers) = row
        vhost, user, _proto, connection, link, address = context
        first, then = events.split(PAIR_SEPARATOR)
        self.record(first, now, vhost=vhost, user=user, proto_in=Protocol(proto_in),
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
