"""The report over generated ledgers: exact counts, protocol pairs, latency, reconciliation,
torn lines after kill -9, and the HTML with its charts."""
from __future__ import annotations

import datetime as dt
import io
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from gateway.ledger import EventKind as K
from pipeline.progress import Progress
from pipeline.report import run_report
from tests.support.ledgers import DAY, T0, forwarding_ledgers, multi_day_ledger, one_minute_ledger

pytestmark = [pytest.mark.pipeline, pytest.mark.timeout(600)]


def quiet() -> Progress:
    return Progress(7, stream=io.StringIO())


def test_counts_pairs_latency_and_outcomes_are_exact(spark, single_gateway_report):
    s, out = single_gateway_report
    assert any(n.endswith(".open") for n in os.listdir(out.parent / "ledger-a"))

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
    # the summary's figures: over every settlement, refusals and why, where the rest are
    assert s.latency_overall_us == lat
    assert s.refusals == {("unroutable", None): 3, ("returned", "NO_ROUTE"): 2, ("refused", "ACCESS_REFUSED"): 2}
    assert s.unsettled == {("gw-A", "/", "q3", "expired", "TTL ran out, no dead-letter exchange"): 4}
    assert s.unsettled_by_state == {"expired": 4}
    assert s.crossed_by_vhost == {
        ("gw-A", "/"): {"received": 29, "bytes_in": 2090, "delivered": 22, "forwarded": 0, "refused": 7,
                        "unsettled": 4},
        ("gw-A", "v2"): {"received": 5, "bytes_in": 5000, "delivered": 5, "forwarded": 0, "refused": 0,
                         "unsettled": 0},
    }
    assert s.span_us == (int(T0 * 1e6), int((T0 + 90) * 1e6))  # the last event: q3's expiries

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
    assert talkers == [(1, "alice", 25), (2, "bob", 5)]  # top=2; carol published 4
    pairs = {r["protocol_pair"]: (r["messages"], r["redeliveries"]) for r in tables["protocol_pairs"].collect()}
    assert pairs == {"0-9-1->1.0": (22, 2), "1.0->0-9-1": (5, 0)}
    [unsettled] = tables["unsettled_summary"].collect()
    assert (unsettled["place"], unsettled["state"], unsettled["messages"], unsettled["bytes"]) == \
        ("q3", "expired", 4, 40)
    assert sorted(r["gateway_id"] for r in tables["unsettled_messages"].collect()) == \
        ["a-31", "a-32", "a-33", "a-34"]


def test_html_report_summary_first_in_milliseconds(single_gateway_report):
    s, out = single_gateway_report
    html = (out / "report.html").read_text()
    images = re.findall(r"<img src='([^']+)'", html)
    assert len(images) >= 8
    for image in images:
        data = (out / image).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n", image
    assert "0-9-1-&gt;1.0" in html and "alice" in html
    for chart in ("latency_by_queue.png", "messages_in_per_amqp_node.png", "messages_out_per_amqp_node.png"):
        assert f"charts/{chart}" in images
    # the summary comes first and answers in words and numbers
    assert html.index("<h2>Summary</h2>") < html.index("<h2>Events</h2>") < html.index("<img")
    summary = _section(html, "Summary", until="<h2>")
    for sentence in ("(1 min 30 s), 1 gateway (gw-A).",
                     "Crossed: 34 messages received, 27 deliveries to consumers (2 of them redeliveries)",
                     "over 27 settlements: p50 14.00 ms, p95 500.00 ms, p99 500.00 ms (max 500.00 ms).",
                     "Refused or unroutable: 7 messages (unroutable 3, returned 2, refused 2).",
                     "Not finally settled at the end of the ledger: 4 messages (expired 4).",
                     "one ledger, nothing to reconcile"):
        assert sentence in summary, sentence
    assert "<td>gw-A</td><td>0-9-1-&gt;1.0</td><td>22</td><td>2</td><td>2,200</td>" in summary
    assert "<td>gw-A</td><td>/</td><td>29</td><td>2,090</td><td>22</td><td>0</td><td>7</td><td>4</td>" in summary
    assert "<td>all</td><td>27</td><td>14.00</td><td>500.00</td><td>500.00</td><td>500.00</td>" in summary
    assert ("<td>gw-A</td><td>/</td><td>unroutable</td><td>no queue bound for its routing key</td>"
            "<td>/exchanges/ex/nowhere</td><td>3</td>") in summary
    assert ("<td>gw-A</td><td>/</td><td>expired</td><td>q3</td><td>TTL ran out, no dead-letter exchange</td>"
            "<td>4</td><td>40</td><td>2023-11-14 22:14:20.000</td>") in summary
    assert "<td>expired</td><td>q3</td><td>gw-A</td><td>a-31</td>" in summary  # a sample
    # latency in milliseconds throughout: the per-queue table too
    by_queue = _section(html, "Latency from receive to settle by queue")
    assert "<th>p50 ms</th>" in by_queue and "p50_us" not in html and "microseconds" not in html
    assert "<td>gw-A</td><td>/</td><td>q1</td><td>22</td><td>11.00</td><td>60.00</td>" in by_queue
    assert "<td>gw-A</td><td>v2</td><td>q2</td><td>5</td><td>500.00</td>" in by_queue
    by_node = _section(html, "Traffic by AMQP node")
    assert ("<td>gw-A</td><td>/</td><td>/queues/q1</td><td>0</td><td>0</td><td>22</td><td>2,200</td>"
            in by_node)
    assert ("<td>gw-A</td><td>/</td><td>/exchanges/ex/k</td><td>20</td><td>2,000</td><td>0</td><td>0</td>"
            in by_node)
    assert s.html_path == f"{out}/report.html"


