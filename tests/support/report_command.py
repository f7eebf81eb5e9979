"""The ledger report as an operator starts it, in a child process with its own Spark
driver (``python -m gateway.cli report``: what the ``amqp-gateway report`` command
runs), and its Parquet tables read back without Spark."""
from __future__ import annotations

import os
import subprocess
import sys
from typing import Optional, Sequence

import pytest

from tests.support.small_spark import submit_args

__all__ = ["REPO", "child_env", "run_report_command", "table_rows"]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def child_env(extra: Optional[dict] = None) -> dict[str, str]:
    """This interpreter for Spark's Python (driver and workers), no inherited Py4J port,
    Spark tuned for tiny inputs (``small_spark``; ``extra`` may replace it)."""
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_GATEWAY_PORT"}
    env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               PYTHONPATH=os.pathsep.join(filter(None, [REPO, env.get("PYTHONPATH")])),
               PYSPARK_SUBMIT_ARGS=submit_args())
    env.update(extra or {})
    return env


def run_report_command(ledgers: Sequence[str], out: str, *args: str,
                       timeout: float = 900.0) -> subprocess.CompletedProcess:
    """``amqp-gateway report --ledger L... --out OUT ARGS`` on a local Spark of two
    threads; asserts exit 0 (with the end of its output when not)."""
    command = [sys.executable, "-m", "gateway.cli", "report", "--out", out, "--master", "local[2]",
               "--driver-memory", "512m", *args]
    for ledger in ledgers:
        command += ["--ledger", ledger]
    proc = subprocess.run(command, cwd=os.path.dirname(out), env=child_env({"SPARK_LOCAL_IP": "127.0.0.1"}),
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    return proc


def table_rows(out, table: str) -> list[dict]:
    """A Parquet table of the report, read without Spark, in a stable order."""
    parquet = pytest.importorskip("pyarrow.parquet")
    return sorted(parquet.read_table(os.path.join(str(out), "tables", table)).to_pylist(), key=repr)
