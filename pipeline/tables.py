"""The report's tables as Spark DataFrames over parsed ledger events.

Every function takes the events DataFrame (columns of ``records.COLUMNS``, malformed
lines already removed) and returns an aggregate. Only built-in Spark SQL functions are
used, no Python UDFs: the job then runs on executors that have no copy of this code
(``spark-submit`` against a cluster ships nothing but ``report.py``'s driver logic).

Two kinds of "node": ``container`` is the gateway that wrote the record (the ledger's
own name for it is the node), ``node`` is the AMQP node a message went to or came from
(a queue, an exchange with its routing key, a 1.0 address; see ``node_column``).

Definitions (the HTML report repeats them):
- traffic: ``received`` events are messages in (``proto_out`` unknown, shown as ``*``),
  ``delivered`` and ``forwarded`` events are messages out; ``bytes`` sums ``size``;
  per minute, gateway, vhost, AMQP node, user, event and protocol pair.
- protocol pairs: delivered and forwarded events by ``proto_in->proto_out``; every
  delivery attempt counts (redeliveries included).
- latency: ``latency_us`` of ``settled`` events (receive -> settle), per gateway
  (``latency_by_node``) and per gateway, vhost and queue (``latency_by_queue``).
- outcomes: settled/forward-settled by outcome, and the refusals (unroutable, returned,
  refused, expired, dead-lettered), per gateway, vhost, user and target address.
"""
from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

__all__ = [
    "OUT_EVENTS",
    "REFUSAL_EVENTS",
    "SETTLE_EVENTS",
    "TRAFFIC_EVENTS",
    "event_counts",
    "latency_by_node",
    "latency_by_queue",
    "node_column",
    "outcomes",
    "protocol_pairs",
    "target_column",
    "top_talkers",
    "traffic_per_minute",
]

TRAFFIC_EVENTS = ("received", "delivered", "forwarded")
OUT_EVENTS = ("delivered", "forwarded")
SETTLE_EVENTS = ("settled", "forward_settled")
REFUSAL_EVENTS = ("unroutable", "returned", "refused", "expired", "dead_lettered")
PERCENTILES = (0.5, 0.95, 0.99)
#: percentile_approx accuracy: rank error at most 1/10000 of the count.
PERCENTILE_ACCURACY = 10000


def target_column() -> Column:
    """The address a message was aimed at or taken from, one label for both protocols:
    the 1.0 address as given, else ``/queues/Q``, else ``/exchanges/X/RK``."""
    return F.coalesce(
        F.col("address"),
        F.when(F.col("queue").isNotNull(), F.concat(F.lit("/queues/"), F.col("queue"))),
        F.when(F.col("exchange").isNotNull(),
               F.concat(F.lit("/exchanges/"), F.col("exchange"), F.lit("/"),
                        F.coalesce(F.col("routing_key"), F.lit("")))),
    )


def node_column() -> Column:
    """The AMQP node of a traffic event: the queue a delivery left (``/queues/Q``, whatever
    address the 1.0 consumer used for it), else the target of a receipt as
    ``target_column`` gives it (the 1.0 address, or ``/exchanges/X/RK`` for 0-9-1)."""
    return F.coalesce(
        F.when(F.col("queue").isNotNull(), F.concat(F.lit("/queues/"), F.col("queue"))),
        target_column(),
    )


def _pair() -> Column:
    return F.concat(F.coalesce(F.col("proto_in"), F.lit("*")), F.lit("->"),
                    F.coalesce(F.col("proto_out"), F.lit("*")))


def _bytes() -> Column:
    return F.coalesce(F.sum("size"), F.lit(0)).cast("long").alias("bytes")


def traffic_per_minute(events: DataFrame) -> DataFrame:
    """Messages and bytes per minute (UTC) per gateway (``container``), vhost, AMQP node
    (``node``: see ``node_column``), user, event and protocol pair."""
    minute = F.timestamp_seconds(F.floor(F.col("ts_us") / 60_000_000) * 60).alias("minute")
    return (events.filter(F.col("event").isin(*TRAFFIC_EVENTS))
            .groupBy(minute, "container", "vhost", node_column().alias("node"), "user", "event",
                     "proto_in", "proto_out", _pair().alias("protocol_pair"))
            .agg(F.count(F.lit(1)).alias("messages"), _bytes()))


def protocol_pairs(events: DataFrame) -> DataFrame:
    """Deliveries and forwards per gateway and protocol pair (``0-9-1->1.0`` ...)."""
    return (events.filter(F.col("event").isin(*OUT_EVENTS))
            .groupBy("container", _pair().alias("protocol_pair"))
            .agg(F.count(F.lit(1)).alias("messages"), _bytes()))


def _latency(events: DataFrame, keys: tuple[str, ...]) -> DataFrame:
    q = F.percentile_approx("latency_us", list(PERCENTILES), PERCENTILE_ACCURACY)
    agg = (events.filter((F.col("event") == "settled") & F.col("latency_us").isNotNull())
           .groupBy(*keys)
           .agg(F.count(F.lit(1)).alias("settled"), q.alias("q"),
                F.max("latency_us").alias("max_us"), F.avg("latency_us").alias("mean_us")))
    return agg.select(*keys, "settled",
                      F.col("q")[0].alias("p50_us"), F.col("q")[1].alias("p95_us"),
                      F.col("q")[2].alias("p99_us"), "max_us", "mean_us")


def latency_by_node(events: DataFrame) -> DataFrame:
    """p50/p95/p99/max latency (microseconds) from receive to settle per gateway
    (``container``)."""
    return _latency(events, ("container",))


def latency_by_queue(events: DataFrame) -> DataFrame:
    """p50/p95/p99/max latency (microseconds) from receive to settle per AMQP node the
    settlement happened on: per gateway, vhost and queue (settlements recorded without a
    queue form one row with ``queue`` null)."""
    return _latency(events, ("container", "vhost", "queue"))


def outcomes(events: DataFrame) -> DataFrame:
    """Settlements by outcome and refusals by kind, per gateway, vhost, user and target.

    ``result`` is the settle outcome for settled/forward-settled rows and the event kind
    for refusals; ``reason`` carries the error or dead-letter reason when recorded.
    """
    kinds = SETTLE_EVENTS + REFUSAL_EVENTS
    result = F.when(F.col("event").isin(*SETTLE_EVENTS),
                    F.coalesce(F.col("outcome"), F.lit("unknown"))).otherwise(F.col("event"))
    return (events.filter(F.col("event").isin(*kinds))
            .groupBy("container", "vhost", "user", target_column().alias("target"), "event",
                     result.alias("result"), "reason")
            .agg(F.count(F.lit(1)).alias("messages"), _bytes()))


def top_talkers(events: DataFrame, limit: int) -> DataFrame:
    """The ``limit`` users who published most (received events), by messages then bytes."""
    from pyspark.sql.window import Window

    per_user = (events.filter(F.col("event") == "received")
                .groupBy("container", "vhost", "user")
                .agg(F.count(F.lit(1)).alias("messages"), _bytes(),
                     F.countDistinct("connection").alias("connections")))
    order = Window.orderBy(F.desc("messages"), F.desc("bytes"), "container", "vhost", "user")
    return per_user.withColumn("rank", F.row_number().over(order)).filter(F.col("rank") <= limit)


def event_counts(events: DataFrame) -> DataFrame:
    """Events per gateway, kind and outcome: the report's headline numbers."""
    return (events.groupBy("container", "event", "outcome")
            .agg(F.count(F.lit(1)).alias("events"), _bytes()))
