"""The report over generated ledgers: exact counts, protocol pairs, latency, reconciliation,
torn lines after kill -9, and the HTML with its charts."""
from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from gateway.ledger import EventKind as K, Outcome, Protocol
from pipeline.progress import Progress
from pipeline.report import run_report
from tests.support.ledger_v1 import V1LedgerWriter as LedgerWriter  # any event, any field

pytestmark = pytest.mark.pipeline

T0 = 1_700_000_000.0
P091, P10 = Protocol.AMQP091, Protocol.AMQP10


def quiet() -> Progress:
    return Progress(6, stream=io.StringIO())


def single_gateway_ledger(directory: str) -> None:
    """Known traffic on one gateway: 20 + 5 + 3 + 2 + 4 messages, 2 refusals."""
    w = LedgerWriter(directory, container_id="gw-A", segment_max_bytes=4000)
    t = T0
    n = 0

    def gid() -> str:
        nonlocal n
        n += 1
        return f"a-{n}"

    # 20 messages 0-9-1 -> 1.0: alice publishes to ex/k, bob consumes q1 over 1.0.
    outcomes = [Outcome.ACCEPTED] * 15 + [Outcome.REJECTED] * 3 + [Outcome.RELEASED] * 2
    for i, outcome in enumerate(outcomes):
        g = gid()
        common = dict(vhost="/", gateway_id=g, size=100, message_id=f"m{i}")
        w.record(K.RECEIVED, t, user="alice", proto_in=P091, exchange="ex", routing_key="k", **common)
        w.record(K.ROUTED, t, routed_to=["q1"], exchange="ex", routing_key="k", **common)
        w.record(K.DELIVERED, t + 0.001, user="bob", proto_in=P091, proto_out=P10, queue="q1",
                 delivery_count=0, **common)
        # latencies 1..20 ms
        w.record(K.SETTLED, t + (i + 1) / 1000, user="bob", queue="q1", outcome=outcome,
                 received_at=t, **common)
        if outcome is Outcome.RELEASED:  # redelivered, then accepted
            w.record(K.DELIVERED, t + 0.05, user="bob", proto_in=P091, proto_out=P10, queue="q1",
                     delivery_count=1, **common)
            w.record(K.SETTLED, t + 0.06, user="bob", queue="q1", outcome=Outcome.ACCEPTED,
                     received_at=t, **common)
        t += 1
    w.flush(t)
    # 5 messages 1.0 -> 0-9-1 on vhost v2 (60 s later: another minute).
    t = T0 + 60
    for i in range(5):
        common = dict(vhost="v2", gateway_id=gid(), size=1000)
        w.record(K.RECEIVED, t, user="bob", proto_in=P10, address="/queues/q2", **common)
        w.record(K.ROUTED, t, routed_to=["q2"], **common)
        w.record(K.DELIVERED, t, user="alice", proto_in=P10, proto_out=P091, queue="q2", **common)
        w.record(K.SETTLED, t + 0.5, user="alice", queue="q2", outcome=Outcome.ACCEPTED,
                 received_at=t, **common)
    # 3 unroutable, 2 returned (mandatory), 4 expired.
    for i in range(3):
        common = dict(vhost="/", user="alice", gateway_id=gid(), size=10, exchange="ex", routing_key="nowhere")
        w.record(K.RECEIVED, t, proto_in=P091, **common)
        w.record(K.UNROUTABLE, t, **common)
    for i in range(2):
        common = dict(vhost="/", user="alice", gateway_id=gid(), size=10, exchange="ex", routing_key="lost")
        w.record(K.RECEIVED, t, proto_in=P091, **common)
        w.record(K.RETURNED, t, reason="NO_ROUTE", **common)
    for i in range(4):
        common = dict(vhost="/", gateway_id=gid(), size=10)
        w.record(K.RECEIVED, t, user="carol", proto_in=P10, address="/queues/q3", **common)
        w.record(K.ROUTED, t, routed_to=["q3"], **common)
        w.record(K.EXPIRED, t + 30, queue="q3", **common)
    for i in range(2):
        w.record(K.REFUSED, t, vhost="/", user="carol", proto_in=P091, exchange="secret",
                 routing_key="x", reason="ACCESS_REFUSED")
    w.flush(t + 40)
    # leave the last segment open and add a torn line, as a crash would
    with open(os.path.join(directory, sorted(os.listdir(directory))[-1]), "ab") as f:
        f.write(b'{"v":1,"container":"gw-A","ts_us":17000')


