"""Where each message is at the end of the ledger, in Spark: its final state.

"Did everything arrive, and where did the rest go?" for one gateway. The rules are
``final_rules``' (copies, places, states and their details, restarts), which also
evaluates them in plain Python; here the same tables become built-in Spark SQL columns
(no Python UDFs): one grouping of the events by copy, one of the messages that reached
no place, and the gateways' latest starts joined in (a few rows, broadcast).

Tables: ``final_states`` (one row per copy, and per message without one),
``final_state_summary`` (their counts per place, state and detail), and the copies not
finally settled (``unsettled_messages``, ``unsettled_summary``: the states of
``final_rules.NOT_FINAL``; messages that reached no place are counted as refused or
unroutable instead).
"""
from __future__ import annotations

from typing import Any, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipeline.final_rules import (COPY_RULES, COPYING_EVENTS, COUNTS, FINAL_OUTCOMES, FORWARD_EVENTS,
                                  FORWARD_PREFIX, MESSAGE_RULES, NOT_FINAL, QUEUE_EVENTS, STATES,
                                  VALUES, VERDICTS)

__all__ = ["FINAL_OUTCOMES", "NOT_FINAL", "STATES", "final_state_summary", "final_states",
           "summary_of", "unsettled_messages", "unsettled_summary"]

_COLUMNS = ("container", "vhost", "place", "state", "detail", "gateway_id", "message_id", "size",
            "since_us", "last_us")
_BASE = ("container", "gateway_id", "ts_us", "vhost", "message_id", "size", "outcome", "reason",
         "exchange")


def _copy_events(events: DataFrame) -> DataFrame:
    """Every (copy, kind) an event stands for, as ``final_rules.places`` says: ``place``,
    ``kind``, ``stored``."""
    keyed = events.filter(F.col("gateway_id").isNotNull())
    kind = None
    for event, counted_as in COPYING_EVENTS.items():
        kind = (F.when(F.col("event") == event, F.lit(counted_as)) if kind is None
                else kind.when(F.col("event") == event, F.lit(counted_as)))
    copying = (keyed.filter(F.col("event").isin(*COPYING_EVENTS))
               .select(F.explode("routed_to").alias("place"), kind.alias("kind"), "stored_to", *_BASE)
               .withColumn("stored", F.coalesce(F.array_contains("stored_to", F.col("place")), F.lit(False)))
               .drop("stored_to"))
    in_queue = (keyed.filter(F.col("event").isin(*QUEUE_EVENTS) & F.col("queue").isNotNull())
                .select(F.col("queue").alias("place"), F.col("event").alias("kind"), *_BASE,
                        F.lit(False).alias("stored")))
    forwarding = (keyed.filter(F.col("event").isin(*FORWARD_EVENTS) & F.col("peer_container").isNotNull()
                               & F.col("queue").isNull())
                  .select(F.concat(F.lit(FORWARD_PREFIX), F.col("peer_container")).alias("place"),
                          F.col("event").alias("kind"), *_BASE, F.lit(False).alias("stored")))
    return copying.unionByName(in_queue).unionByName(forwarding)


def _condition(condition: tuple[str, str, Any]) -> Column:
    name, op, value = condition
    have = F.col(name)
    if op == "set":
        return have.isNotNull()
    if op == "unset":
        return have.isNull()
    if op == ">":
        return F.coalesce(have > (F.col(value) if isinstance(value, str) else F.lit(value)), F.lit(False))
    return F.coalesce(have == F.lit(value), F.lit(False))


def _detail(parts: Sequence[Any]) -> Column:
    return F.concat(*(F.lit(p) if isinstance(p, str)
                      else F.coalesce(F.col(p[0]).cast("string"), F.lit(p[1])) for p in parts))


def _apply(rules: Sequence[Any]) -> tuple[Column, Column]:
    """(state, detail) columns: the first rule that holds, as ``final_rules.apply``."""
    state = detail = None
    for name, conditions, parts in rules:
        holds = F.lit(True)
        for c in conditions:
            holds = holds & _condition(c)
        state = F.when(holds, F.lit(name)) if state is None else state.when(holds, F.lit(name))
        detail = F.when(holds, _detail(parts)) if detail is None else detail.when(holds, _detail(parts))
    return state, detail


def _count(condition: Column) -> Column:
    return F.sum(F.when(condition, 1).otherwise(0))


