"""One local Spark session for all pipeline tests (starting one takes ~10 s)."""
from __future__ import annotations

import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "pipeline: needs PySpark and Java (local Spark)")


@pytest.fixture(scope="session")
def spark():
    pyspark_sql = pytest.importorskip("pyspark.sql")
    from pipeline.environment import find_java

    if find_java() is None:
        pytest.skip("no Java runtime (apt-get install openjdk-17-jre-headless)")
    session = (pyspark_sql.SparkSession.builder.master("local[2]")
               .appName("pipeline-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.ui.showConsoleProgress", "false")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