def test_counts_pairs_latency_and_outcomes_are_exact(spark, tmp_path):
    ledger = str(tmp_path / "ledger-a")
    single_gateway_ledger(ledger)
    assert any(n.endswith(".open") for n in os.listdir(ledger))
    s = run_report([ledger], str(tmp_path / "out"), spark=spark, progress=quiet())

    assert s.malformed == 1
    assert s.containers == ("gw-A",)
    assert s.by_event == {"received": 34, "routed": 29, "delivered": 27, "settled": 27,
                          "unroutable": 3, "returned": 2, "expired": 4, "refused": 2}
    assert s.events == 128
    assert s.protocol_pairs == {"0-9-1->1.0": 22, "1.0->0-9-1": 5}
    assert s.protocol_pair_bytes == {"0-9-1->1.0": 22 * 100, "1.0->0-9-1": 5 * 1000}
    assert s.settled_by_outcome == {"accepted": 22, "rejected": 3, "released": 2}
    lat = s.latency_us["gw-A"]
    # 27 latencies: 1..20 ms, 2 x 60 ms, 5 x 500 ms
    assert lat["settled"] == 27 and lat["max"] == 500_000
    assert lat["p50"] == 14_000 and lat["p95"] == 500_000 and lat["p99"] == 500_000
    # per AMQP node (queue): q1 has the 22 settlements of 1..20 ms and 2 x 60 ms, q2 the 5 x 500 ms
    assert s.latency_by_queue == {
        ("gw-A", "/", "q1"): {"settled": 22, "p50": 11_000, "p95": 60_000, "p99": 60_000, "max": 60_000},
        ("gw-A", "v2", "q2"): {"settled": 5, "p50": 500_000, "p95": 500_000, "p99": 500_000, "max": 500_000},
    }
    assert s.reconciliation["forwarded"] == 0

    tables = {name: spark.read.parquet(path) for name, path in s.tables.items()}
    traffic_rows = tables["traffic_per_minute"].collect()
    assert {r["container"] for r in traffic_rows} == {"gw-A"}
    traffic = {(r["minute"].minute, r["vhost"], r["node"], r["user"], r["event"], r["protocol_pair"]):
               (r["messages"], r["bytes"]) for r in traffic_rows}
    m0 = time.gmtime(T0).tm_min
    m1 = (m0 + 1) % 60
    # receipts count on their target (exchange + key, or the 1.0 address), deliveries on their queue
    assert traffic == {
        (m0, "/", "/exchanges/ex/k", "alice", "received", "0-9-1->*"): (20, 2000),
        (m0, "/", "/queues/q1", "bob", "delivered", "0-9-1->1.0"): (22, 2200),
        (m1, "v2", "/queues/q2", "bob", "received", "1.0->*"): (5, 5000),
        (m1, "v2", "/queues/q2", "alice", "delivered", "1.0->0-9-1"): (5, 5000),
        # the minute after the 20 publishes holds the rest of alice's 0-9-1 traffic
        (m1, "/", "/exchanges/ex/nowhere", "alice", "received", "0-9-1->*"): (3, 30),
        (m1, "/", "/exchanges/ex/lost", "alice", "received", "0-9-1->*"): (2, 20),
        (m1, "/", "/queues/q3", "carol", "received", "1.0->*"): (4, 40),
    }
    latency_rows = {(r["container"], r["vhost"], r["queue"]): r["settled"]
                    for r in tables["latency_by_queue"].collect()}
    assert latency_rows == {("gw-A", "/", "q1"): 22, ("gw-A", "v2", "q2"): 5}

    outcomes = {(r["target"], r["user"], r["result"]): r["messages"] for r in tables["outcomes"].collect()}
    assert outcomes == {
        ("/queues/q1", "bob", "accepted"): 17, ("/queues/q1", "bob", "rejected"): 3,
        ("/queues/q1", "bob", "released"): 2, ("/queues/q2", "alice", "accepted"): 5,
        ("/exchanges/ex/nowhere", "alice", "unroutable"): 3,
        ("/exchanges/ex/lost", "alice", "returned"): 2,
        ("/queues/q3", None, "expired"): 4,
        ("/exchanges/secret/x", "carol", "refused"): 2,
    }
    talkers = [(r["rank"], r["user"], r["messages"]) for r in tables["top_talkers"].orderBy("rank").collect()]
    assert talkers == [(1, "alice", 25), (2, "bob", 5), (3, "carol", 4)]