def _section(html: str, title: str, until: str = "<h") -> str:
    """The HTML of one report section, from its heading to the next (``until``)."""
    start = html.index(f">{title}</h")
    end = html.find(until, start + len(title) + 5)
    return html[start:end if end >= 0 else len(html)]


@pytest.mark.parametrize("match_by", ["gateway-id", "message-id"])
def test_reconciliation_finds_exactly_the_chosen_messages(spark, tmp_path, match_by):
    a, b, chosen = forwarding_ledgers(tmp_path)
    s = run_report([a, b], str(tmp_path / "out"), spark=spark, progress=quiet(),
                   late_after=60, match_by=match_by)
    assert s.containers == ("gw-A", "gw-B")
    # the forwards to gw-C carry no message-id: only gateway ids can match them
    outside = 5 if match_by == "gateway-id" else 0
    # u-1 "from gw-A" that gw-A never forwarded is unexpected; a-60 "from gw-X" is not a-60's
    # arrival from gw-A (matched by origin gateway id and the gateway it came from)
    assert s.reconciliation == {"forwarded": 100 + outside, "arrived": 97, "lost": 3, "dead_lettered": 0,
                                "still_queued": 0, "duplicated": 2, "extra_copies": 2, "late": 2,
                                "unverified": outside, "unexpected": 1}
    if match_by == "gateway-id":
        expect = chosen
    else:
        expect = {k: {f"msg-{g[2:]}" for g in v} for k, v in chosen.items()}
    assert set(s.samples["lost"]) == expect["lost"]
    assert set(s.samples["duplicated"]) == expect["duplicated"]
    assert set(s.samples["late"]) == expect["late"]
    assert len(s.samples["unverified"]) == outside
    assert s.samples["unexpected"] == ["u-1" if match_by == "gateway-id" else "msg-u1"]
    rows = spark.read.parquet(s.tables["reconciliation"]).filter("status = 'ok'").collect()
    assert len(rows) == 100 - 3 - 2 - 2
    retried = [r for r in rows if r["message_id"] == "msg-5"]
    assert retried[0]["attempts"] == 2 and retried[0]["copies"] == 1
    assert [r["copies"] for r in rows if r["message_id"] == "msg-60"] == [1]
    # the rest of the summary, per gateway: gw-A's forwards (every attempt) and receipts,
    # gw-B's arrivals; gw-B settled every forward to it, gw-C none
    assert s.crossed_by_vhost[("gw-A", "/")] == {"received": 100, "bytes_in": 5000, "delivered": 0,
                                                 "forwarded": 101, "refused": 0, "unsettled": 0}
    assert s.crossed_by_vhost[("gw-A", None)]["forwarded"] == 5
    assert s.crossed_by_vhost[("gw-B", "/")]["received"] == 97 + 2 + 2
    assert s.unsettled_by_state == {"still queued": 5}
    assert s.unsettled == {("gw-A", None, "-> gw-C", "still queued", "not settled by the peer"): 5}
    assert s.final_by_state["forwarded"] == 100
    # the summary says it, with samples keyed by origin gateway id and source gateway
    html = (tmp_path / "out" / "report.html").read_text()
    summary = _section(html, "Summary", until="<h2>")
    assert ("Across gateways: 105 messages forwarded, 3 lost, 0 dead-lettered at the source, 0 still "
            "queued at the source, 2 duplicated (2 extra copies), 2 late (more than 60 s), 5 unverified"
            if match_by == "gateway-id" else
            "Across gateways: 100 messages forwarded, 3 lost, 0 dead-lettered at the source, 0 still "
            "queued at the source, 2 duplicated (2 extra copies), 2 late") in summary
    assert ("<td>gw-A</td><td>gw-B</td><td>100</td><td>97</td><td>3</td><td>0</td><td>0</td><td>2</td>"
            "<td>2</td><td>2</td>") in summary
    lost = _section(summary, "Samples: lost")
    origin, key = ("gw-A", "a-50") if match_by == "gateway-id" else ("", "msg-50")
    assert f"<td>gw-A</td><td>gw-B</td><td>{origin}</td><td>{key}</td><td>msg-50</td><td>2023-11-14 22:14:10.100</td><td></td><td>0</td>" in lost
    late = _section(summary, "Samples: late")
    assert f"<td>{'a-40' if match_by == 'gateway-id' else 'msg-40'}</td>" in late and "<td>119.90</td>" in late
    assert "<td>2</td>" in _section(summary, "Samples: duplicated")


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
        deadline = time.monotonic() + 30
        while len(os.listdir(ledger)) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)  # killed while writing, once two segments are closed
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


