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
- AMQP nodes folded as an operator groups them (``node_parent``, ``node_ranks``,
  ``fold_nodes``): a receipt's node belongs to its exchange (``/exchanges/X``), a
  delivery's to ``/queues``, a 1.0 address without an exchange to ``/addresses``; within
  each, per gateway and vhost, the ``top`` busiest nodes keep their name and the rest
  become one ``... (other ...)`` node, so 200 one-off routing keys are one row, not 200.
- timeline (``traffic_timeline``): the traffic events in buckets of a size chosen for the
  ledger's span (seconds to hours), with folded nodes: what the time charts draw.
- protocol pairs: delivered and forwarded events by ``proto_in->proto_out``; every
  delivery attempt counts (``redeliveries`` says how many were not the first).
- latency: ``latency_us`` of ``settled`` events (receive -> settle), over everything
  (``latency_overall``), per gateway (``latency_by_node``) and per gateway, vhost and
  queue (``latency_by_queue``; generated names such as ``amq.gen-*`` grouped, see
  ``GENERATED_NAMES``). The tables keep exact microseconds; the HTML shows ms.
- throughput (``throughput``): messages per second per route (the folded AMQP node, with
  generated names grouped) and direction, from the per-minute traffic: the busiest
  minute's rate (``peak_per_s``) and the mean rate from the route's first to its last
  minute (``mean_per_s``, idle minutes in between included).
- gaps (``ledger_gaps``): the ledger's ``gap`` records: when, since when, how many records
  could not be written.
- outcomes: settled/forward-settled by outcome, and the refusals (unroutable, returned,
  refused, expired, dead-lettered), per gateway, vhost, user and target address.
"""
from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

__all__ = [
    "GENERATED_NAMES",
    "OUT_EVENTS",
    "REFUSAL_EVENTS",
    "SETTLE_EVENTS",
    "TRAFFIC_EVENTS",
    "event_counts",
    "fold_nodes",
    "generated_name",
    "ledger_gaps",
    "latency_by_node",
    "latency_by_queue",
    "latency_overall",
    "node_column",
    "node_parent_column",
    "node_ranks",
    "outcomes",
    "protocol_pairs",
    "target_column",
    "throughput",
    "top_talkers",
    "traffic_per_minute",
    "traffic_timeline",
]

TRAFFIC_EVENTS = ("received", "delivered", "forwarded")
OUT_EVENTS = ("delivered", "forwarded")
SETTLE_EVENTS = ("settled", "forward_settled")
REFUSAL_EVENTS = ("unroutable", "returned", "refused", "expired", "dead_lettered")
PERCENTILES = (0.5, 0.95, 0.99)
#: percentile_approx accuracy: rank error at most 1/10000 of the count.
PERCENTILE_ACCURACY = 10000
#: (Java regular expression, replacement), applied in order: names made by a server or a
#: client library for one use (server-named and 1.0 dynamic queues, reply queues) become
#: one group each, wherever they stand in a node's path
GENERATED_NAMES = (
    (r"(^|/)amq\.gen-[^/]*", "$1amq.gen-*"),
    (r"(^|/)amq\.rabbitmq\.reply-to[^/]*", "$1amq.rabbitmq.reply-to.*"),
    (r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", "*"),
)


def generated_name(name: Column) -> Column:
    """``name`` with generated parts grouped (``GENERATED_NAMES``): ``amq.gen-x1`` and
    ``amq.gen-x2`` are both ``amq.gen-*``, ``reply-<uuid>`` is ``reply-*``."""
    for pattern, replacement in GENERATED_NAMES:
        name = F.regexp_replace(name, pattern, replacement)
    return name


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


def node_parent_column() -> Column:
    """What a traffic event's AMQP node belongs to: the exchange of a receipt
    (``/exchanges/X``, ``/exchanges/`` for the default one), ``/queues`` for the queue a
    delivery left, ``/addresses`` for a 1.0 address that names no exchange."""
    return (F.when(F.col("queue").isNotNull(), F.lit("/queues"))
            .when(F.col("exchange").isNotNull(), F.concat(F.lit("/exchanges/"), F.col("exchange")))
            .otherwise(F.lit("/addresses")))


def _folded_label() -> Column:
    parent = F.col("node_parent")
    return (F.when(parent == "/queues", F.lit("/queues/* (other queues)"))
            .when(parent == "/addresses", F.lit("/addresses/* (other addresses)"))
            .otherwise(F.concat(parent, F.lit("/* (other keys)"))))


_NODE_KEYS = ("container", "vhost", "node_parent", "node")


def node_ranks(traffic: DataFrame, top: int) -> DataFrame:
    """The ``top`` busiest AMQP nodes (messages in and out) of each parent, per gateway and
    vhost, from ``traffic_per_minute``: (container, vhost, node_parent, node, messages, rank)."""
    from pyspark.sql.window import Window

    totals = traffic.groupBy(*_NODE_KEYS).agg(F.sum("messages").alias("messages"))
    order = Window.partitionBy("container", "vhost", "node_parent").orderBy(F.desc("messages"), "node")
    return totals.withColumn("rank", F.row_number().over(order)).filter(F.col("rank") <= top)


def fold_nodes(frame: DataFrame, ranks: DataFrame) -> DataFrame:
    """``frame`` (with container, vhost, node_parent, node) plus ``node_group``: the node
    itself when ``ranks`` keeps it, else its parent's ``(other ...)`` label."""
    kept = ranks.select(*(F.col(k).alias(f"_kept_{k}") for k in _NODE_KEYS), F.lit(True).alias("_kept"))
    on = [frame[k].eqNullSafe(kept[f"_kept_{k}"]) for k in _NODE_KEYS]
    return (frame.join(kept, on, "left")
            .withColumn("node_group", F.when(F.col("_kept"), F.col("node")).otherwise(_folded_label()))
            .drop("_kept", *(f"_kept_{k}" for k in _NODE_KEYS)))


