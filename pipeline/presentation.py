"""From the written tables to the summary numbers, the PNG charts and ``report.html``.

Only small aggregates reach the driver here: per-minute series per vhost/node (one point
per minute and series), per-pair, per-node, per-target (top rows) and per-user totals.
"""
from __future__ import annotations

import collections
import datetime as dt
import os
from typing import Any, Mapping, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline.charts import bar_chart, grouped_bar_chart, line_chart
from pipeline.html_report import Section, render_html

__all__ = ["collect_and_render"]

MAX_SERIES = 8      # lines per time chart
MAX_ROWS = 25       # rows per HTML table (the Parquet tables have everything)
STATUSES = ("lost", "duplicated", "late", "duplicated+late", "unverified")


def _series(traffic: DataFrame, by: str, value: str, events: Sequence[str]) -> dict[str, list]:
    rows = (traffic.filter(F.col("event").isin(*events))
            .groupBy("minute", F.coalesce(F.col(by), F.lit("?")).alias("k"))
            .agg(F.sum(value).alias("v")).collect())
    totals: collections.Counter = collections.Counter()
    for r in rows:
        totals[r["k"]] += r["v"]
    keep = {k for k, _ in totals.most_common(MAX_SERIES)}
    out: dict[str, list] = collections.defaultdict(list)
    for r in rows:
        if r["k"] in keep:
            out[r["k"]].append((r["minute"], float(r["v"])))
    return dict(sorted(out.items()))


