"""A local Spark session for tests: two threads, UTC, quiet, tuned for tiny inputs
(``small_spark``); the test is skipped when PySpark or a Java runtime is missing."""
from __future__ import annotations

from typing import Any

import pytest

from tests.support import small_spark

__all__ = ["local_session"]


def local_session(app_name: str) -> Any:
    """A started ``SparkSession`` (the caller stops it)."""
    pyspark_sql = pytest.importorskip("pyspark.sql")
    from pipeline.environment import find_java

    if find_java() is None:
        pytest.skip("no Java runtime (apt-get install openjdk-17-jre-headless)")
    builder = (pyspark_sql.SparkSession.builder.master("local[2]")
               .appName(app_name)
               .config("spark.ui.enabled", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.ui.showConsoleProgress", "false"))
    for key, value in small_spark.session_conf().items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
