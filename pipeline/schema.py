"""The Spark schema of ledger lines, built from ``gateway.ledger.records.COLUMNS``.

The pipeline imports only the records module of the gateway: the column list is the
contract, and a schema given up front spares Spark a pass to infer one.
"""
from __future__ import annotations

from pyspark.sql import types as T

from gateway.ledger.records import COLUMNS, LEDGER_SCHEMA_VERSION

__all__ = ["CORRUPT_COLUMN", "LEDGER_SCHEMA_VERSION", "ledger_schema", "spark_type"]

#: Spark puts a line it cannot parse (a torn last line after a crash) here.
CORRUPT_COLUMN = "_corrupt_record"

_SIMPLE = {"int": T.IntegerType(), "long": T.LongType(), "string": T.StringType(),
           "double": T.DoubleType(), "boolean": T.BooleanType()}


def spark_type(name: str) -> T.DataType:
    """Spark type for a COLUMNS type name; raises ValueError for one it does not know."""
    if name in _SIMPLE:
        return _SIMPLE[name]
    if name.startswith("array<") and name.endswith(">"):
        return T.ArrayType(spark_type(name[6:-1]))
    if name.startswith("map<") and name.endswith(">"):
        key, _, value = name[4:-1].partition(",")
        return T.MapType(spark_type(key.strip()), spark_type(value.strip()))
    raise ValueError(f"ledger column type {name!r} has no Spark mapping")


def ledger_schema(with_corrupt: bool = True) -> T.StructType:
    """All ledger columns (nullable), plus the corrupt-record column when asked."""
    fields = [T.StructField(name, spark_type(kind), True) for name, kind in COLUMNS]
    if with_corrupt:
        fields.append(T.StructField(CORRUPT_COLUMN, T.StringType(), True))
    return T.StructType(fields)