def final_states(events: DataFrame) -> DataFrame:
    """One row per copy (moved-away ones left out) and per message that reached no
    place: container, vhost, place (null for the latter), state (one of ``STATES``),
    detail, gateway_id, message_id, size, since_us (its first event), last_us (its last)."""
    kind, outcome = F.col("kind"), F.col("outcome")
    figures = [_count(kind.isin(*kinds) & (F.lit(True) if outcomes is None else outcome.isin(*outcomes)))
               .alias(name) for name, (kinds, outcomes) in COUNTS.items()]
    for name, (kinds, final, field) in VALUES.items():
        when = kind.isin(*kinds)
        if final is not None:
            when = when & (outcome.isin(*FINAL_OUTCOMES) if final else ~outcome.isin(*FINAL_OUTCOMES))
        figures.append(F.max(F.when(when, F.col(field))).alias(name))
    copies = (_copy_events(events).groupBy("container", "gateway_id", "place")
              .agg(*figures, F.max("stored").alias("stored"),
                   F.max("vhost").alias("vhost"), F.max("message_id").alias("message_id"),
                   F.max("size").alias("size"), F.min("ts_us").alias("since_us"),
                   F.max("ts_us").alias("last_us"),
                   F.max(F.when(kind != "restored", F.col("ts_us"))).alias("_last"),
                   F.max(F.when(kind == "restored", F.col("ts_us"))).alias("_restored")))
    starts = (events.filter(F.col("event") == "started").groupBy("container")
              .agg(F.max("ts_us").alias("_start")))
    copies = copies.join(F.broadcast(starts), "container", "left")
    is_forward = F.col("place").startswith(FORWARD_PREFIX)
    gone = (~is_forward & F.col("_start").isNotNull() & F.col("_last").isNotNull()
            & (F.col("_start") > F.col("_last"))
            & (F.col("_restored").isNull() | (F.col("_restored") < F.col("_start"))))
    state, detail = _apply(COPY_RULES)
    per_copy = (copies.withColumn("is_forward", is_forward)
                .withColumn("gone_at_restart", F.coalesce(gone, F.lit(False)))
                .select(*(F.col(c) for c in _COLUMNS if c not in ("state", "detail")),
                        state.alias("state"), detail.alias("detail"))
                .filter(F.col("state") != "moved"))
    return per_copy.select(*_COLUMNS).unionByName(_without_copy(events, copies).select(*_COLUMNS))


def _without_copy(events: DataFrame, copies: DataFrame) -> DataFrame:
    """The messages received that reached no place, with their state."""
    keyed = events.filter(F.col("gateway_id").isNotNull() & F.col("event").isin("received", *VERDICTS))
    verdict = F.col("event").isin(*VERDICTS)
    messages = (keyed.join(copies.select("container", "gateway_id").distinct(),
                           ["container", "gateway_id"], "left_anti")
                .groupBy("container", "gateway_id")
                .agg(_count(F.col("event") == "received").alias("_received"),
                     F.max(F.when(verdict, F.col("event"))).alias("verdict"),
                     F.max(F.when(verdict, F.col("reason"))).alias("reason"),
                     F.max(F.coalesce(F.col("routing_key").contains("@"), F.lit(False))).alias("global_address"),
                     F.max("vhost").alias("vhost"), F.max("message_id").alias("message_id"),
                     F.max("size").alias("size"), F.min("ts_us").alias("since_us"),
                     F.max("ts_us").alias("last_us"))
                .filter(F.col("_received") > 0))
    state, detail = _apply(MESSAGE_RULES)
    return messages.select(*(F.col(c) for c in _COLUMNS if c not in ("state", "detail", "place")),
                           F.lit(None).cast("string").alias("place"), state.alias("state"),
                           detail.alias("detail"))


def summary_of(rows: DataFrame) -> DataFrame:
    """Rows of ``final_states`` per gateway, vhost, place, state and detail: messages,
    bytes, and the oldest one's first event (``oldest_us``)."""
    return (rows.groupBy("container", "vhost", "place", "state", "detail")
            .agg(F.count(F.lit(1)).alias("messages"),
                 F.coalesce(F.sum("size"), F.lit(0)).cast("long").alias("bytes"),
                 F.min("since_us").alias("oldest_us")))


def final_state_summary(final: DataFrame) -> DataFrame:
    """``summary_of`` every final state."""
    return summary_of(final)


def unsettled_messages(final: DataFrame) -> DataFrame:
    """The copies of ``final_states`` not finally settled (``NOT_FINAL``; a message that
    reached no place is the summary's "refused or unroutable")."""
    return final.filter(F.col("state").isin(*NOT_FINAL) & F.col("place").isNotNull())


def unsettled_summary(unsettled: DataFrame) -> DataFrame:
    """``summary_of`` the copies not finally settled."""
    return summary_of(unsettled)
