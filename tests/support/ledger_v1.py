"""A v1 ledger writer for tests: any event with any fields, one JSON object a line, as the
gateway wrote its ledger before the v2 records (``tests/pipeline/ledger_v1/`` holds real
ones). The pipeline still reads such segments; the report's tests build their ledgers
with this, field by field as they need them."""
from __future__ import annotations

import enum
from typing import Any, Optional

from gateway.ledger import LedgerRecord, LedgerWriter

__all__ = ["V1LedgerWriter"]

_TEXT = ("link", "message_id", "correlation_id", "gateway_id", "origin_id")


class V1LedgerWriter:
    """``record(event, now, **fields)`` as v1's writer took it (``received_at``: seconds,
    for the latency); ``flush(now)`` writes the records since the last flush as one chunk;
    segments, rotation and retention are ``LedgerWriter``'s."""

    def __init__(self, directory: str, *, container_id: str, **settings: Any) -> None:
        self.container_id = container_id
        self.files = LedgerWriter(directory, container_id=container_id, **settings)
        self._lines: list[bytes] = []

    def record(self, event: Any, now: float, *, received_at: Optional[float] = None,
               **fields: Any) -> None:
        import json

        values = {k: v.value if isinstance(v, enum.Enum) else v for k, v in fields.items()
                  if v is not None}
        for name in _TEXT:
            if name in values:
                values[name] = str(values[name])
        if "routed_to" in values:
            values["routed_to"] = tuple(values["routed_to"])
        if received_at is not None:
            values["latency_us"] = round((now - received_at) * 1_000_000)
        record = LedgerRecord(ts_us=round(now * 1_000_000), event=event, **values)
        line = {"v": 1, "container": self.container_id, **record.to_json_dict(version=1)}
        self._lines.append(json.dumps(line, separators=(",", ":")).encode() + b"\n")

    def flush(self, now: float) -> int:
        if self._lines:
            self.files.add(b"".join(self._lines))
            self._lines.clear()
        return self.files.flush(now)

    def close(self, now: float) -> int:
        self.flush(now)
        return self.files.close(now)
