"""Where each message is at the end of the ledger: finally settled, or not and where.

"Did everything arrive?" for one gateway. A message *copy* is one message in one queue
(routing can put a message in several queues, and each copy has its own fate), keyed by
gateway, ``gateway_id`` and queue; a forwarded message is a copy on its way to a peer
gateway, keyed by gateway, ``gateway_id`` and ``peer_container``.

A queue copy is finally settled when a consumer accepted or rejected it (``settled`` with
outcome ``accepted``/``rejected``). Otherwise, at the end of the ledger, it is:

- ``dead-lettered``: it left the queue for a dead-letter exchange (``dead_lettered``;
  after a rejection or an expiry too). The dead-lettered copy has a new gateway id and is
  followed on its own: its ``routed`` event's ``reason`` is the death reason, so it shows
  as a ``dead-letter copy`` wherever it is now.
- ``expired``: its TTL ran out and no dead-letter exchange took it (``expired``).
- ``still queued``: nothing above; ``detail`` says whether it was never delivered, was
  given back by a consumer (its last settlement ``released``/``modified``: a 0-9-1
  requeue, a 1.0 release, or the release of unacknowledged messages when a channel,
  link or the gateway closed), or was delivered and not settled when the ledger ends (a
  crash, or a ledger cut short).

A forwarded copy is finally settled when the peer settled it ``accepted``/``rejected``
(``forward_settled``); otherwise it is ``forwarded, unsettled``.

The result is one row per copy that is not finally settled (``unsettled_messages``) and
their counts per place (``unsettled_summary``). Both are built with one grouping of the
events by copy, in built-in Spark SQL.
"""
from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

__all__ = ["FINAL_OUTCOMES", "STATES", "unsettled_messages", "unsettled_summary"]

#: settle outcomes after which a copy is done
FINAL_OUTCOMES = ("accepted", "rejected")
#: the places a copy that is not finally settled can be, in the report's order
STATES = ("still queued", "dead-lettered", "expired", "forwarded, unsettled")

_QUEUE_EVENTS = ("delivered", "settled", "expired", "dead_lettered")
_FORWARD_EVENTS = ("forwarded", "forward_settled")
_COPY_COLUMNS = ("container", "gateway_id", "place", "event", "ts_us", "vhost", "message_id",
                 "size", "outcome", "reason", "exchange", "routing_key")


def _copy_events(events: DataFrame) -> DataFrame:
    """Every event that concerns one copy, with ``place``: the queue (a routed event once
    per queue in ``routed_to``) or ``-> peer`` for forwarding."""
    keyed = events.filter(F.col("gateway_id").isNotNull())
    base = [c for c in _COPY_COLUMNS if c not in ("place",)]
    routed = (keyed.filter(F.col("event") == "routed")
              .select(F.explode("routed_to").alias("place"), *base))
    in_queue = (keyed.filter(F.col("event").isin(*_QUEUE_EVENTS) & F.col("queue").isNotNull())
                .select(F.col("queue").alias("place"), *base))
    forwarding = (keyed.filter(F.col("event").isin(*_FORWARD_EVENTS) & F.col("peer_container").isNotNull())
                  .select(F.concat(F.lit("-> "), F.col("peer_container")).alias("place"), *base))
    return routed.unionByName(in_queue).unionByName(forwarding)


def _count(condition: Column) -> Column:
    return F.sum(F.when(condition, 1).otherwise(0))


def _first(condition: Column, value: str) -> Column:
    return F.max(F.when(condition, F.col(value)))


def unsettled_messages(events: DataFrame) -> DataFrame:
    """One row per copy not finally settled: container, vhost, place (queue, or ``-> peer``),
    state (one of ``STATES``), detail, gateway_id, message_id, size, since_us (its first
    event), last_us (its last event)."""
    event, outcome = F.col("event"), F.col("outcome")
    settle = event.isin("settled", "forward_settled")
    copies = (_copy_events(events).groupBy("container", "gateway_id", "place")
              .agg(F.max("vhost").alias("vhost"), F.max("message_id").alias("message_id"),
                   F.max("size").alias("size"), F.min("ts_us").alias("since_us"),
                   F.max("ts_us").alias("last_us"),
                   _count(event.isin("delivered", "forwarded")).alias("sent"),
                   _count(settle).alias("settlements"),
                   _count(settle & outcome.isin(*FINAL_OUTCOMES)).alias("final"),
                   _count(event == "expired").alias("expired"),
                   _count(event == "dead_lettered").alias("dead_lettered"),
                   _first(event == "dead_lettered", "reason").alias("death_reason"),
                   _first(event == "dead_lettered", "exchange").alias("dlx"),
                   _first(event == "routed", "reason").alias("copy_of_death"),
                   _first(settle & ~outcome.isin(*FINAL_OUTCOMES), "outcome").alias("given_back")))
    forwarded = F.col("place").startswith("-> ")
    state = (F.when(F.col("dead_lettered") > 0, F.lit("dead-lettered"))
             .when(F.col("expired") > 0, F.lit("expired"))
             .when(F.col("final") > 0, F.lit(None))
             .when(forwarded, F.lit("forwarded, unsettled"))
             .otherwise(F.lit("still queued")))
    where_now = (F.when(F.col("sent") == 0, F.lit("never delivered"))
                 .when(F.col("sent") > F.col("settlements"), F.lit("delivered, unsettled at the end of the ledger"))
                 .otherwise(F.concat(F.lit("given back by a consumer ("),
                                     F.coalesce(F.col("given_back"), F.lit("released")), F.lit(")"))))
    detail = (F.when(F.col("dead_lettered") > 0,
                     F.concat(F.lit("reason "), F.coalesce(F.col("death_reason"), F.lit("?")),
                              F.lit(", to exchange '"), F.coalesce(F.col("dlx"), F.lit("")), F.lit("'")))
              .when(F.col("expired") > 0, F.lit("TTL ran out, no dead-letter exchange"))
              .when(forwarded, F.when(F.col("settlements") == 0, F.lit("not settled by the peer"))
                    .otherwise(F.concat(F.lit("given back by the peer ("),
                                        F.coalesce(F.col("given_back"), F.lit("released")), F.lit(")"))))
              .otherwise(F.when(F.col("copy_of_death").isNotNull(),
                                F.concat(F.lit("dead-letter copy ("), F.col("copy_of_death"), F.lit("), "),
                                         where_now))
                         .otherwise(where_now)))
    return (copies.select("container", "vhost", "place", state.alias("state"), detail.alias("detail"),
                          "gateway_id", "message_id", "size", "since_us", "last_us")
            .filter(F.col("state").isNotNull()))


def unsettled_summary(unsettled: DataFrame) -> DataFrame:
    """Copies not finally settled per gateway, vhost, place, state and detail: messages,
    bytes, and the oldest one's first event (``oldest_us``)."""
    return (unsettled.groupBy("container", "vhost", "place", "state", "detail")
            .agg(F.count(F.lit(1)).alias("messages"),
                 F.coalesce(F.sum("size"), F.lit(0)).cast("long").alias("bytes"),
                 F.min("since_us").alias("oldest_us")))
