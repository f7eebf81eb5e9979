"""Read ledger directories into Spark and stage them as the ``events`` Parquet table.

Ledger segments are JSON Lines (``*.jsonl`` closed, ``*.jsonl.open`` being written or
left by a crash). They are read with the schema from ``records.COLUMNS`` in PERMISSIVE
mode: a line Spark cannot parse (the torn last line of a crashed writer, or anything
else that is not a ledger record) lands in the corrupt-record column instead of failing
the job. Such lines, and lines without ``event`` or ``ts_us``, are counted as malformed
and kept apart: the ``events`` table is partitioned by ``valid``, so later stages read
``valid=true`` only and the malformed count costs nothing extra.
"""
from __future__ import annotations

from typing import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from gateway.ledger.records import COLUMN_NAMES

from .schema import CORRUPT_COLUMN, ledger_schema

__all__ = ["SEGMENT_GLOB", "load_events", "read_ledgers", "stage_events"]

#: Files of a ledger directory that are segments (closed or open).
SEGMENT_GLOB = "*.jsonl*"


def read_ledgers(spark: SparkSession, ledger_dirs: Sequence[str]) -> DataFrame:
    """All segment lines of the given directories (local paths or any Hadoop URI:
    ``s3a://``, ``hdfs://``), ledger columns plus ``corrupt_record`` and ``valid``."""
    raw = (spark.read.schema(ledger_schema())
           .option("mode", "PERMISSIVE")
           .option("columnNameOfCorruptRecord", CORRUPT_COLUMN)
           .option("pathGlobFilter", SEGMENT_GLOB)
           .json(list(ledger_dirs)))
    valid = F.col(CORRUPT_COLUMN).isNull() & F.col("event").isNotNull() & F.col("ts_us").isNotNull()
    return raw.select(*COLUMN_NAMES, F.col(CORRUPT_COLUMN).alias("corrupt_record"),
                      valid.alias("valid"))


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
