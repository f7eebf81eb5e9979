"""Read ledger directories into Spark and stage them as the ``events`` Parquet table.

Ledger segments are JSON Lines (``*.jsonl`` closed, ``*.jsonl.open`` being written or
left by a crash). A line is a v2 record (a JSON array: kind tag, then fields by position,
``records.RECORDS``) or, in segments written before, a v1 event (a JSON object with the
``events`` columns). Both are read as text: v1 lines with the schema from
``records.COLUMNS`` in PERMISSIVE mode, v2 lines as arrays of text, each field cast by
position. The v2 records are then joined once, as ``records.EVENTS_OF`` says: each event
with its context (same file: every segment starts with the contexts it uses) and its
message (same container and gateway id, in any file), into the rows of the same
``events`` table v1 lines make. A line Spark cannot parse (the torn last line of a
crashed writer, or anything else that is not a ledger record), a v1 line without
``event`` or ``ts_us`` and a v2 line of no known kind are malformed and kept apart: the
``events`` table is partitioned by ``valid``, so later stages read ``valid=true`` only
and the malformed count costs nothing extra.
"""
from __future__ import annotations

from functools import reduce
from typing import Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from gateway.ledger.records import (COLUMN_NAMES, CONTEXT, EVENTS_OF, MESSAGE, RECORDS, VERDICT,
                                    LEDGER_SCHEMA_VERSION)

from .schema import CORRUPT_COLUMN, ledger_schema, spark_type

__all__ = ["SEGMENT_GLOB", "load_events", "read_ledgers", "stage_events"]

#: Files of a ledger directory that are segments (closed or open).
SEGMENT_GLOB = "*.jsonl*"
_TEXT = T.ArrayType(T.StringType())
_FROM_CONTEXT = ("container", "vhost", "user", "connection", "link")


def read_ledgers(spark: SparkSession, ledger_dirs: Sequence[str]) -> DataFrame:
    """All events of the given directories (local paths or any Hadoop URI: ``s3a://``,
    ``hdfs://``), ledger columns plus ``corrupt_record`` and ``valid`` (malformed lines
    are rows of their own, with ``valid`` false)."""
    lines = (spark.read.option("pathGlobFilter", SEGMENT_GLOB).text(list(ledger_dirs))
             .filter(F.trim("value") != "")
             .select("value", F.input_file_name().alias("file"),
                     F.from_json("value", _TEXT).alias("a")))
    v1 = _v1_events(lines.filter(~F.col("value").startswith("[")))
    v2 = lines.filter(F.col("value").startswith("["))
    known = F.col("a").isNotNull() & F.get("a", 0).isin(*RECORDS)
    bad_v2 = v2.filter(~known).select(
        *(F.lit(None).cast(f.dataType).alias(f.name) for f in ledger_schema(with_corrupt=False).fields),
        F.col("value").alias("corrupt_record"), F.lit(False).alias("valid"))
    return reduce(DataFrame.unionByName, [v1, _v2_events(v2.filter(known)), bad_v2])


