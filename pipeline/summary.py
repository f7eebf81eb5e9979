"""The summary at the top of ``report.html``: the operator's questions, answered in numbers.

- How much crossed, per protocol pair and per vhost (and per gateway when there are several).
- How fast: latency p50/p95/p99 from receive to settle, in milliseconds throughout.
- What was refused or unroutable, and why.
- What was not finally settled at the end of the ledger, and where it is; the final state
  of every message, "lost" only where nothing explains it (``settlement``).
- Whether the ledger itself is whole: its gaps (a writer process that died), when and how
  many records.
- With several ledgers: what left one gateway and did not arrive at the other, what
  arrived twice, what arrived late, with samples (``reconcile``).

Everything here is read from the report's small tables, collected once (``rows``: table
name -> its rows), and from aggregates of the larger ones (``loaded``); only aggregates
reach the driver.
"""
from __future__ import annotations

import collections
from typing import Any, Mapping, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline.formats import duration_text, ms, utc_text
from pipeline.html_report import Section
from pipeline.settlement import NOT_FINAL, STATES

__all__ = ["RECONCILIATION_KEYS", "RECONCILIATION_STATUSES", "REFUSALS", "latency_figures", "summary_sections"]

REFUSALS = ("unroutable", "returned", "refused")
#: why, when the ledger records no reason
_DEFAULT_REASON = {"unroutable": "no queue bound for its routing key", "returned": "NO_ROUTE",
                   "refused": "refused"}
RECONCILIATION_KEYS = ("forwarded", "arrived", "lost", "dead_lettered", "still_queued", "duplicated",
                       "extra_copies", "late", "unverified", "unexpected")
#: the per-message statuses the summary gives samples of
RECONCILIATION_STATUSES = ("lost", "dead-lettered", "still queued", "duplicated", "late",
                           "duplicated+late", "unexpected", "unverified")
MAX_ROWS = 25


def _plural(n: int, word: str, words: str = "") -> str:
    return f"{n:,} " + (word if n == 1 else words or word + "s")


def latency_figures(row: Any) -> dict[str, Any]:
    """A latency table row as {settled, p50, p95, p99, max} (microseconds)."""
    return {"settled": row["settled"], "p50": row["p50_us"], "p95": row["p95_us"],
            "p99": row["p99_us"], "max": row["max_us"]}


def _key(*values: Any) -> tuple:
    """A sort key for rows whose fields may be None (None last)."""
    return tuple((v is None, v if v is not None else "") for v in values)


