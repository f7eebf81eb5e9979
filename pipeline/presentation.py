"""From the written tables to the summary numbers, the PNG charts and ``report.html``.

Only small aggregates reach the driver here: per-bucket series (the busiest MAX_SERIES - 1
series of a chart and "all others", over the report's one time axis), per-pair,
per-gateway, per-queue, per-AMQP-node-group and per-target (top rows) and per-user
totals. The summary at the top comes from ``summary``.

Words: a *gateway* is a ledger's ``container`` (the tables' ``container`` column); an
*AMQP node* is a queue, an exchange with its routing key or a 1.0 address (``node``,
``queue`` and ``target`` columns); a *node group* is a node, or the "other" node its
exchange's less busy routing keys (or the less busy queues) are folded into.
"""
from __future__ import annotations

import collections
import os
from typing import Any, Mapping, Optional, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline.charts import Buckets, FigureHook, bar_chart, grouped_bar_chart, time_chart
from pipeline.formats import ms, utc_text
from pipeline.html_report import Section, render_html
from pipeline.summary import latency_figures, summary_sections
from pipeline.tables import OUT_EVENTS, fold_nodes

__all__ = ["MAX_ROWS", "MAX_SERIES", "OTHERS", "collect_and_render"]

MAX_SERIES = 8      # lines per time chart, "all others" included
MAX_ROWS = 25       # rows per HTML table (the Parquet tables have everything)
OTHERS = "all others"
_PERCENTILES = ("p50", "p95", "p99")


def _series(timeline: DataFrame, by: str, value: str, events: Sequence[str]) -> dict[str, dict[int, float]]:
    """label -> {bucket start: value} for the busiest series of ``by``, the rest summed
    as OTHERS. One query: buckets x distinct values of ``by`` (node groups are folded
    already) come to the driver."""
    points = (timeline.filter(F.col("event").isin(*events))
              .groupBy("bucket_start", F.coalesce(F.col(by).cast("string"), F.lit("?")).alias("k"))
              .agg(F.sum(value).alias("v")).collect())
    totals: collections.Counter = collections.Counter()
    for r in points:
        totals[r["k"]] += r["v"]
    ranked = [k for k, _ in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))]
    keep = ranked if len(ranked) <= MAX_SERIES else ranked[:MAX_SERIES - 1]
    out: dict[str, dict[int, float]] = {k: {} for k in keep}
    for r in points:
        series = out.setdefault(r["k"] if r["k"] in out else OTHERS, {})
        series[r["bucket_start"]] = series.get(r["bucket_start"], 0.0) + float(r["v"])
    return out


def _node_rows(traffic: DataFrame, ranks: DataFrame) -> list[tuple]:
    """Traffic in and out per gateway, vhost and node group, busiest first; beyond MAX_ROWS
    one more row sums the rest."""
    is_in = F.col("event") == "received"
    grouped = (fold_nodes(traffic, ranks).groupBy("container", "vhost", "node_group")
               .agg(F.sum(F.when(is_in, F.col("messages")).otherwise(0)).alias("in_m"),
                    F.sum(F.when(is_in, F.col("bytes")).otherwise(0)).alias("in_b"),
                    F.sum(F.when(~is_in, F.col("messages")).otherwise(0)).alias("out_m"),
                    F.sum(F.when(~is_in, F.col("bytes")).otherwise(0)).alias("out_b"))
               .orderBy(F.desc(F.col("in_m") + F.col("out_m")), "container", "vhost", "node_group")
               .collect())
    rows = [(r["container"], r["vhost"], r["node_group"], r["in_m"], r["in_b"], r["out_m"], r["out_b"])
            for r in grouped]
    if len(rows) <= MAX_ROWS:
        return rows
    rest = rows[MAX_ROWS - 1:]
    return rows[:MAX_ROWS - 1] + [("", "", f"({len(rest)} more node groups)",
                                   *(sum(r[i] for r in rest) for i in range(3, 7)))]


