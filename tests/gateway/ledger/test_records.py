"""The record type and its column list (the contract with pipeline/)."""
from __future__ import annotations

import dataclasses
import json

import pytest

from gateway.ledger import (
    COLUMN_NAMES,
    COLUMNS,
    LEDGER_SCHEMA_VERSION,
    EventKind,
    LedgerRecord,
    Outcome,
    Protocol,
    protocol_pair,
)

SPARK_TYPES = {"int", "long", "string", "array<string>", "map<string,string>"}


def test_columns_match_the_record_fields_in_order():
    fields = [f.name for f in dataclasses.fields(LedgerRecord)]
    assert list(COLUMN_NAMES) == ["v"] + fields
    assert len(set(COLUMN_NAMES)) == len(COLUMN_NAMES)


def test_column_types_are_ones_the_pipeline_maps():
    assert {t for _, t in COLUMNS} <= SPARK_TYPES


def test_event_kinds_cover_the_issue():
    assert {k.value for k in EventKind} == {
        "received", "routed", "unroutable", "returned", "delivered", "settled", "expired",
        "dead_lettered", "forwarded", "forward_settled", "refused",
        # issue 41: every way a message can end, and the gateway's own events
        "purged", "deleted", "dropped", "moved", "restored", "started", "gap",
    }
    assert {o.value for o in Outcome} == {"accepted", "rejected", "released", "modified"}


def test_record_is_frozen():
    r = LedgerRecord(ts_us=1, event=EventKind.RECEIVED)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.size = 3  # type: ignore[misc]


def test_json_dict_round_trip_drops_none_and_keeps_types():
    r = LedgerRecord(
        ts_us=1_700_000_000_123_456, event=EventKind.SETTLED, container="gw", vhost="/",
        proto_in=Protocol.AMQP10, proto_out=Protocol.AMQP091, queue="q", routed_to=("q", "r"),
        gateway_id="b-1", size=12, delivery_count=0, outcome=Outcome.REJECTED,
        latency_us=250, headers={"x-tenant": b"acme"},
    )
    d = r.to_json_dict()
    assert d["v"] == LEDGER_SCHEMA_VERSION
    assert d["event"] == "settled" and d["outcome"] == "rejected" and d["proto_in"] == "1.0"
    assert d["routed_to"] == ["q", "r"] and d["headers"] == {"x-tenant": "acme"}
    assert "user" not in d and "message_id" not in d
    back = LedgerRecord.from_json_dict(json.loads(json.dumps(d)))
    assert back == dataclasses.replace(r, headers={"x-tenant": "acme"})


def test_from_json_dict_rejects_unknown_event():
    with pytest.raises(ValueError) as info:
        LedgerRecord.from_json_dict({"ts_us": 1, "event": "teleported"})
    assert "teleported" in str(info.value)


def test_protocol_pair_labels():
    assert protocol_pair(Protocol.AMQP091.value, Protocol.AMQP10.value) == "0-9-1->1.0"
    assert protocol_pair("1.0", None) == "1.0->*"


def test_v2_records_have_distinct_tags_and_columns_keep_their_types():
    from gateway.ledger.records import RECORDS

    assert len(RECORDS) == len({tag for tag in RECORDS}) and all(len(t) == 1 for t in RECORDS)
    types = dict(COLUMNS)
    for tag, fields in RECORDS.items():
        assert fields[0][0] == "ts", f"{tag}: the time comes first (segments.recover reads it)"
        assert [name for name, _ in fields][1] == "ctx"
        for name, kind in fields:
            assert types.get(name, kind) == kind, (tag, name)


def test_every_event_column_comes_from_a_field_there_is():
    from gateway.ledger.records import CONTEXT, EVENTS_OF, MESSAGE, RECORDS

    fields = {"ctx": {f for f, _ in RECORDS[CONTEXT]},
              "msg": {f for f, _ in RECORDS[MESSAGE]} | {"proto"}}
    for tag, specs in EVENTS_OF.items():
        fields["rec"] = {f for f, _ in RECORDS[tag]}
        for spec in specs:
            assert "event" in spec and set(spec) <= set(COLUMN_NAMES), tag
            for column, sources in spec.items():
                for source in sources:
                    side, _, field = source.partition(".")
                    assert source.startswith("=") or field in fields[side], (tag, column, source)


def test_the_records_load_without_the_encoder():
    """``pipeline/`` imports the records only: a Spark driver needs no msgspec."""
    import os
    import subprocess
    import sys

    code = ("import sys, gateway.ledger, gateway.ledger.records; "
            "assert 'msgspec' not in sys.modules; gateway.ledger.Ledger; "
            "assert 'msgspec' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=os.getcwd(),
                   env={**os.environ, "PYTHONPATH": os.getcwd()})