def _v1_events(lines: DataFrame) -> DataFrame:
    parsed = lines.select(F.from_json("value", ledger_schema(), {
        "mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_COLUMN}).alias("j")).select("j.*")
    valid = F.col(CORRUPT_COLUMN).isNull() & F.col("event").isNotNull() & F.col("ts_us").isNotNull()
    return parsed.select(*COLUMN_NAMES, F.col(CORRUPT_COLUMN).alias("corrupt_record"),
                         valid.alias("valid"))


def _records(lines: DataFrame) -> DataFrame:
    """Every v2 record: ``file``, ``tag`` and each field name of ``RECORDS`` (typed; null
    where the record's kind has no such field)."""
    names: dict[str, str] = {}
    for fields in RECORDS.values():
        names.update(fields)
    columns = []
    for name, kind in names.items():
        value = None
        for tag, fields in RECORDS.items():
            position = [n for n, _ in fields].index(name) + 1 if name in dict(fields) else None
            if position is not None:
                field = F.get("a", position)
                value = (F.when(F.col("tag") == tag, field) if value is None
                         else value.when(F.col("tag") == tag, field))
        columns.append(_typed(value, kind).alias(name))
    return lines.select("file", F.get("a", 0).alias("tag"), "a").select("file", "tag", *columns)


def _typed(text: Column, kind: str) -> Column:
    if kind == "string":
        return text
    if kind.startswith(("array<", "map<")):
        return F.from_json(text, spark_type(kind))
    return text.cast(spark_type(kind))


def _v2_events(lines: DataFrame) -> DataFrame:
    """The events of the v2 records, each with its context (same file) and its message
    (same container and gateway id), as ``EVENTS_OF`` says: one pass over the records."""
    records = _records(lines)
    context_fields = ["file"] + [n for n, _ in RECORDS[CONTEXT]]
    contexts = (records.filter(F.col("tag") == CONTEXT).select(*context_fields)
                .dropDuplicates(["file", "ctx"]))
    message_fields = ["gateway_id", "exchange", "routing_key", "message_id", "correlation_id", "size",
                      "origin_id", "origin_container"]
    messages = (records.filter(F.col("tag").isin(MESSAGE, VERDICT) & F.col("gateway_id").isNotNull())
                .select("file", "ctx", *message_fields)
                .join(contexts.select("file", "ctx", "container", "proto"), ["file", "ctx"], "left")
                .select("container", "proto", *message_fields)
                .dropDuplicates(["container", "gateway_id"]))
    rec = records.filter(F.col("tag").isin(*EVENTS_OF))
    joined = (rec.select(*(F.col(c).alias("rec." + c) for c in rec.columns))
              .join(contexts.select(*(F.col(c).alias("ctx." + c) for c in context_fields)),
                    (F.col("`rec.file`") == F.col("`ctx.file`"))
                    & (F.col("`rec.ctx`") == F.col("`ctx.ctx`")), "left")
              .join(messages.select(*(F.col(c).alias("msg." + c) for c in messages.columns)),
                    (F.col("`ctx.container`") == F.col("`msg.container`"))
                    & (F.col("`rec.gateway_id`") == F.col("`msg.gateway_id`")), "left"))
    rows = None
    for tag, specs in EVENTS_OF.items():
        made = F.array(*(_event_row(spec, "received_at" in dict(RECORDS[tag])) for spec in specs))
        rows = (F.when(F.col("`rec.tag`") == tag, made) if rows is None
                else rows.when(F.col("`rec.tag`") == tag, made))
    return (joined.select(F.explode(rows).alias("e")).select("e.*")
            .filter(F.col("event").isNotNull())
            .withColumn("corrupt_record", F.lit(None).cast("string"))
            .withColumn("valid", F.lit(True)))


def _event_row(spec: dict[str, tuple[str, ...]], timed: bool) -> Column:
    """The ``events`` row ``spec`` makes of a joined record, as a struct."""
    def source(name: str) -> Column:
        return F.lit(name[1:]) if name.startswith("=") else F.col(f"`{name}`")

    sources = {c: ("ctx." + c,) for c in _FROM_CONTEXT} | spec
    latency = (F.bround((F.col("`rec.ts`") - F.col("`rec.received_at`")) * 1_000_000)
               if timed else F.lit(None))
    computed = {"v": F.lit(LEDGER_SCHEMA_VERSION),
                "ts_us": F.bround(F.col("`rec.ts`") * 1_000_000), "latency_us": latency}
    columns = []
    for field in ledger_schema(with_corrupt=False).fields:
        if field.name in computed:
            value = computed[field.name]
        elif field.name in sources:
            found = [source(s) for s in sources[field.name]]
            value = found[0] if len(found) == 1 else F.coalesce(*found)
        else:
            value = F.lit(None)
        columns.append(value.cast(field.dataType).alias(field.name))
    return F.struct(*columns)


def stage_events(spark: SparkSession, ledger_dirs: Sequence[str], path: str) -> None:
    """Parse the ledgers once and write them as Parquet at ``path`` (partitioned by ``valid``)."""
    read_ledgers(spark, ledger_dirs).write.mode("overwrite").partitionBy("valid").parquet(path)


def load_events(spark: SparkSession, path: str) -> tuple[DataFrame, DataFrame]:
    """(valid events, malformed lines) from a staged ``events`` table."""
    # An explicit schema: with no input line at all Spark writes no partition, and
    # inferring a schema from nothing would fail.
    schema = ledger_schema(with_corrupt=False) \
        .add("corrupt_record", T.StringType()).add("valid", T.StringType())
    staged = spark.read.schema(schema).parquet(path)
    # partition values come back as text ("true"/"false") whatever type was written
    is_valid = F.col("valid").cast("string") == "true"
    events = staged.filter(is_valid).drop("valid", "corrupt_record")
    malformed = staged.filter(~is_valid).select("corrupt_record")
    return events, malformed