def collect_and_render(rows: Mapping[str, Sequence[Any]], loaded: Mapping[str, DataFrame],
                       recon_samples: Mapping[str, list], unsettled_samples: Sequence[Any],
                       out_dir: str, *, buckets: Buckets,
                       malformed: int, containers: Sequence[str], late_after: float,
                       top_nodes: int, ledger_dirs: Sequence[str],
                       figure_hook: Optional[FigureHook] = None) -> dict[str, Any]:
    """Write ``charts/*.png`` and ``report.html`` under ``out_dir`` (local); return the
    ReportSummary fields other than paths, containers and ``malformed``. ``rows``: the
    small tables' rows (``report.COLLECTED``), ``loaded``: every table as a DataFrame."""
    charts = os.path.join(out_dir, "charts")
    summary, numbers = summary_sections(rows, loaded, unsettled_samples, recon_samples,
                                        containers=containers, late_after=late_after)
    counts = rows["event_counts"]
    by_event: collections.Counter = collections.Counter()
    settled: collections.Counter = collections.Counter()
    forward_settled: collections.Counter = collections.Counter()
    for r in counts:
        by_event[r["event"]] += r["events"]
        if r["event"] == "settled":
            settled[r["outcome"] or "unknown"] += r["events"]
        elif r["event"] == "forward_settled":
            forward_settled[r["outcome"] or "unknown"] += r["events"]
    pair_totals: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0, 0])
    for r in rows["protocol_pairs"]:
        for i, column in enumerate(("messages", "redeliveries", "bytes")):
            pair_totals[r["protocol_pair"]][i] += int(r[column] or 0)
    pairs_rows = sorted(pair_totals.items())
    pairs = {pair: m for pair, (m, _r, _b) in pairs_rows}
    pair_bytes = {pair: b for pair, (_m, _r, b) in pairs_rows}
    latency = {r["container"] or "?": latency_figures(r)
               for r in sorted(rows["latency"], key=lambda r: r["container"] or "")}
    queue_rows = sorted(rows["latency_by_queue"], key=lambda r: (
        -r["settled"], r["container"] or "", r["vhost"] or "", r["queue"] or ""))
    by_queue = {(r["container"], r["vhost"], r["queue"]): latency_figures(r) for r in queue_rows}
    node_rows = _node_rows(loaded["traffic_per_minute"], loaded["node_ranks"])
    recon_rows = sorted(rows["reconciliation_summary"], key=lambda r: (r["source"] or "", r["destination"] or ""))

    timeline = loaded["traffic_timeline"]
    per = buckets.label
    path = lambda name: os.path.join(charts, name)  # noqa: E731
    time_chart(path("messages_in_per_vhost.png"), f"Messages received per {per} by vhost", "messages",
               buckets, _series(timeline, "vhost", "messages", ("received",)), hook=figure_hook)
    time_chart(path("bytes_in_per_gateway.png"), f"Bytes received per {per} by gateway", "bytes",
               buckets, _series(timeline, "container", "bytes", ("received",)), hook=figure_hook)
    time_chart(path("messages_in_per_amqp_node.png"),
               f"Messages received per {per} by AMQP node (exchange and routing key)", "messages",
               buckets, _series(timeline, "node_group", "messages", ("received",)), hook=figure_hook)
    time_chart(path("messages_out_per_amqp_node.png"),
               f"Messages delivered or forwarded per {per} by AMQP node (queue)", "messages",
               buckets, _series(timeline, "node_group", "messages", OUT_EVENTS), hook=figure_hook)
    time_chart(path("messages_out_per_pair.png"),
               f"Messages delivered or forwarded per {per} by protocol pair", "messages",
               buckets, _series(timeline, "protocol_pair", "messages", OUT_EVENTS), hook=figure_hook)
    time_chart(path("messages_in_per_user.png"), f"Messages received per {per} by user", "messages",
               buckets, _series(timeline, "user", "messages", ("received",)), hook=figure_hook)
    bar_chart(path("protocol_pairs.png"), "Deliveries and forwards by protocol pair", "messages",
              "protocol pair (in->out)", list(pairs), list(pairs.values()), hook=figure_hook)
    nodes = list(latency)
    grouped_bar_chart(path("latency.png"), "Latency receive -> settle by gateway", "milliseconds",
                      "gateway", nodes, {p: [ms(latency[n][p]) or 0 for n in nodes] for p in _PERCENTILES},
                      hook=figure_hook)
    shown_queues = list(by_queue)[:MAX_ROWS]
    grouped_bar_chart(path("latency_by_queue.png"),
                      "Latency receive -> settle by queue (most settlements)", "milliseconds",
                      "queue @ vhost on gateway", [_queue_label(*k) for k in shown_queues],
                      {p: [ms(by_queue[k][p]) or 0 for k in shown_queues] for p in _PERCENTILES},
                      hook=figure_hook)
    outcome_rows = (loaded["outcomes"].groupBy("target", "result").agg(F.sum("messages").alias("m"))
                    .orderBy(F.desc("m"), "target", "result").limit(MAX_ROWS).collect())
    bar_chart(path("outcomes.png"), "Outcomes and refusals by address (top)", "messages",
              "address and result", [f"{r['target'] or '?'}  {r['result']}" for r in outcome_rows],
              [r["m"] for r in outcome_rows], hook=figure_hook)
    talkers = sorted(rows["top_talkers"], key=lambda r: r["rank"])
    bar_chart(path("top_talkers.png"), "Top talkers (messages published)", "messages",
              "user @ vhost on gateway",
              [f"{r['user'] or '?'} @ {r['vhost'] or '?'} on {r['container'] or '?'}" for r in talkers],
              [r["messages"] for r in talkers], hook=figure_hook)
    grouped_bar_chart(path("reconciliation.png"), "Reconciliation by gateway pair", "messages",
                      "source -> destination", [f"{r['source']} -> {r['destination']}" for r in recon_rows],
                      {k: [r[k] for r in recon_rows] for k in ("forwarded", "lost", "duplicated", "late")},
                      hook=figure_hook)

    rates = sorted(rows["throughput"], key=lambda r: (-r["peak_per_s"], *(r[k] or "" for k in (
        "container", "vhost", "direction", "route"))))
    throughput = {(r["container"], r["vhost"], r["direction"], r["route"]):
                  {"messages": r["messages"], "minutes": r["minutes"], "peak_per_s": r["peak_per_s"],
                   "mean_per_s": r["mean_per_s"]} for r in rates}
    by_user_rows = (loaded["outcomes"].groupBy("user", "result").agg(F.sum("messages").alias("m"))
                    .orderBy(F.desc("m"), "user", "result").limit(MAX_ROWS).collect())
    node_note = (f"Receipts count on their target: per exchange, its {top_nodes} busiest routing keys "
                 "(/exchanges/X/RK, or the 1.0 address as given) and the rest as /exchanges/X/* (other "
                 f"keys); deliveries on the queue they left: the {top_nodes} busiest queues per vhost and "
                 "the rest as /queues/* (other queues).")
    sections = list(summary) + [
        Section("Events", f"{sum(by_event.values()):,} events from {len(containers)} gateway(s) "
                f"({', '.join(containers)}); {malformed:,} malformed line(s) skipped "
                "(a crash can leave one torn last line per open segment).",
                headers=("event", "events"), rows=sorted(by_event.items())),
        Section("Messages received by vhost", image="charts/messages_in_per_vhost.png"),
        Section("Bytes received by gateway", image="charts/bytes_in_per_gateway.png"),
        Section("Messages received by AMQP node", node_note + " The default exchange is the empty "
                "name (/exchanges//Q).", image="charts/messages_in_per_amqp_node.png"),
        Section("Messages out by AMQP node", "The queue each delivery left (/queues/Q).",
                image="charts/messages_out_per_amqp_node.png"),
        Section("Traffic by AMQP node", "Messages and bytes in (received) and out (delivered, "
                "every attempt, and forwarded) per gateway, vhost and AMQP node, busiest first. "
                + node_note,
                headers=("gateway", "vhost", "AMQP node", "messages in", "bytes in", "messages out",
                         "bytes out"), rows=node_rows),
        Section("Throughput by route (messages per second)", "Per route (the AMQP node a message "
                "went to, in, or left from, out; " + f"{top_nodes}" + " busiest per exchange and vhost by "
                "name, generated names such as amq.gen-* as one) and minute: the busiest minute's rate "
                "(peak) and the mean rate from the route's first minute to its last, idle minutes "
                "included. Highest peak first.",
                headers=("gateway", "vhost", "direction", "route", "messages", "minutes", "peak msg/s",
                         "peak minute (UTC)", "mean msg/s"),
                rows=[(r["container"], r["vhost"], r["direction"], r["route"], r["messages"], r["minutes"],
                       float(r["peak_per_s"]), utc_text(r["peak_minute_us"], fraction=False)[:-3],
                       float(r["mean_per_s"])) for r in rates[:MAX_ROWS]]),
        Section("Messages received by user", image="charts/messages_in_per_user.png"),
        Section("Messages out by protocol pair", image="charts/messages_out_per_pair.png"),
        Section("Protocol pairs", "Deliveries (every attempt) and forwards, by protocol in -> out.",
                image="charts/protocol_pairs.png", headers=("pair", "messages", "redeliveries", "bytes"),
                rows=[(pair, *figures) for pair, figures in pairs_rows]),
        Section("Latency from receive to settle by gateway", "Per gateway, milliseconds "
                "(approximate percentiles, rank error under 0.01 %).", image="charts/latency.png",
                headers=("gateway", "settled", "p50 ms", "p95 ms", "p99 ms", "max ms"),
                rows=[(n, v["settled"], *(ms(v[p]) for p in _PERCENTILES + ("max",)))
                      for n, v in latency.items()]),
        Section("Latency from receive to settle by queue", "Per AMQP node settled on (gateway, "
                "vhost, queue), milliseconds, most settlements first; generated names (amq.gen-*, "
                "reply queues named with a UUID) as one row each.", image="charts/latency_by_queue.png",
                headers=("gateway", "vhost", "queue", "settled", "p50 ms", "p95 ms", "p99 ms", "max ms"),
                rows=[(*k, v["settled"], *(ms(v[p]) for p in _PERCENTILES + ("max",)))
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
        Section("Reconciliation by gateway pair", "The counts of the summary's reconciliation, drawn.",
                image="charts/reconciliation.png"),
    ]
    html_text = render_html("Gateway ledger report", "Ledgers: " + ", ".join(ledger_dirs), sections)
    with open(os.path.join(out_dir, "report.html"), "w", encoding="utf-8") as f:
        f.write(html_text)
    return {"events": int(sum(by_event.values())), "by_event": dict(by_event),
            "settled_by_outcome": dict(settled), "forward_settled_by_outcome": dict(forward_settled),
            "protocol_pairs": pairs, "protocol_pair_bytes": pair_bytes, "latency_us": latency,
            "latency_by_queue": by_queue, "buckets": buckets, "throughput": throughput, **numbers}


def _queue_label(container: Any, vhost: Any, queue: Any) -> str:
    return f"{queue or '?'} @ {vhost or '?'} on {container or '?'}"