def summary_sections(rows: Mapping[str, Sequence[Any]], loaded: Mapping[str, DataFrame],
                     unsettled_rows: Sequence[Any], recon_samples: Mapping[str, Sequence[Any]], *,
                     containers: Sequence[str], late_after: float) -> tuple[list[Section], dict[str, Any]]:
    """The summary's sections and the numbers behind them (ReportSummary fields)."""
    counts = rows["event_counts"]
    first = min((r["first_us"] for r in counts if r["first_us"] is not None), default=None)
    last = max((r["last_us"] for r in counts if r["last_us"] is not None), default=None)

    pairs = sorted(rows["protocol_pairs"], key=lambda r: _key(r["container"], r["protocol_pair"]))
    refusal_rows = (loaded["outcomes"].filter(F.col("result").isin(*REFUSALS))
                    .groupBy("container", "vhost", "result", "reason", "target")
                    .agg(F.sum("messages").alias("m"))
                    .orderBy(F.desc("m"), "result", "target").limit(MAX_ROWS).collect())
    refusal_totals = (loaded["outcomes"].filter(F.col("result").isin(*REFUSALS))
                      .groupBy("container", "vhost", "result", "reason").agg(F.sum("messages").alias("m"))
                      .collect())
    per_vhost = _per_vhost(loaded["traffic_per_minute"], refusal_totals, rows["unsettled_summary"])
    [overall] = rows["latency_overall"] or [None]
    latency_all = latency_figures(overall) if overall is not None else {"settled": 0}
    per_gateway = sorted(rows["latency"], key=lambda r: _key(r["container"]))

    refusals: collections.Counter = collections.Counter()
    for r in refusal_totals:
        refusals[(r["result"], r["reason"])] += r["m"]

    unsettled_summary = sorted(rows["unsettled_summary"], key=lambda r: (
        -r["messages"], *_key(r["container"], r["vhost"], r["state"], r["place"])))
    unsettled = {(r["container"], r["vhost"], r["place"], r["state"], r["detail"]): r["messages"]
                 for r in unsettled_summary}
    by_state: collections.Counter = collections.Counter()
    for r in unsettled_summary:
        by_state[r["state"]] += r["messages"]

    final_rows = sorted(rows["final_state_summary"], key=lambda r: (
        STATES.index(r["state"]), -r["messages"], *_key(r["container"], r["vhost"], r["place"], r["detail"])))
    final_by_state: collections.Counter = collections.Counter()
    for r in final_rows:
        final_by_state[r["state"]] += r["messages"]
    gaps = sorted((r["container"], r["ts_us"], r["since_us"], r["count"]) for r in rows["ledger_gaps"])

    recon_rows = sorted(rows["reconciliation_summary"], key=lambda r: _key(r["source"], r["destination"]))
    recon = {k: int(sum(r[k] or 0 for r in recon_rows)) for k in RECONCILIATION_KEYS}

    numbers = {
        "span_us": None if first is None else (first, last),
        "latency_overall_us": latency_all,
        "refusals": dict(refusals),
        "unsettled": unsettled,
        "unsettled_by_state": dict(by_state),
        "final_by_state": dict(final_by_state),
        "final_states": {(r["container"], r["vhost"], r["place"], r["state"], r["detail"]): r["messages"]
                         for r in final_rows},
        "gaps": gaps,
        "crossed_by_vhost": per_vhost,
        "reconciliation": recon,
        "samples": {s: sorted(r["key"] for r in recon_samples.get(s, [])) for s in RECONCILIATION_STATUSES},
    }
    redelivered = sum(r["redeliveries"] or 0 for r in pairs)
    lines = _headline(numbers, redelivered, containers, late_after)
    sections = [
        Section("Summary", "\n\n".join(lines), anchor="summary"),
        Section("Crossed, per protocol pair", "Deliveries to consumers (every attempt) and forwards, "
                "by the protocol a message came in on and left on.", level=3, anchor="summary-pairs",
                headers=("gateway", "protocol pair", "messages", "of which redeliveries", "bytes"),
                rows=[(r["container"], r["protocol_pair"], r["messages"], r["redeliveries"], r["bytes"])
                      for r in pairs]),
        Section("Crossed, per vhost", "Received from publishers (and from other gateways), delivered to "
                "consumers (every attempt), forwarded; refused or unroutable; not finally settled.",
                level=3, anchor="summary-vhosts",
                headers=("gateway", "vhost", "received", "bytes in", "delivered", "forwarded",
                         "refused or unroutable", "not finally settled"),
                rows=[(*k, v["received"], v["bytes_in"], v["delivered"], v["forwarded"], v["refused"],
                       v["unsettled"]) for k, v in sorted(per_vhost.items(), key=lambda kv: _key(*kv[0]))]),
        Section("Latency from receive to settle (ms)", "Milliseconds from the gateway's receipt of a "
                "message to its settlement by a consumer (approximate percentiles, rank error under 0.01 %).",
                level=3, anchor="summary-latency",
                headers=("gateway", "settled", "p50 ms", "p95 ms", "p99 ms", "max ms"),
                rows=[("all", latency_all["settled"], *(ms(latency_all.get(p)) for p in ("p50", "p95", "p99", "max")))]
                + [(r["container"], r["settled"], ms(r["p50_us"]), ms(r["p95_us"]), ms(r["p99_us"]), ms(r["max_us"]))
                   for r in per_gateway]),
        Section("Refused or unroutable, and why", "Unroutable: no queue took the message and it was "
                "dropped; returned: sent back to a mandatory 0-9-1 publisher; refused: not taken in "
                "(access, limits, a bad address or message, full queues). Busiest targets first.",
                level=3, anchor="summary-refused",
                headers=("gateway", "vhost", "result", "reason", "target", "messages"),
                rows=[(r["container"], r["vhost"], r["result"], r["reason"] or _DEFAULT_REASON[r["result"]],
                       r["target"], r["m"]) for r in refusal_rows]),
        Section("Not finally settled at the end of the ledger", "Each message copy in a queue that no "
                "consumer accepted or rejected, and each forward the peer did not settle: where it is "
                "now. Still queued: in the queue when the ledger ends; dead-lettered: moved to a "
                "dead-letter exchange (its copy is counted again where it went, as a dead-letter copy); "
                "expired: its TTL ran out and it was dropped.", level=3, anchor="summary-unsettled",
                headers=("gateway", "vhost", "where", "queue or peer", "detail", "messages", "bytes", "oldest since"),
                rows=[(r["container"], r["vhost"], r["state"], r["place"], r["detail"], r["messages"],
                       r["bytes"], utc_text(r["oldest_us"])) for r in unsettled_summary[:MAX_ROWS]]),
    ]
    sections.append(Section(
        "Final state of every message", "Each message copy (a message in one queue, or forwarded to "
        "one peer), and each message that reached no queue, in exactly one state: " + ", ".join(STATES)
        + ". Lost: kept in the store when the gateway restarted and not restored, where nothing "
        "explains it; dropped at a restart: a transient message or queue. By state, busiest first.",
        level=3, anchor="summary-final",
        headers=("gateway", "vhost", "state", "queue or peer", "detail", "messages", "bytes"),
        rows=[(r["container"], r["vhost"], r["state"], r["place"], r["detail"], r["messages"], r["bytes"])
              for r in final_rows[:MAX_ROWS]]))
    if gaps:
        sections.append(Section(
            "Gaps in the ledger", "Records the gateway made that could not be written: its ledger "
            "writer process died before it wrote them (the gateway started another). Events of those "
            "times may be missing, and a message's state may be older than the truth.", level=3,
            anchor="summary-gaps", headers=("gateway", "from", "to", "records lost"),
            rows=[(c, utc_text(since), utc_text(ts), n) for c, ts, since, n in gaps]))
    if unsettled_rows:
        sections.append(Section(
            "Samples not finally settled", "The oldest of each kind.", level=3,
            headers=("where", "queue or peer", "gateway", "gateway id", "message id", "since"),
            rows=[(r["state"], r["place"], r["container"], r["gateway_id"], r["message_id"],
                   utc_text(r["since_us"])) for r in unsettled_rows]))
    sections += _reconciliation_sections(recon_rows, recon_samples, late_after)
    return sections, numbers


