"""The Spark schema follows records.COLUMNS."""
from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import types as T  # noqa: E402

from gateway.ledger.records import COLUMNS  # noqa: E402
from pipeline.schema import CORRUPT_COLUMN, ledger_schema, spark_type  # noqa: E402


def test_schema_has_every_column_in_order_plus_corrupt():
    schema = ledger_schema()
    assert [f.name for f in schema.fields] == [n for n, _ in COLUMNS] + [CORRUPT_COLUMN]
    assert all(f.nullable for f in schema.fields)
    assert schema["ts_us"].dataType == T.LongType()
    assert schema["routed_to"].dataType == T.ArrayType(T.StringType())
    assert schema["headers"].dataType == T.MapType(T.StringType(), T.StringType())
    assert [f.name for f in ledger_schema(with_corrupt=False).fields][-1] == COLUMNS[-1][0]


def test_unknown_type_is_refused():
    with pytest.raises(ValueError) as info:
        spark_type("decimal(10,2)")
    assert "decimal" in str(info.value)
