"""A ``Ledger`` that keeps every record, and shows them as the events they stand for."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway.ledger import Ledger, Outcome, Protocol
from tests.support.ledger_files import join

__all__ = ["CapturedEvent", "LedgerCapture"]


@dataclass
class CapturedEvent:
    """One event: its kind (the string value), its time ``now`` and its fields, as the
    call sites gave them (``proto_in``, ``proto_out`` and ``outcome`` as the ledger's
    enums, ``received_at`` the message's receipt time where the event has a latency)."""

    event: str
    now: float
    fields: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Any:
        return self.fields.get(name)


class LedgerCapture(Ledger):
    """``broker.use_ledger(LedgerCapture())``; then ``kinds()`` / ``of(kind)`` to look.

    Nothing is taken: ``records`` holds everything recorded, and ``events`` joins it as
    the pipeline joins a ledger's records."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("container_id", "gw")
        super().__init__(**kwargs)

    @property
    def events(self) -> list[CapturedEvent]:
        records = [("segment", list(x)) for x in self.expand(self.records)]
        out = []
        for event in join(records):
            fields = {k: v for k, v in event.items() if k not in ("event", "ts", "container")}
            for name, kind in (("proto_in", Protocol), ("proto_out", Protocol),
                               ("outcome", Outcome)):
                if fields.get(name) is not None:
                    fields[name] = kind(fields[name])
            out.append(CapturedEvent(event["event"], event["ts"], fields))
        return out

    def kinds(self) -> list[str]:
        return [e.event for e in self.events]

    def of(self, kind: str) -> list[CapturedEvent]:
        return [e for e in self.events if e.event == kind]

    def clear(self) -> None:
        self.records.clear()
