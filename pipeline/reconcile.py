"""Reconciliation across the ledgers of several gateways: lost, duplicated, late.

A message *left* gateway A for gateway B when A's ledger has a ``forwarded`` event with
``peer_container = B``. It *arrived* when B's ledger has a ``received`` event for it. The
two are matched by a key:

- ``gateway_id`` (default): A's key is ``coalesce(origin_id, gateway_id)`` (the id the
  first gateway gave the message; a chain A->B->C keeps it, and a hub B's forward takes
  it from the message's received record), B's key is its ``origin_id`` (the forwarder
  carries the id over, and B records it). The key is qualified by the container that
  gave it (``origin``: A's ``coalesce(origin_container, A)``, B's ``origin_container``;
  an arrival recorded without one matches any), since gateway ids are unique per
  container only. This cannot be fooled by applications reusing message ids.
- ``message_id``: the application's message-id on both sides, for gateways that do not
  carry the id over (or a partner that is not one of ours).

An arrival names where it came from (``peer_container``, the forwarding gateway): it
matches a forward only from that gateway, so a message is known by its origin gateway id
*and* the gateway that sent it on (an arrival without ``peer_container`` matches a forward
from any gateway).

Per (A, B, key), A's earliest forward counts (retries are one message). Then, for one
that did not arrive, A's final state of it (``settlement.final_states``, the copy
``-> B``) says why when it can: ``dead-lettered`` (at the source: B rejected it, or it
was released too often), ``still queued`` (in A's outbox, B never settled it); lost =
no arrival and nothing explains it (B settled it, or A's ledger says nothing more);
duplicated = more than one arrival (``copies - 1`` extra);
late = first arrival more than ``late_after`` seconds after the forward (clocks of the
two gateways are assumed in sync to well under that). A forward to a container whose
ledger was not given is ``unverified``, not lost. An arrival from a gateway whose ledger
was given, that no forward of it explains, is ``unexpected`` (e.g. the sender crashed
after sending and before its ledger's next flush).
"""
from __future__ import annotations

import enum
from typing import Iterable, Optional

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline.final_rules import FORWARD_PREFIX

__all__ = ["EXPLAINED", "MatchBy", "STATUSES", "reconciliation", "reconciliation_summary"]

#: the source's final states that explain a forward that did not arrive: the status
EXPLAINED = ("dead-lettered", "still queued")
#: every status of a reconciliation row
STATUSES = ("ok", "lost", *EXPLAINED, "duplicated", "late", "duplicated+late", "unverified",
            "unexpected")


class MatchBy(enum.Enum):
    GATEWAY_ID = "gateway-id"
    MESSAGE_ID = "message-id"