def _chart_facts(name: str, figure) -> dict:
    """What a chart shows, read back from its matplotlib figure (axes 0)."""
    import matplotlib.dates as mdates

    ax = figure.axes[0]
    return {
        "xlim": tuple(d.timestamp() for d in mdates.num2date(ax.get_xlim())),
        "xticks": [d.timestamp() for d in mdates.num2date(ax.get_xticks())],
        "xticklabels": [t.get_text() for t in ax.get_xticklabels()],
        "offset": ax.xaxis.get_major_formatter().get_offset(),
        "xlabel": ax.get_xlabel(), "ylabel": ax.get_ylabel(), "title": ax.get_title(),
        "lines": {line.get_label(): (len(line.get_xdata()), [float(y) for y in line.get_ydata()])
                  for line in ax.lines},
    }


@pytest.mark.parametrize("span", ["one minute", "three days"])
def test_time_axis_fits_the_ledger_span_read_back_from_the_figures(spark, tmp_path, span):
    ledger = str(tmp_path / "ledger")
    facts = {}
    known = one_minute_ledger(ledger) if span == "one minute" else multi_day_ledger(ledger)
    s = run_report([ledger], str(tmp_path / "out"), spark=spark, progress=quiet(), top_nodes=3,
                   figure_hook=lambda name, figure: facts.setdefault(name, _chart_facts(name, figure)))
    b = s.buckets
    time_charts = [name for name, f in facts.items() if f["xlabel"] == "time (UTC)"]
    assert len(time_charts) == 6
    # one axis for every time chart: from the first event's bucket to the end of the last one's
    assert b.start <= known["first"] < b.start + b.seconds
    assert b.start + (b.count - 1) * b.seconds <= known["last"] < b.start + b.count * b.seconds
    if span == "one minute":
        assert (b.seconds, b.count, b.label) == (1, 60, "second")
    else:
        assert (b.seconds, b.count, b.label) == (1800, 143, "30 min")
    for name in time_charts:
        f = facts[name]
        assert f["xlim"] == pytest.approx((b.start, b.start + b.count * b.seconds)), name
        ticks = [t for t in f["xticks"] if f["xlim"][0] <= t <= f["xlim"][1]]
        labels = [label for t, label in zip(f["xticks"], f["xticklabels"]) if f["xlim"][0] <= t <= f["xlim"][1]]
        assert len(ticks) >= 3, (name, f)
        # each label names its tick's time (seconds, minute, hour or day: ConciseDateFormatter
        # says the rest once, in the offset), and no two neighbours say the same
        for t, label in zip(ticks, labels):
            when = dt.datetime.fromtimestamp(t, dt.timezone.utc)
            assert label in {when.strftime(f) for f in ("%S", "%H:%M", "%b-%d", "%H:%M:%S")}, (name, when, label)
        assert all(a != b for a, b in zip(labels, labels[1:])), (name, labels)
        spacing = min(b2 - b1 for b1, b2 in zip(ticks, ticks[1:]))
        if span == "one minute":
            assert 5 <= spacing <= 20, (name, ticks)
            assert f["offset"].startswith("2023-Nov-14 22:1")  # date and minute said once, ticks are seconds
        else:
            assert 6 * 3600 <= spacing <= DAY, (name, ticks)
        unit = "bytes" if name.startswith("bytes") else "messages"
        assert f["ylabel"] == f"{unit} per {b.label}"
        # zero-filled: every series has a value for every bucket (+ the step's closing edge)
        assert f["lines"] and all(n == b.count + 1 for n, _ys in f["lines"].values()), name
    lines = facts["messages_in_per_amqp_node.png"]["lines"]
    if span == "one minute":
        # 30 one-off keys folded into the exchange's "other" node; top_nodes=3 keys keep their names
        assert list(lines) == ["/exchanges/events/orders", "/exchanges/events/* (other keys)",
                               "/exchanges/events/audit", "/exchanges/events/tmp-0"]
        orders = lines["/exchanges/events/orders"][1][:-1]
        assert orders == [1.0] * 60
        other = lines["/exchanges/events/* (other keys)"][1][:-1]
        assert other[30] == 29.0 and other.count(0.0) == 59
        html = (tmp_path / "out" / "report.html").read_text()
        nodes = _section(html, "Traffic by AMQP node")
        assert "<td>gw-M</td><td>/</td><td>/exchanges/events/* (other keys)</td><td>29</td>" in nodes
        assert nodes.count("tmp-") == 1
    else:
        [(_n, values)] = lines.values()
        values = values[:-1]
        assert sum(values) == known["messages"] == 48
        day2 = [v for i, v in enumerate(values) if T0 + DAY <= b.start + i * b.seconds < T0 + 2 * DAY - 1800]
        assert len(day2) >= 46 and set(day2) == {0.0}


def test_missing_ledger_directory_is_refused_before_spark(tmp_path):
    with pytest.raises(ValueError) as info:
        run_report([str(tmp_path / "nope")], str(tmp_path / "out"), spark=object(), progress=quiet())
    assert "nope" in str(info.value)