def _per_vhost(traffic: DataFrame, refusals: Sequence[Any], unsettled: Sequence[Any]) -> dict[tuple, dict[str, int]]:
    """(gateway, vhost) -> received, bytes_in, delivered, forwarded, refused, unsettled."""
    out: dict[tuple, dict[str, int]] = collections.defaultdict(
        lambda: dict.fromkeys(("received", "bytes_in", "delivered", "forwarded", "refused", "unsettled"), 0))
    for r in (traffic.groupBy("container", "vhost", "event")
              .agg(F.sum("messages").alias("m"), F.sum("bytes").alias("b")).collect()):
        row = out[(r["container"], r["vhost"])]
        row[r["event"]] += int(r["m"])
        if r["event"] == "received":
            row["bytes_in"] += int(r["b"] or 0)
    for r in refusals:
        out[(r["container"], r["vhost"])]["refused"] += int(r["m"])
    for r in unsettled:
        out[(r["container"], r["vhost"])]["unsettled"] += int(r["messages"])
    return dict(out)


def _headline(numbers: Mapping[str, Any], redelivered: int, containers: Sequence[str],
              late_after: float) -> list[str]:
    """The summary's sentences, one per question."""
    per_vhost, latency_all = numbers["crossed_by_vhost"], numbers["latency_overall_us"]
    refusals, by_state, recon = numbers["refusals"], numbers["unsettled_by_state"], numbers["reconciliation"]
    first, last = numbers["span_us"] or (None, None)
    received = sum(v["received"] for v in per_vhost.values())
    delivered = sum(v["delivered"] for v in per_vhost.values())
    forwarded = sum(v["forwarded"] for v in per_vhost.values())
    lines = []
    if first is None:
        lines.append("The ledger holds no events.")
    else:
        lines.append(f"From {utc_text(first, fraction=False)} to {utc_text(last, fraction=False)} UTC "
                     f"({duration_text((last - first) / 1e6)}), {_plural(len(containers), 'gateway')} "
                     f"({', '.join(containers)}).")
    lines.append(f"Crossed: {_plural(received, 'message')} received, {_plural(delivered, 'delivery', 'deliveries')} "
                 f"to consumers ({redelivered:,} of them redeliveries), {_plural(forwarded, 'forward')} "
                 "to other gateways.")
    if latency_all["settled"]:
        lines.append(f"Latency from receive to settle over {_plural(latency_all['settled'], 'settlement')}: "
                     f"p50 {ms(latency_all['p50']):,.2f} ms, p95 {ms(latency_all['p95']):,.2f} ms, "
                     f"p99 {ms(latency_all['p99']):,.2f} ms (max {ms(latency_all['max']):,.2f} ms).")
    else:
        lines.append("Latency: no settlement in the ledger.")
    refused_total = sum(refusals.values())
    kinds: collections.Counter = collections.Counter()
    for (kind, _reason), n in refusals.items():
        kinds[kind] += n
    lines.append(f"Refused or unroutable: {_plural(refused_total, 'message')}"
                 + (" (" + ", ".join(f"{k} {kinds[k]:,}" for k in REFUSALS if kinds[k]) + ")." if kinds else "."))
    unsettled_total = sum(by_state.values())
    if unsettled_total:
        lines.append(f"Not finally settled at the end of the ledger: {_plural(unsettled_total, 'message')} ("
                     + ", ".join(f"{s} {by_state[s]:,}" for s in NOT_FINAL if by_state.get(s)) + ").")
    else:
        lines.append("Not finally settled at the end of the ledger: none; every message was settled.")
    final = numbers["final_by_state"]
    if final:
        lines.append("Final state of every message: " + ", ".join(
            f"{s} {final[s]:,}" for s in STATES if final.get(s)) + ("." if final.get("lost") else
                                                                      "; none lost."))
    gaps = numbers["gaps"]
    if gaps:
        lines.append(f"Ledger gaps: {_plural(len(gaps), 'gap')}, {_plural(sum(g[3] for g in gaps), 'record')} "
                     "could not be written (a writer process died; see below).")
    else:
        lines.append("Ledger gaps: none; every record the gateways made was written.")
    if recon["forwarded"] or recon["unexpected"]:
        lines.append(f"Across gateways: {_plural(recon['forwarded'], 'message')} forwarded, "
                     f"{recon['lost']:,} lost, {recon['dead_lettered']:,} dead-lettered at the source, "
                     f"{recon['still_queued']:,} still queued at the source, {recon['duplicated']:,} duplicated "
                     f"({recon['extra_copies']:,} extra copies), {recon['late']:,} late "
                     f"(more than {late_after:g} s), {recon['unverified']:,} unverified (no ledger of the "
                     f"destination), {recon['unexpected']:,} unexpected (arrived, no forward recorded).")
    elif len(containers) > 1:
        lines.append("Across gateways: no message was forwarded between them.")
    else:
        lines.append("Across gateways: one ledger, nothing to reconcile.")

    return lines


