"""The ledger's events in Python, for tests: v2 records joined as ``records.EVENTS_OF``
says (what ``pipeline/`` does in Spark), v1 lines as they are.

``join`` works on decoded records (the gateway's structs in memory, or lines read back);
``read_events(directory)`` reads every complete line of a ledger directory's segments and
gives each event as its v1 JSON object (the ``events`` table's row: columns that are not
null, ids as text); ``events_of_lines`` does the same for lines the ledger encoded.
"""
from __future__ import annotations

import glob
import json
import os
from typing import Any, Iterable

from gateway.ledger import records as r

__all__ = ["events_of_lines", "join", "read_events", "segment_lines", "v1_object"]

_FIELDS = {tag: [name for name, _ in fields] for tag, fields in r.RECORDS.items()}
_FROM_CONTEXT = ("container", "vhost", "user", "connection", "link")
_TYPES = dict(r.COLUMNS)


def join(records: Iterable[tuple[Any, list]]) -> list[dict[str, Any]]:
    """``records``: (segment, [tag, field...]) in stream order. One dict per event, in
    the order of the records that stand for them: every column ``EVENTS_OF`` gives, the
    context's, plus ``ts`` and ``received_at`` (seconds), values as recorded."""
    recs = [(segment, tag_fields[0], dict(zip(_FIELDS[tag_fields[0]], tag_fields[1:])))
            for segment, tag_fields in records]
    contexts = {(seg, rec["ctx"]): rec for seg, tag, rec in recs if tag == r.CONTEXT}
    messages: dict[tuple, dict] = {}
    for seg, tag, rec in recs:
        if tag in (r.MESSAGE, r.VERDICT) and rec["gateway_id"] is not None:
            ctx = contexts.get((seg, rec["ctx"]), {})
            messages[(ctx.get("container"), rec["gateway_id"])] = dict(rec, proto=ctx.get("proto"))
    out = []
    for seg, tag, rec in recs:
        ctx = contexts.get((seg, rec["ctx"]), {})
        msg = messages.get((ctx.get("container"), rec.get("gateway_id")), {})
        sides = {"rec": rec, "ctx": ctx, "msg": msg}
        for spec in r.EVENTS_OF.get(tag, ()):
            row = {c: ctx.get(c) for c in _FROM_CONTEXT}
            for column, sources in spec.items():
                row[column] = _first(sources, sides)
            if row["event"] is None:
                continue
            row["ts"], row["received_at"] = rec["ts"], rec.get("received_at")
            out.append(row)
    return out


def _first(sources: tuple[str, ...], sides: dict[str, dict]) -> Any:
    for source in sources:
        if source.startswith("="):
            return source[1:]
        side, _, field = source.partition(".")
        value = sides[side].get(field)
        if value is not None:
            return value
    return None


def v1_object(event: dict[str, Any]) -> dict[str, Any]:
    """A joined event as its ``events`` row in JSON: the v1 line's object (``v`` 2)."""
    out: dict[str, Any] = {"v": r.LEDGER_SCHEMA_VERSION, "container": event["container"],
                           "ts_us": round(event["ts"] * 1_000_000), "event": event["event"]}
    if event["received_at"] is not None:
        out["latency_us"] = round((event["ts"] - event["received_at"]) * 1_000_000)
    for column, kind in r.COLUMNS:
        value = event.get(column)
        if value is None or column in out:
            continue
        if kind == "string" and not isinstance(value, str):
            value = str(value)
        elif kind == "array<string>":
            value = list(value)
        out[column] = value
    return {k: v for k, v in out.items() if v is not None}


def segment_lines(directory: str) -> list[tuple[str, list[bytes], bytes]]:
    """(file name, complete lines, torn tail) of every segment, by name."""
    out = []
    for path in sorted(glob.glob(os.path.join(directory, "*.jsonl*"))):
        with open(path, "rb") as f:
            *lines, tail = f.read().split(b"\n")
        out.append((os.path.basename(path), lines, tail))
    return out


def read_events(directory: str, v2_only: bool = False) -> list[dict[str, Any]]:
    """Every event of the complete lines of ``directory``'s segments, as v1 objects: v1
    lines as they are, then the v2 records joined (segments by name, lines in order)."""
    v1: list[dict[str, Any]] = []
    v2: list[tuple[str, list]] = []
    for name, lines, _tail in segment_lines(directory):
        for line in lines:
            record = json.loads(line)
            if isinstance(record, list):
                v2.append((name, record))
            elif not v2_only:
                v1.append(record)
    return v1 + [v1_object(event) for event in join(v2)]


def events_of_lines(data: bytes) -> list[dict[str, Any]]:
    """The events of v2 lines (``Ledger.take_lines``, one segment's worth), as v1 objects."""
    return [v1_object(e) for e in join(("segment", json.loads(line)) for line in data.splitlines())]
