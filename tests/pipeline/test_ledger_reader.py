"""The events table from v1 segments (real ones, written before v2) and from v2 records,
joined in Spark as ``records.EVENTS_OF`` says."""
from __future__ import annotations

import io
import json
import os
import shutil
from types import SimpleNamespace

import pytest

from gateway.ledger import EventKind, Ledger, LedgerWriter
from pipeline.ledger_reader import read_ledgers
from pipeline.progress import Progress
from pipeline.report import run_report
from tests.support.ledger_files import read_events, segment_lines

pytestmark = pytest.mark.pipeline

V1 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ledger_v1")
T0 = 1_700_000_000.0


def _rows(spark, directory: str) -> tuple[list[dict], list]:
    """(valid events as v1 objects, malformed lines) of a directory, read by Spark."""
    rows = read_ledgers(spark, [directory]).collect()
    events = [{k: v for k, v in r.asDict().items() if v is not None and k not in
               ("valid", "corrupt_record")} for r in rows if r["valid"]]
    return events, [r["corrupt_record"] for r in rows if not r["valid"]]


def _key(event: dict) -> str:
    return json.dumps(event, sort_keys=True, default=list)


def test_real_v1_segments_give_the_report_they_gave_before(spark, tmp_path):
    expected = json.loads(open(os.path.join(V1, "gateway.expected.json")).read())
    s = run_report([os.path.join(V1, "gateway")], str(tmp_path / "out"), spark=spark,
                   progress=Progress(6, stream=io.StringIO()))
    assert (s.events, s.malformed, list(s.containers)) == \
        (expected["events"], expected["malformed"], expected["containers"])
    for name in ("by_event", "settled_by_outcome", "protocol_pairs", "protocol_pair_bytes",
                 "latency_us"):
        assert getattr(s, name) == expected[name], name
    assert {"|".join(map(str, k)): v for k, v in s.latency_by_queue.items()} == \
        expected["latency_by_queue"]
    for name, rows in expected["tables"].items():
        got = [json.loads(json.dumps(r.asDict(), default=str))
               for r in spark.read.parquet(s.tables[name]).collect()]
        assert sorted(map(_key, got)) == sorted(map(_key, rows)), name


def test_a_crashed_v1_segment_gives_every_complete_line_and_one_malformed(spark, tmp_path):
    directory = str(tmp_path / "crashed")
    shutil.copytree(os.path.join(V1, "crashed"), directory)
    [(name, lines, tail)] = segment_lines(directory)
    assert name.endswith(".jsonl.open") and tail and len(lines) == 35
    events, malformed = _rows(spark, directory)
    assert malformed == [tail.decode()]
    assert sorted(map(_key, events)) == sorted(_key(json.loads(line)) for line in lines)
    assert read_events(directory) == [json.loads(line) for line in lines]


def _message(gid: int, **fields) -> SimpleNamespace:
    values = dict(gateway_id=gid, exchange="x", routing_key="k", message_id=f"m-{gid}",
                  correlation_id=None, size=10 + gid, headers={"tenant": "acme", "no": 1},
                  created_at=T0, origin=SimpleNamespace(_value_="amqp091"), durable=False)
    values.update(fields)
    return SimpleNamespace(**values)


def v2_ledger(directory: str) -> None:
    """Every kind of record, over three segments, beside a v1 segment and a torn line."""
    ledger = Ledger(container_id="gw-B", header_allowlist=["tenant"])
    writer = LedgerWriter(directory, container_id="gw-B", segment_max_bytes=700)
    ids = iter(range(1000, 2000))
    ledger.use_gateway_ids(ids.__next__)
    q = SimpleNamespace(name="q", routed_to=("q",))
    pub = ledger.context(T0, "/", "ann", "0-9-1", "c1", 1)
    relay = ledger.context(T0, "v", "bob", "1.0", "c2", "sender", None)
    sub = ledger.context(T0, "/", "carl", "1.0", "c3", "r", "/queues/q")
    for gid in range(1, 6):
        m = _message(gid)
        entry = SimpleNamespace(message=m, delivery_count=gid % 2)
        ledger.received(T0 + gid, pub, m, EventKind.ROUTED, [q])
        ledger.delivered(T0 + gid + 0.5, sub, entry, "q")
        ledger.settled(T0 + gid + 0.75, sub, entry, "q", "accepted" if gid % 3 else "rejected")
        writer.add(ledger.take_lines(3))
        writer.flush(T0 + gid)
    late = _message(6)
    ledger.received(T0 + 6, pub, late)  # a transaction: routed at commit
    ledger.verdict(T0 + 7, pub, late, EventKind.ROUTED, [q])
    ledger.received(T0 + 8, relay, _message(7, exchange=""), EventKind.REFUSED,
                    reason="no queue", address="/amq/queue/nope", routed=False)
    ledger.refused(T0 + 8, relay, "user-id", _message(0, exchange=""), address="/queue/q")
    ledger.refused(T0 + 8, pub, "ACCESS_REFUSED", exchange="secret", routing_key="k")
    ledger.expired(T0 + 9, "/", late, 0, "q")
    ledger.dead_lettered(T0 + 9, "/", _message(5), "q", "dlx", "dead", "rejected")
    ledger.dead_letter_copy(T0 + 9, "/", _message(8, exchange="dlx"), EventKind.ROUTED, [q],
                            "rejected")
    ledger.delivered(T0 + 10, sub, SimpleNamespace(message=_message(8), delivery_count=0), "q")
    ledger.dead_letter_copy(T0 + 9, "/", _message(5, exchange="gone"), EventKind.UNROUTABLE, [],
                            "expired", copied=False)
    ledger.close_context(T0 + 11, relay)
    writer.add(ledger.take_lines(10 ** 6))
    writer.flush(T0 + 12)
    with open(os.path.join(directory, "ledger-gw_A-0000000000000001-0000-0000000000000002.jsonl"),
              "w") as f:
        f.write('{"v":1,"container":"gw-A","ts_us":5,"event":"received","size":3}\n')
    with open(os.path.join(directory, sorted(os.listdir(directory))[-1]), "ab") as f:
        f.write(b'["d",17000')


