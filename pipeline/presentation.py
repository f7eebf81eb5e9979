"""From the written tables to the summary numbers, the PNG charts and ``report.html``.

Only small aggregates reach the driver here: per-minute series per vhost, gateway, AMQP
node, user and pair (one point per minute and series, the busiest MAX_SERIES series),
per-pair, per-gateway, per-queue, per-AMQP-node and per-target (top rows) and per-user
totals.

Words: a *gateway* is a ledger's ``container`` (the tables' ``container`` column); an
*AMQP node* is a queue, an exchange with its routing key or a 1.0 address (``node``,
``queue`` and ``target`` columns).
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
from pipeline.tables import OUT_EVENTS

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
    pair_bytes = {r["protocol_pair"]: int(r["b"] or 0) for r in pairs_rows}
    latency_rows = loaded["latency"].orderBy("container").collect()
    latency = {r["container"] or "?": _latency_figures(r) for r in latency_rows}
    queue_rows = loaded["latency_by_queue"].orderBy(
        F.desc("settled"), "container", "vhost", "queue").collect()
    by_queue = {(r["container"], r["vhost"], r["queue"]): _latency_figures(r) for r in queue_rows}
    traffic = loaded["traffic_per_minute"]
    is_in = F.col("event") == "received"
    node_rows = (traffic.groupBy("container", "vhost", "node")
                 .agg(F.sum(F.when(is_in, F.col("messages")).otherwise(0)).alias("in_m"),
                      F.sum(F.when(is_in, F.col("bytes")).otherwise(0)).alias("in_b"),
                      F.sum(F.when(~is_in, F.col("messages")).otherwise(0)).alias("out_m"),
                      F.sum(F.when(~is_in, F.col("bytes")).otherwise(0)).alias("out_b"))
                 .orderBy(F.desc(F.col("in_m") + F.col("out_m")), "container", "vhost", "node")
                 .limit(MAX_ROWS).collect())
    recon_rows = loaded["reconciliation_summary"].orderBy("source", "destination").collect()
    recon_keys = ("forwarded", "arrived", "lost", "duplicated", "extra_copies", "late", "unverified")
    recon = {k: int(sum(r[k] for r in recon_rows)) for k in recon_keys}
    samples = {s: sorted(r["key"] for r in sample_rows.get(s, [])) for s in STATUSES}

    line_chart(os.path.join(charts, "messages_in_per_vhost.png"), "Messages received per minute by vhost",
               "messages", _series(traffic, "vhost", "messages", ("received",)))
    line_chart(os.path.join(charts, "bytes_in_per_gateway.png"), "Bytes received per minute by gateway",
               "bytes", _series(traffic, "container", "bytes", ("received",)))
    line_chart(os.path.join(charts, "messages_in_per_amqp_node.png"),
               "Messages received per minute by AMQP node (publish target)", "messages",
               _series(traffic, "node", "messages", ("received",)))
    line_chart(os.path.join(charts, "messages_out_per_amqp_node.png"),
               "Messages delivered/forwarded per minute by AMQP node (queue)", "messages",
               _series(traffic, "node", "messages", OUT_EVENTS))
    line_chart(os.path.join(charts, "messages_out_per_pair.png"),
               "Messages delivered/forwarded per minute by protocol pair", "messages",
               _series(traffic, "protocol_pair", "messages", ("delivered", "forwarded")))
    line_chart(os.path.join(charts, "messages_in_per_user.png"), "Messages received per minute by user",
               "messages", _series(traffic, "user", "messages", ("received",)))
    bar_chart(os.path.join(charts, "protocol_pairs.png"), "Deliveries and forwards by protocol pair",
              "messages", list(pairs), list(pairs.values()))
    nodes = list(latency)
    grouped_bar_chart(os.path.join(charts, "latency.png"), "Latency receive -> settle by gateway",
                      "milliseconds", nodes,
                      {p: [(latency[n][p] or 0) / 1000 for n in nodes] for p in ("p50", "p95", "p99")})
    shown_queues = list(by_queue)[:MAX_ROWS]
    grouped_bar_chart(os.path.join(charts, "latency_by_queue.png"),
                      "Latency receive -> settle by queue (most settlements)", "milliseconds",
                      [_queue_label(*k) for k in shown_queues],
                      {p: [(by_queue[k][p] or 0) / 1000 for k in shown_queues] for p in ("p50", "p95", "p99")})
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
        Section("Events", f"{sum(by_event.values()):,} events from {len(containers)} gateway(s) "
                f"({', '.join(containers)}); {malformed:,} malformed line(s) skipped "
                "(a crash can leave one torn last line per open segment).",
                headers=("event", "events"), rows=sorted(by_event.items())),
        Section("Messages received per minute by vhost", image="charts/messages_in_per_vhost.png"),
        Section("Bytes received per minute by gateway", image="charts/bytes_in_per_gateway.png"),
        Section("Messages received per minute by AMQP node",
                "The target of each publish: the 1.0 address as given, else /exchanges/X/RK "
                "(0-9-1; the default exchange is the empty name).",
                image="charts/messages_in_per_amqp_node.png"),
        Section("Messages out per minute by AMQP node", "The queue each delivery left (/queues/Q).",
                image="charts/messages_out_per_amqp_node.png"),
        Section("Traffic by AMQP node", "Messages and bytes in (received) and out (delivered, "
                "every attempt, and forwarded) per gateway, vhost and AMQP node, busiest first.",
                headers=("gateway", "vhost", "AMQP node", "messages in", "bytes in", "messages out",
                         "bytes out"),
                rows=[(r["container"], r["vhost"], r["node"], r["in_m"], r["in_b"], r["out_m"], r["out_b"])
                      for r in node_rows]),
        Section("Messages received per minute by user", image="charts/messages_in_per_user.png"),
        Section("Messages out per minute by protocol pair", image="charts/messages_out_per_pair.png"),
        Section("Protocol pairs", "Deliveries (every attempt) and forwards, by protocol in -> out.",
                image="charts/protocol_pairs.png", headers=("pair", "messages", "bytes"),
                rows=[(r["protocol_pair"], r["m"], r["b"]) for r in pairs_rows]),
        Section("Latency from receive to settle by gateway", "Per gateway, microseconds "
                "(approximate percentiles, rank error under 0.01 %).", image="charts/latency.png",
                headers=("gateway", "settled", "p50", "p95", "p99", "max"),
                rows=[(n, v["settled"], v["p50"], v["p95"], v["p99"], v["max"]) for n, v in latency.items()]),
        Section("Latency from receive to settle by queue", "Per AMQP node settled on (gateway, "
                "vhost, queue), microseconds, most settlements first.", image="charts/latency_by_queue.png",
                headers=("gateway", "vhost", "queue", "settled", "p50", "p95", "p99", "max"),
                rows=[(*k, v["settled"], v["p50"], v["p95"], v["p99"], v["max"])
                      for k, v in list(by_queue.items())[:MAX_ROWS]]),
        Section("Outcomes and refusals by address", image="charts/outcomes.png",
                headers=("target", "result", "messages"),
                rows=[(r["target"], r["result"], r["m"]) for r in outcome_rows]),
        Section("Outcomes and refusals by user", headers=("user", "result", "messages"),
                rows=[(r["user"], r["result"], r["m"]) for r in by_user_rows]),
        Section("Top talkers", image="charts/top_talkers.png",
                headers=("rank", "gateway", "vhost", "user", "messages", "bytes", "connections"),
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
            "protocol_pairs": pairs, "protocol_pair_bytes": pair_bytes, "latency_us": latency,
            "latency_by_queue": by_queue, "reconciliation": recon, "samples": samples}


def _latency_figures(row: Any) -> dict[str, Any]:
    return {"settled": row["settled"], "p50": row["p50_us"], "p95": row["p95_us"],
            "p99": row["p99_us"], "max": row["max_us"]}


def _queue_label(container: Any, vhost: Any, queue: Any) -> str:
    return f"{queue or '?'} @ {vhost or '?'} on {container or '?'}"