def _ts(us: Any) -> str:
    if us is None:
        return ""
    return dt.datetime.fromtimestamp(us / 1_000_000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")


def collect_and_render(loaded: Mapping[str, DataFrame], sample_rows: Mapping[str, list],
                       out_dir: str, *, malformed: int, containers: Sequence[str],
                       late_after: float, ledger_dirs: Sequence[str]) -> dict[str, Any]:
    """Write ``charts/*.png`` and ``report.html`` under ``out_dir`` (local); return the
    ReportSummary fields other than paths, containers and ``malformed``."""
    charts = os.path.join(out_dir, "charts")
    counts = loaded["event_counts"].collect()
    by_event: collections.Counter = collections.Counter()
    settled: collections.Counter = collections.Counter()
    forward_settled: collections.Counter = collections.Counter()
    for r in counts:
        by_event[r["event"]] += r["events"]
        if r["event"] == "settled":
            settled[r["outcome"] or "unknown"] += r["events"]
        elif r["event"] == "forward_settled":
            forward_settled[r["outcome"] or "unknown"] += r["events"]
    pairs_rows = loaded["protocol_pairs"].groupBy("protocol_pair") \
        .agg(F.sum("messages").alias("m"), F.sum("bytes").alias("b")).orderBy("protocol_pair").collect()
    pairs = {r["protocol_pair"]: int(r["m"]) for r in pairs_rows}
    latency_rows = loaded["latency"].orderBy("container").collect()
    latency = {r["container"] or "?": {"settled": r["settled"], "p50": r["p50_us"], "p95": r["p95_us"],
                                       "p99": r["p99_us"], "max": r["max_us"]} for r in latency_rows}
    recon_rows = loaded["reconciliation_summary"].orderBy("source", "destination").collect()
    recon_keys = ("forwarded", "arrived", "lost", "duplicated", "extra_copies", "late", "unverified")
    recon = {k: int(sum(r[k] for r in recon_rows)) for k in recon_keys}
    samples = {s: sorted(r["key"] for r in sample_rows.get(s, [])) for s in STATUSES}

    traffic = loaded["traffic_per_minute"]
    line_chart(os.path.join(charts, "messages_in_per_vhost.png"), "Messages received per minute by vhost",
               "messages", _series(traffic, "vhost", "messages", ("received",)))
    line_chart(os.path.join(charts, "bytes_in_per_node.png"), "Bytes received per minute by node",
               "bytes", _series(traffic, "container", "bytes", ("received",)))
    line_chart(os.path.join(charts, "messages_out_per_pair.png"),
               "Messages delivered/forwarded per minute by protocol pair", "messages",
               _series(traffic, "protocol_pair", "messages", ("delivered", "forwarded")))
    line_chart(os.path.join(charts, "messages_in_per_user.png"), "Messages received per minute by user",
               "messages", _series(traffic, "user", "messages", ("received",)))
    bar_chart(os.path.join(charts, "protocol_pairs.png"), "Deliveries and forwards by protocol pair",
              "messages", list(pairs), list(pairs.values()))
    nodes = list(latency)
    grouped_bar_chart(os.path.join(charts, "latency.png"), "Latency receive -> settle by node",
                      "milliseconds", nodes,
                      {p: [(latency[n][p] or 0) / 1000 for n in nodes] for p in ("p50", "p95", "p99")})
    outcome_rows = (loaded["outcomes"].groupBy("target", "result").agg(F.sum("messages").alias("m"))
                    .orderBy(F.desc("m"), "target", "result").limit(MAX_ROWS).collect())
    bar_chart(os.path.join(charts, "outcomes.png"), "Outcomes and refusals by address (top)",
              "messages", [f"{r['target'] or '?'}  {r['result']}" for r in outcome_rows],
              [r["m"] for r in outcome_rows])
    talkers = loaded["top_talkers"].orderBy("rank").collect()
    bar_chart(os.path.join(charts, "top_talkers.png"), "Top talkers (messages published)", "messages",
              [f"{r['user'] or '?'} @ {r['vhost'] or '?'} on {r['container'] or '?'}" for r in talkers],
              [r["messages"] for r in talkers])
    grouped_bar_chart(os.path.join(charts, "reconciliation.png"), "Reconciliation by gateway pair",
                      "messages", [f"{r['source']} -> {r['destination']}" for r in recon_rows],
                      {k: [r[k] for r in recon_rows] for k in ("forwarded", "lost", "duplicated", "late")})

    by_user_rows = (loaded["outcomes"].groupBy("user", "result").agg(F.sum("messages").alias("m"))
                    .orderBy(F.desc("m"), "user", "result").limit(MAX_ROWS).collect())
    sections = [
        Section("Events", f"{sum(by_event.values()):,} events from {len(containers)} node(s) "
                f"({', '.join(containers)}); {malformed:,} malformed line(s) skipped "
                "(a crash can leave one torn last line per open segment).",
                headers=("event", "events"), rows=sorted(by_event.items())),
        Section("Messages received per minute by vhost", image="charts/messages_in_per_vhost.png"),
        Section("Bytes received per minute by node", image="charts/bytes_in_per_node.png"),
        Section("Messages received per minute by user", image="charts/messages_in_per_user.png"),
        Section("Messages out per minute by protocol pair", image="charts/messages_out_per_pair.png"),
        Section("Protocol pairs", "Deliveries (every attempt) and forwards, by protocol in -> out.",
                image="charts/protocol_pairs.png", headers=("pair", "messages", "bytes"),
                rows=[(r["protocol_pair"], r["m"], r["b"]) for r in pairs_rows]),
        Section("Latency from receive to settle", "Per node, microseconds (approximate "
                "percentiles, rank error under 0.01 %).", image="charts/latency.png",
                headers=("node", "settled", "p50", "p95", "p99", "max"),
                rows=[(n, v["settled"], v["p50"], v["p95"], v["p99"], v["max"]) for n, v in latency.items()]),
        Section("Outcomes and refusals by address", image="charts/outcomes.png",
                headers=("target", "result", "messages"),
                rows=[(r["target"], r["result"], r["m"]) for r in outcome_rows]),
        Section("Outcomes and refusals by user", headers=("user", "result", "messages"),
                rows=[(r["user"], r["result"], r["m"]) for r in by_user_rows]),
        Section("Top talkers", image="charts/top_talkers.png",
                headers=("rank", "node", "vhost", "user", "messages", "bytes", "connections"),
                rows=[(r["rank"], r["container"], r["vhost"], r["user"], r["messages"], r["bytes"],
                       r["connections"]) for r in talkers]),
        Section("Reconciliation", f"Forwards matched to arrivals; late means more than "
                f"{late_after:g} s. Totals: " + ", ".join(f"{k} {v:,}" for k, v in recon.items()),
                image="charts/reconciliation.png", headers=("source", "destination") + recon_keys,
                rows=[tuple(r[k] for k in ("source", "destination") + recon_keys) for r in recon_rows]),
    ]
    for status in STATUSES:
        rows = sample_rows.get(status, [])
        if rows:
            sections.append(Section(
                f"Samples: {status}", headers=("source", "destination", "key", "message id", "forwarded at",
                                               "first arrival", "copies", "delay s"),
                rows=[(r["source"], r["destination"], r["key"], r["message_id"], _ts(r["sent_us"]),
                       _ts(r["first_received_us"]), r["copies"],
                       None if r["delay_us"] is None else r["delay_us"] / 1e6) for r in rows]))
    html_text = render_html("Gateway ledger report", "Ledgers: " + ", ".join(ledger_dirs), sections)
    with open(os.path.join(out_dir, "report.html"), "w", encoding="utf-8") as f:
        f.write(html_text)
    return {"events": int(sum(by_event.values())), "by_event": dict(by_event),
            "settled_by_outcome": dict(settled), "forward_settled_by_outcome": dict(forward_settled),
            "protocol_pairs": pairs, "latency_us": latency, "reconciliation": recon, "samples": samples}