def test_html_report_references_its_pngs(spark, tmp_path):
    ledger = str(tmp_path / "ledger-a")
    single_gateway_ledger(ledger)
    out = tmp_path / "out"
    s = run_report([ledger], str(out), spark=spark, progress=quiet(), top=2)
    html = (out / "report.html").read_text()
    images = re.findall(r"<img src='([^']+)'", html)
    assert len(images) >= 8
    for image in images:
        data = (out / image).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n", image
    assert "0-9-1-&gt;1.0" in html and "alice" in html
    for chart in ("latency_by_queue.png", "messages_in_per_amqp_node.png", "messages_out_per_amqp_node.png"):
        assert f"charts/{chart}" in images
    # the per-queue latency table and the per-AMQP-node traffic table
    by_queue = _section(html, "Latency from receive to settle by queue")
    assert "<td>gw-A</td><td>/</td><td>q1</td><td>22</td><td>11,000</td>" in by_queue
    assert "<td>gw-A</td><td>v2</td><td>q2</td><td>5</td><td>500,000</td>" in by_queue
    by_node = _section(html, "Traffic by AMQP node")
    assert ("<td>gw-A</td><td>/</td><td>/queues/q1</td><td>0</td><td>0</td><td>22</td><td>2,200</td>"
            in by_node)
    assert ("<td>gw-A</td><td>/</td><td>/exchanges/ex/k</td><td>20</td><td>2,000</td><td>0</td><td>0</td>"
            in by_node)
    assert s.html_path == f"{out}/report.html"
    assert spark.read.parquet(s.tables["top_talkers"]).count() == 2


def _section(html: str, title: str) -> str:
    """The HTML of one report section, from its heading to the next."""
    start = html.index(f"<h2>{title}</h2>")
    end = html.find("<h2>", start + 1)
    return html[start:end if end >= 0 else len(html)]


def forwarding_ledgers(root) -> tuple[str, str, dict]:
    """gw-A forwards 100 messages to gw-B and 5 to gw-C (no ledger); gw-B loses,
    duplicates and delays chosen ones."""
    a, b = str(root / "gw-a"), str(root / "gw-b")
    wa = LedgerWriter(a, container_id="gw-A")
    wb = LedgerWriter(b, container_id="gw-B")
    lost, duplicated, late = {"a-3", "a-50", "a-77"}, {"a-10", "a-20"}, {"a-40", "a-41"}
    for i in range(100):
        g = f"a-{i}"
        t = T0 + i
        common = dict(vhost="/", gateway_id=g, message_id=f"msg-{i}", size=50)
        wa.record(K.RECEIVED, t, user="alice", proto_in=P091, **common)
        wa.record(K.FORWARDED, t + 0.1, proto_in=P091, proto_out=P10, peer_container="gw-B", **common)
        if i == 5:  # a retry after a reconnect: still one message
            wa.record(K.FORWARDED, t + 5, proto_in=P091, proto_out=P10, peer_container="gw-B", **common)
        if g in lost:
            continue
        delay = 120.0 if g in late else 0.2
        copies = 2 if g in duplicated else 1
        for c in range(copies):
            wb.record(K.RECEIVED, t + delay + c, user="gw-a-link", proto_in=P10, origin_id=g,
                      gateway_id=f"b-{i}-{c}", peer_container="gw-A", vhost="/",
                      message_id=f"msg-{i}", size=50)
    for i in range(5):
        wa.record(K.FORWARDED, T0 + i, proto_out=P10, peer_container="gw-C", gateway_id=f"c-{i}")
    wa.close(T0 + 500)
    wb.close(T0 + 500)
    return a, b, {"lost": lost, "duplicated": duplicated, "late": late}