def test_spark_joins_v2_records_as_the_python_reader_does(spark, tmp_path):
    directory = str(tmp_path / "mixed")
    v2_ledger(directory)
    assert len([n for n, _, _ in segment_lines(directory) if "gw_B" in n]) >= 3
    events, malformed = _rows(spark, directory)
    assert malformed == ['["d",17000']
    expected = read_events(directory)
    assert sorted(map(_key, events)) == sorted(map(_key, expected))
    by_kind: dict[str, int] = {}
    for e in expected:
        by_kind[e["event"]] = by_kind.get(e["event"], 0) + 1
    assert by_kind == {"received": 8, "routed": 7, "delivered": 6, "settled": 5, "refused": 3,
                       "expired": 1, "dead_lettered": 1, "unroutable": 1}
    delivered = [e for e in expected if e["event"] == "delivered"]
    assert all(e["proto_in"] == "0-9-1" and e["proto_out"] == "1.0" and e["user"] == "carl"
               and e["address"] == "/queues/q" and e["exchange"] for e in delivered)
    [copy] = [e for e in delivered if e["gateway_id"] == "8"]
    assert (copy["exchange"], copy["latency_us"]) == ("dlx", 10_000_000)
    [relayed] = [e for e in expected if e["event"] == "received" and e.get("vhost") == "v"]
    assert (relayed["address"], relayed.get("exchange"), relayed["headers"]) == \
        ("/amq/queue/nope", None, {"tenant": "acme"})


def test_a_hub_records_where_an_arrival_came_from_and_its_forward_keeps_the_origin(spark, tmp_path):
    """A hub's ledger: a message forwarded by org-a (its id 7 there) arrives and goes on to
    org-b. The arrival names org-a as origin and sender; the hub's ``forwarded`` event
    takes the origin from its message, so org-b's arrival (origin org-a, 7) matches it.
    A message line of the layout written before (no origin container, no peer) reads
    with both null."""
    directory = str(tmp_path / "hub")
    ledger = Ledger(container_id="hub")
    writer = LedgerWriter(directory, container_id="hub")
    ids = iter(range(100, 200))
    ledger.use_gateway_ids(ids.__next__)
    link = ledger.context(T0, "/", "org-a", "1.0", "c1", "l")
    m = _message(50, exchange="", routing_key="orders@org-b")
    ledger.forwarded(T0 + 1, m, "org-b")  # the forwarder sends before the link records
    ledger.received(T0 + 1, link, m, EventKind.ROUTED, [])
    ledger.arrived_forwarded(m, 7, "org-a", "org-a")
    old = ledger.take_lines(10 ** 6)
    older = '["m",%r,%d,51,"","k","m-51",null,12,"routed",[],null,null,null,9]\n' % (T0 + 2, link)
    writer.add(old + older.encode())
    writer.close(T0 + 3)
    events, malformed = _rows(spark, directory)
    assert malformed == []
    assert sorted(map(_key, events)) == sorted(map(_key, read_events(directory)))
    got = {(e["event"], e["gateway_id"]): e for e in events}
    arrival, forward = got[("received", "50")], got[("forwarded", "50")]
    assert (arrival["origin_id"], arrival["origin_container"], arrival["peer_container"]) == \
        ("7", "org-a", "org-a")
    assert (forward["origin_id"], forward["origin_container"], forward["peer_container"]) == \
        ("7", "org-a", "org-b")
    before = got[("received", "51")]
    assert before["origin_id"] == "9" and "origin_container" not in before \
        and "peer_container" not in before