def _pair() -> Column:
    return F.concat(F.coalesce(F.col("proto_in"), F.lit("*")), F.lit("->"),
                    F.coalesce(F.col("proto_out"), F.lit("*")))


def _bytes() -> Column:
    return F.coalesce(F.sum("size"), F.lit(0)).cast("long").alias("bytes")


def traffic_per_minute(events: DataFrame) -> DataFrame:
    """Messages and bytes per minute (UTC) per gateway (``container``), vhost, AMQP node
    (``node``: see ``node_column``; ``node_parent``: see ``node_parent_column``), user,
    event and protocol pair."""
    minute = F.timestamp_seconds(F.floor(F.col("ts_us") / 60_000_000) * 60).alias("minute")
    return (events.filter(F.col("event").isin(*TRAFFIC_EVENTS))
            .groupBy(minute, "container", "vhost", node_parent_column().alias("node_parent"),
                     node_column().alias("node"), "user", "event",
                     "proto_in", "proto_out", _pair().alias("protocol_pair"))
            .agg(F.count(F.lit(1)).alias("messages"), _bytes()))


def traffic_timeline(events: DataFrame, bucket_seconds: int, ranks: DataFrame) -> DataFrame:
    """Messages and bytes per ``bucket_seconds`` bucket (``bucket_start``: epoch seconds,
    UTC) per gateway, vhost, folded AMQP node (``node_group``), user, event and protocol
    pair; ``ranks`` from ``node_ranks``."""
    start = (F.floor(F.col("ts_us") / (bucket_seconds * 1_000_000)) * bucket_seconds).cast("long")
    keys = ("bucket_start", "event", "container", "vhost", "user", "protocol_pair")
    per_node = (events.filter(F.col("event").isin(*TRAFFIC_EVENTS))
                .groupBy(start.alias("bucket_start"), "event", "container", "vhost",
                         node_parent_column().alias("node_parent"), node_column().alias("node"),
                         "user", _pair().alias("protocol_pair"))
                .agg(F.count(F.lit(1)).alias("messages"), _bytes()))
    return (fold_nodes(per_node, ranks).groupBy(*keys, "node_group")
            .agg(F.sum("messages").alias("messages"), F.sum("bytes").alias("bytes"))
            .withColumn("bucket_seconds", F.lit(bucket_seconds)))


def protocol_pairs(events: DataFrame) -> DataFrame:
    """Deliveries and forwards per gateway and protocol pair (``0-9-1->1.0`` ...);
    ``redeliveries``: deliveries after a failed attempt (``delivery_count`` > 0)."""
    again = F.when(F.coalesce(F.col("delivery_count"), F.lit(0)) > 0, 1).otherwise(0)
    return (events.filter(F.col("event").isin(*OUT_EVENTS))
            .groupBy("container", _pair().alias("protocol_pair"))
            .agg(F.count(F.lit(1)).alias("messages"), F.sum(again).cast("long").alias("redeliveries"),
                 _bytes()))