@pytest.mark.parametrize("match_by", ["gateway-id", "message-id"])
def test_reconciliation_finds_exactly_the_chosen_messages(spark, tmp_path, match_by):
    a, b, chosen = forwarding_ledgers(tmp_path)
    s = run_report([a, b], str(tmp_path / "out"), spark=spark, progress=quiet(),
                   late_after=60, match_by=match_by)
    assert s.containers == ("gw-A", "gw-B")
    # the forwards to gw-C carry no message-id: only gateway ids can match them
    outside = 5 if match_by == "gateway-id" else 0
    assert s.reconciliation == {"forwarded": 100 + outside, "arrived": 97, "lost": 3, "duplicated": 2,
                                "extra_copies": 2, "late": 2, "unverified": outside}
    if match_by == "gateway-id":
        expect = chosen
    else:
        expect = {k: {f"msg-{g[2:]}" for g in v} for k, v in chosen.items()}
    assert set(s.samples["lost"]) == expect["lost"]
    assert set(s.samples["duplicated"]) == expect["duplicated"]
    assert set(s.samples["late"]) == expect["late"]
    assert len(s.samples["unverified"]) == outside
    rows = spark.read.parquet(s.tables["reconciliation"]).filter("status = 'ok'").collect()
    assert len(rows) == 100 - 3 - 2 - 2
    retried = [r for r in rows if r["message_id"] == "msg-5"]
    assert retried[0]["attempts"] == 2 and retried[0]["copies"] == 1


CHILD = r"""
import sys, itertools
from types import SimpleNamespace
from gateway.ledger import Ledger, LedgerWriter
ledger = Ledger(container_id="gw-crash")
w = LedgerWriter(sys.argv[1], container_id="gw-crash", segment_max_bytes=300_000)
now = 1_700_000_000.0
ctx = ledger.context(now, "/", "u", "0-9-1", "c1", 1)
gid = itertools.count(1)
for n in itertools.count():
    for i in range(300):
        m = SimpleNamespace(gateway_id=next(gid), exchange="x", routing_key="k" * (i % 40),
                            message_id=None, correlation_id=None, size=i, headers=None)
        ledger.received(now, ctx, m)  # a received event alone: one line, one event
    now += 0.01
    w.add(ledger.take_lines(10 ** 6))
    w.flush(now)
    if n == 5:
        print("flushing", flush=True)
"""


def test_report_reads_every_complete_record_after_kill_9(spark, tmp_path):
    ledger = tmp_path / "crash"
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(ledger)], stdout=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        assert proc.stdout.readline() == b"flushing\n"
        time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    complete = torn = 0
    for name in os.listdir(ledger):
        data = (ledger / name).read_bytes()
        whole = data.split(b"\n")[:-1]
        complete += sum(not line.startswith(b'["c",') for line in whole)  # (not contexts)
        torn += not data.endswith(b"\n") and data != b""
    s = run_report([str(ledger)], str(tmp_path / "out"), spark=spark, progress=quiet())
    assert s.events == complete > 3000
    assert s.by_event == {"received": complete}
    assert s.malformed == torn <= 1


def test_empty_ledger_gives_an_empty_report(spark, tmp_path):
    (tmp_path / "empty").mkdir()
    s = run_report([str(tmp_path / "empty")], str(tmp_path / "out"), spark=spark, progress=quiet())
    assert (s.events, s.malformed, s.by_event, s.protocol_pairs) == (0, 0, {}, {})
    assert s.reconciliation["forwarded"] == 0
    assert (tmp_path / "out" / "report.html").exists()


def test_missing_ledger_directory_is_refused_before_spark(tmp_path):
    with pytest.raises(ValueError) as info:
        run_report([str(tmp_path / "nope")], str(tmp_path / "out"), spark=object(), progress=quiet())
    assert "nope" in str(info.value)