def _reconciliation_sections(recon_rows: Sequence[Any], recon_samples: Mapping[str, Sequence[Any]],
                             late_after: float) -> list[Section]:
    """The reconciliation table and its samples; nothing when nothing was forwarded."""
    if not recon_rows:
        return []
    sections = [Section(
        "Across gateways: lost, duplicated, late", "A forward (source gateway) is matched with its "
        "arrival at the destination by the origin gateway id, the container that gave it (origin) and "
        "the gateway it came from. Lost: no arrival, and nothing at the source explains it; "
        "dead-lettered: the source dead-lettered it (the destination rejected it, or released it too "
        "often); still queued: in the source's outbox, not settled by the destination; duplicated: more "
        f"than one; late: first arrival more than {late_after:g} s after the "
        "forward; unverified: no ledger of the destination was given; unexpected: an arrival no "
        "forward of its source explains.", level=3, anchor="summary-reconciliation",
        headers=("source", "destination") + RECONCILIATION_KEYS,
        rows=[tuple(r[k] for k in ("source", "destination") + RECONCILIATION_KEYS) for r in recon_rows])]
    for status in RECONCILIATION_STATUSES:
        found = recon_samples.get(status, [])
        if found:
            sections.append(Section(
                f"Samples: {status}", level=3, anchor=f"samples-{status.replace('+', '-').replace(' ', '-')}",
                headers=("source", "destination", "origin", "gateway id (origin)", "message id",
                         "forwarded at", "first arrival", "copies", "delay (s)"),
                rows=[(r["source"], r["destination"], r["origin"], r["key"], r["message_id"],
                       utc_text(r["sent_us"]),
                       utc_text(r["first_received_us"]), r["copies"],
                       None if r["delay_us"] is None else r["delay_us"] / 1e6) for r in found]))
    return sections
