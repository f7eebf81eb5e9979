"""A stand-in for ``LedgerWriter`` that keeps every event recorded, for assertions."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway.ledger import Outcome, Protocol
from gateway.ledger.buffer import (DELIVERED_ROW_LENGTH, KEY_LENGTH, PAIR_SEPARATOR,
                                   PUBLISH_ROW_LENGTH, ROUTED_ROW_LENGTH,
                                   SETTLED_MANY_ROW_LENGTH, SETTLED_ROW_LENGTH, EventBuffer)
from gateway.ledger.encoding import routed_publish_row

__all__ = ["CapturedEvent", "LedgerCapture"]


@dataclass
class CapturedEvent:
    """One ``record`` call: the event kind (its string value), ``now`` and the fields."""

    event: str
    now: float
    fields: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Any:
        return self.fields.get(name)


@dataclass
class _RecordCall:
    """A ``record`` call, kept in ``rows`` in its place among the compact rows."""

    event: Any
    now: float
    fields: dict[str, Any]


class LedgerCapture(EventBuffer):
    """``broker.ledger = LedgerCapture()``; then ``kinds()`` / ``of(kind)`` to look.

    The ``EventBuffer`` surface the message path uses. ``rows`` is a plain list, as the
    busiest call sites append compact rows to it (and fill a publish row's reserved place
    later); ``record`` calls go into it too. ``events`` expands it in order into the
    events the writer would write, a key given by gateway id found among the publish rows
    before it."""

    def __init__(self) -> None:
        super().__init__()
        self._published: dict[Any, tuple] = {}

    def record(self, event: Any, now: float, **fields: Any) -> None:  # type: ignore[override]
        self.rows.append(_RecordCall(event, now, fields))

    @property
    def events(self) -> list[CapturedEvent]:
        self._events: list[CapturedEvent] = []
        self._published.clear()
        for row in self.rows:
            if row is None:
                continue  # a publish row's place left empty
            if isinstance(row, _RecordCall):
                self._record(row.event, row.now, row.fields)
            else:
                self.capture_row(row)
        return self._events

    def _record(self, event: Any, now: float, fields: dict) -> None:
        fields = dict(fields)
        then = fields.pop("then", None)
        if then is None:
            self._events.append(CapturedEvent(getattr(event, "value", event), now, fields))
            return
        # two events in one row, as the writer splits them
        first = {k: v for k, v in fields.items() if k not in ("routed_to", "reason")}
        second = {k: v for k, v in fields.items() if k != "headers"}
        self._events.append(CapturedEvent(getattr(event, "value", event), now, first))
        self._events.append(CapturedEvent(getattr(then, "value", then), now, second))

    def capture_row(self, row: tuple) -> None:
        """A compact row (``gateway.ledger.buffer``), captured as its events with the
        fields ``record`` would have had (protocol and outcome as the ledger's enums)."""
        if len(row) == DELIVERED_ROW_LENGTH:
            now, context, key, queue, delivery_count = row
            self._delivery("delivered", now, context, key, queue, delivery_count)
        elif len(row) == SETTLED_ROW_LENGTH:
            now, (_at, context, key, queue, delivery_count), outcome, reason = row
            self._delivery("settled", now, context, key, queue, delivery_count, outcome, reason)
        elif len(row) == SETTLED_MANY_ROW_LENGTH:
            now, delivered_rows, outcome = row
            for delivered in delivered_rows:
                self.capture_row((now, delivered, outcome, None))
        elif len(row) == PUBLISH_ROW_LENGTH:
            self._publish(row)
        elif len(row) == ROUTED_ROW_LENGTH:
            self._publish(routed_publish_row(row))
        else:
            raise AssertionError(f"not a compact ledger row: {row!r}")

    def _delivery(self, event: str, now: float, context: tuple, key: Any, queue: Any,
                  delivery_count: Any, outcome: Any = None, reason: Any = None) -> None:
        vhost, user, proto_out, connection, link, address = context
        if isinstance(key, int):  # a publish row's gateway id: it came earlier
            key = self._published[key]
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
        self._events.append(CapturedEvent(event, now, fields))

    def _publish(self, row: tuple) -> None:
        (proto_in, exchange, routing_key, message_id, correlation_id, gateway_id, size, _at,
         now, events, context, routed_to, reason, headers) = row
        self._published[gateway_id] = row
        vhost, user, _proto, connection, link, address = context
        first, then = events.split(PAIR_SEPARATOR)
        self._record(first, now, dict(vhost=vhost, user=user, proto_in=Protocol(proto_in),
                    connection=connection, link=link, exchange=exchange,
                    routing_key=routing_key, address=address, routed_to=routed_to,
                    message_id=message_id, correlation_id=correlation_id,
                    gateway_id=gateway_id, size=size, reason=reason, headers=headers, then=then))

    def kinds(self) -> list[str]:
        return [e.event for e in self.events]

    def of(self, kind: str) -> list[CapturedEvent]:
        return [e for e in self.events if e.event == kind]

    def clear(self) -> None:
        self.rows.clear()