def _latency(events: DataFrame, keys: tuple[str, ...]) -> DataFrame:
    q = F.percentile_approx("latency_us", list(PERCENTILES), PERCENTILE_ACCURACY)
    agg = (events.filter((F.col("event") == "settled") & F.col("latency_us").isNotNull())
           .groupBy(*keys)
           .agg(F.count(F.lit(1)).alias("settled"), q.alias("q"),
                F.max("latency_us").alias("max_us"), F.avg("latency_us").alias("mean_us")))
    return agg.select(*keys, "settled",
                      F.col("q")[0].alias("p50_us"), F.col("q")[1].alias("p95_us"),
                      F.col("q")[2].alias("p99_us"), "max_us", "mean_us")


def latency_overall(events: DataFrame) -> DataFrame:
    """The same figures over every settlement of every ledger: one row (``settled`` 0 and
    nulls when nothing was settled)."""
    return _latency(events, ())


def latency_by_node(events: DataFrame) -> DataFrame:
    """p50/p95/p99/max latency (microseconds) from receive to settle per gateway
    (``container``)."""
    return _latency(events, ("container",))


def latency_by_queue(events: DataFrame) -> DataFrame:
    """p50/p95/p99/max latency (microseconds) from receive to settle per AMQP node the
    settlement happened on: per gateway, vhost and queue, generated queue names grouped
    (``generated_name``; settlements recorded without a queue form one row with ``queue``
    null)."""
    return _latency(events.withColumn("queue", generated_name(F.col("queue"))),
                    ("container", "vhost", "queue"))


def throughput(traffic: DataFrame, ranks: DataFrame) -> DataFrame:
    """Messages per second per gateway, vhost, direction (``in``: received; ``out``:
    delivered or forwarded) and route (the folded AMQP node of ``fold_nodes``, generated
    names grouped), from ``traffic_per_minute``: ``messages``, ``minutes`` with traffic,
    ``peak_per_s`` (the busiest minute), ``peak_minute_us``, ``mean_per_s`` (from the
    route's first to its last minute)."""
    direction = F.when(F.col("event") == "received", F.lit("in")).otherwise(F.lit("out"))
    per_minute = (fold_nodes(traffic, ranks)
                  .groupBy("minute", "container", "vhost", direction.alias("direction"),
                           generated_name(F.col("node_group")).alias("route"))
                  .agg(F.sum("messages").alias("m")))
    seconds = F.unix_timestamp("minute")
    span = (F.max(seconds) - F.min(seconds)) / 60 + 1
    busiest = F.max_by(seconds * 1_000_000, "m")
    return (per_minute.groupBy("container", "vhost", "direction", "route")
            .agg(F.sum("m").cast("long").alias("messages"), F.count(F.lit(1)).alias("minutes"),
                 (F.max("m") / 60.0).alias("peak_per_s"), busiest.alias("peak_minute_us"),
                 (F.sum("m") / (span * 60.0)).alias("mean_per_s")))


def ledger_gaps(events: DataFrame) -> DataFrame:
    """The ledger's gaps: container, ``ts_us`` (noticed), ``since_us``, ``count`` (records
    that could not be written)."""
    return (events.filter(F.col("event") == "gap")
            .select("container", "ts_us", "since_us", F.coalesce(F.col("count"), F.lit(0)).alias("count")))


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
    """The ``limit`` users who published most (received events), by messages then bytes,
    with their ``rank`` (1 = most).

    The top rows are taken with a sort and a limit, and ranked on the driver (``limit``
    rows): a ranking window over all users would have no partition, and Spark would move
    every row to one task (and warn ``WindowExec: No Partition Defined`` for each plan).
    """
    per_user = (events.filter(F.col("event") == "received")
                .groupBy("container", "vhost", "user")
                .agg(F.count(F.lit(1)).alias("messages"), _bytes(),
                     F.countDistinct("connection").alias("connections")))
    top = per_user.orderBy(F.desc("messages"), F.desc("bytes"), "container", "vhost", "user") \
        .limit(limit).collect()
    schema = T.StructType(per_user.schema.fields + [T.StructField("rank", T.IntegerType(), False)])
    return events.sparkSession.createDataFrame(
        [(*row, rank) for rank, row in enumerate(top, start=1)], schema)


def event_counts(events: DataFrame) -> DataFrame:
    """Events per gateway, kind and outcome: the report's headline numbers, with the
    first and last event's time (``first_us``, ``last_us``: the ledger's span)."""
    return (events.groupBy("container", "event", "outcome")
            .agg(F.count(F.lit(1)).alias("events"), _bytes(),
                 F.min("ts_us").alias("first_us"), F.max("ts_us").alias("last_us")))
