"""One local Spark session for all pipeline tests (starting one takes ~10 s), and the
report of ``single_gateway_ledger`` that several test files read."""
from __future__ import annotations

import io

import pytest

from tests.support.ledgers import single_gateway_ledger


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
               # tiny inputs: compiling generated code for every plan costs more than it
               # saves (a third of a test report's time); results are the same
               .config("spark.sql.codegen.wholeStage", "false")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def single_gateway_report(spark, tmp_path_factory):
    """(ReportSummary, output directory) of the report over ``single_gateway_ledger``,
    ``top=2``."""
    from pipeline.progress import Progress
    from pipeline.report import run_report

    root = tmp_path_factory.mktemp("single-gateway")
    ledger = str(root / "ledger-a")
    single_gateway_ledger(ledger)
    out = root / "out"
    summary = run_report([ledger], str(out), spark=spark, progress=Progress(7, stream=io.StringIO()), top=2)
    return summary, out