def reconciliation(events: DataFrame, containers: Iterable[str], *, match_by: MatchBy,
                   late_after: float, final: Optional[DataFrame] = None) -> DataFrame:
    """One row per forwarded message: source, destination, origin (the container that
    gave ``key``; null matching by message id), key, message_id, sent_us,
    attempts, copies (arrivals, 0 if none), first_received_us, delay_us, status
    (``ok``, ``lost``, ``dead-lettered``, ``still queued``, ``duplicated``, ``late``,
    ``duplicated+late``, ``unverified``); plus one row per ``unexpected`` arrival (no
    sent_us, attempts 0). ``final``: the ``final_states`` of the same events (without
    it, every forward that did not arrive is lost)."""
    if match_by is MatchBy.GATEWAY_ID:
        sent_key = F.coalesce(F.col("origin_id"), F.col("gateway_id"))
        recv_key = F.col("origin_id")
        sent_origin = F.coalesce(F.col("origin_container"), F.col("container"))
        recv_origin = F.col("origin_container")
    else:
        sent_key = recv_key = F.col("message_id")
        sent_origin = recv_origin = F.lit(None).cast("string")
    sent = (events.filter((F.col("event") == "forwarded") & F.col("peer_container").isNotNull())
            .select(F.col("container").alias("source"), F.col("peer_container").alias("destination"),
                    sent_origin.alias("origin"), sent_key.alias("key"), "message_id", "ts_us",
                    "gateway_id")
            .filter(F.col("key").isNotNull())
            .groupBy("source", "destination", "origin", "key")
            .agg(F.min("ts_us").alias("sent_us"), F.count(F.lit(1)).alias("attempts"),
                 F.min("message_id").alias("message_id"), F.min("gateway_id").alias("gateway_id")))
    arrived = (events.filter(F.col("event") == "received")
               .select(F.col("container").alias("destination"), F.col("peer_container").alias("arrived_from"),
                       recv_origin.alias("origin"), recv_key.alias("key"), "message_id", "ts_us")
               .filter(F.col("key").isNotNull())
               .groupBy("destination", "arrived_from", "origin", "key")
               .agg(F.count(F.lit(1)).alias("copies"), F.min("ts_us").alias("first_received_us"),
                    F.min("message_id").alias("arrived_message_id")))
    known = list(containers)
    s, a = sent.alias("s"), arrived.alias("a")
    same_source = F.col("a.arrived_from").isNull() | (F.col("a.arrived_from") == F.col("s.source"))
    same_origin = F.col("a.origin").isNull() | F.col("a.origin").eqNullSafe(F.col("s.origin"))
    on = ((F.col("s.destination") == F.col("a.destination")) & (F.col("s.key") == F.col("a.key"))
          & same_source & same_origin)
    matched = (s.join(a, on, "left")
               .groupBy("s.source", "s.destination", "s.origin", "s.key", "s.message_id", "s.sent_us",
                        "s.attempts", "s.gateway_id")
               .agg(F.sum("a.copies").alias("copies"), F.min("a.first_received_us").alias("first_received_us")))
    if final is not None:  # the source's final state of the forward copy
        at_source = final.filter(F.col("state").isin(*EXPLAINED)).select(
            F.col("container").alias("source"), "gateway_id",
            F.expr(f"substring(place, {len(FORWARD_PREFIX) + 1})").alias("destination"),
            F.col("state").alias("at_source"))
        matched = matched.join(at_source, ["source", "gateway_id", "destination"], "left")
    else:
        matched = matched.withColumn("at_source", F.lit(None).cast("string"))
    copies = F.coalesce(F.col("copies"), F.lit(0)).cast("long")
    delay = F.col("first_received_us") - F.col("sent_us")
    late = delay > F.lit(int(late_after * 1_000_000))
    status = (F.when(~F.col("destination").isin(*known), F.lit("unverified"))
              .when((copies == 0) & F.col("at_source").isNotNull(), F.col("at_source"))
              .when(copies == 0, F.lit("lost"))
              .when((copies > 1) & late, F.lit("duplicated+late"))
              .when(copies > 1, F.lit("duplicated"))
              .when(late, F.lit("late"))
              .otherwise(F.lit("ok")))
    forwards = matched.select("source", "destination", "origin", "key", "message_id", "sent_us", "attempts",
                              copies.alias("copies"), "first_received_us", delay.alias("delay_us"),
                              status.alias("status"))
    sources = sent.select(F.col("source").alias("arrived_from"), "destination",
                          F.col("origin").alias("sent_origin"), F.col("key").alias("sent_key"))
    explained = ((F.col("arrived_from") == F.col("s_from")) & (F.col("destination") == F.col("s_to"))
                 & (F.col("key") == F.col("sent_key"))
                 & (F.col("origin").isNull() | F.col("origin").eqNullSafe(F.col("sent_origin"))))
    unexpected = (arrived.filter(F.col("arrived_from").isin(*known))
                  .join(sources.withColumnRenamed("arrived_from", "s_from").withColumnRenamed("destination", "s_to"),
                        explained, "left_anti")
                  .select(F.col("arrived_from").alias("source"), "destination", "origin", "key",
                          F.col("arrived_message_id").alias("message_id"),
                          F.lit(None).cast("long").alias("sent_us"), F.lit(0).cast("long").alias("attempts"),
                          F.col("copies").cast("long").alias("copies"), "first_received_us",
                          F.lit(None).cast("long").alias("delay_us"), F.lit("unexpected").alias("status")))
    return forwards.unionByName(unexpected)


def reconciliation_summary(per_message: DataFrame) -> DataFrame:
    """Counts per (source, destination): forwarded, arrived (forwards that arrived),
    lost, dead_lettered (at the source), still_queued (in the source's outbox),
    duplicated (messages with extra copies), extra_copies, late, unverified, unexpected
    (arrivals no forward explains)."""
    status = F.col("status")
    return (per_message.groupBy("source", "destination")
            .agg(F.sum(F.when(status != "unexpected", 1).otherwise(0)).alias("forwarded"),
                 F.sum(F.when((F.col("copies") > 0) & (status != "unexpected"), 1).otherwise(0)).alias("arrived"),
                 F.sum(F.when(status == "lost", 1).otherwise(0)).alias("lost"),
                 F.sum(F.when(status == "dead-lettered", 1).otherwise(0)).alias("dead_lettered"),
                 F.sum(F.when(status == "still queued", 1).otherwise(0)).alias("still_queued"),
                 F.sum(F.when(status.startswith("duplicated"), 1).otherwise(0)).alias("duplicated"),
                 F.sum(F.when((F.col("copies") > 1) & (status != "unexpected"), F.col("copies") - 1)
                       .otherwise(0)).alias("extra_copies"),
                 F.sum(F.when(status.endswith("late"), 1).otherwise(0)).alias("late"),
                 F.sum(F.when(status == "unverified", 1).otherwise(0)).alias("unverified"),
                 F.sum(F.when(status == "unexpected", 1).otherwise(0)).alias("unexpected")))
