"""The report of ``single_gateway_ledger`` that several test files read (the local Spark
session, ``spark``, is the test process's one: ``tests/conftest.py``)."""
from __future__ import annotations

import io

import pytest

from tests.support.ledgers import single_gateway_ledger


def pytest_configure(config):
    config.addinivalue_line("markers", "pipeline: needs PySpark and Java (local Spark)")


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
