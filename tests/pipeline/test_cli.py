"""The report as operators start it, each with its own Spark: ``spark-submit pipeline/report.py``
(the cluster way; here ``--master local[1]``) and ``python -m gateway.cli report`` (what the
``amqp-gateway report`` command runs). Two Spark starts, ~15 s each: keep it to these."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gateway.ledger import EventKind as K, Outcome, Protocol
from tests.support.ledger_v1 import V1LedgerWriter as LedgerWriter  # any event, any field
from pipeline.environment import find_java
from pipeline.report import TABLES

pytestmark = [pytest.mark.pipeline,
              pytest.mark.skipif(find_java() is None, reason="no Java runtime for Spark"),
              pytest.mark.timeout(300)]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
T0 = 1_700_000_000.0
RECEIVED, DELIVERED, SIZE = 7, 4, 10


def small_ledger(directory: str) -> None:
    """gw-A: alice publishes 7 messages (0-9-1) to ex/k, bob takes 4 of them from q (1.0)
    and accepts them."""
    w = LedgerWriter(directory, container_id="gw-A")
    for i in range(RECEIVED):
        common = dict(vhost="/", gateway_id=f"a-{i}", size=SIZE)
        w.record(K.RECEIVED, T0 + i, user="alice", proto_in=Protocol.AMQP091, exchange="ex",
                 routing_key="k", **common)
        w.record(K.ROUTED, T0 + i, routed_to=["q"], exchange="ex", routing_key="k", **common)
        if i < DELIVERED:
            w.record(K.DELIVERED, T0 + i + 0.001, user="bob", proto_in=Protocol.AMQP091,
                     proto_out=Protocol.AMQP10, queue="q", **common)
            w.record(K.SETTLED, T0 + i + 0.002, user="bob", proto_in=Protocol.AMQP091,
                     proto_out=Protocol.AMQP10, queue="q", outcome=Outcome.ACCEPTED,
                     received_at=T0 + i, **common)
    w.close(T0 + 100)


def child_env() -> dict[str, str]:
    """This interpreter for Spark's Python (driver and workers), no inherited Py4J port."""
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_GATEWAY_PORT"}
    env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               PYTHONPATH=os.pathsep.join(filter(None, [REPO, env.get("PYTHONPATH")])))
    return env


def rows(out, table: str) -> list[dict]:
    """A Parquet table of the report, read without Spark."""
    parquet = pytest.importorskip("pyarrow.parquet")
    return parquet.read_table(str(out / "tables" / table)).to_pylist()


def assert_report(proc: subprocess.CompletedProcess, progress: str, out) -> None:
    """Exit 0, the progress lines in ``progress``, every table, the HTML, known counts."""
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "[report 1/6" in progress and "[report 6/6" in progress, progress[-3000:]
    assert (out / "report.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert (out / "charts" / "latency_by_queue.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for table in TABLES:
        assert (out / "tables" / table / "_SUCCESS").exists(), table
    counts = {(r["event"], r["outcome"]): r["events"] for r in rows(out, "event_counts")}
    assert counts == {("received", None): RECEIVED, ("routed", None): RECEIVED,
                      ("delivered", None): DELIVERED, ("settled", "accepted"): DELIVERED}
    traffic = {(r["node"], r["user"], r["event"]): (r["messages"], r["bytes"])
               for r in rows(out, "traffic_per_minute")}
    assert traffic == {("/exchanges/ex/k", "alice", "received"): (RECEIVED, RECEIVED * SIZE),
                       ("/queues/q", "bob", "delivered"): (DELIVERED, DELIVERED * SIZE)}
    [latency] = rows(out, "latency_by_queue")
    assert (latency["container"], latency["vhost"], latency["queue"], latency["settled"]) == \
        ("gw-A", "/", "q", DELIVERED)


def test_spark_submit_runs_the_report_script(tmp_path):
    pytest.importorskip("pyspark")
    spark_submit = os.path.join(os.path.dirname(sys.executable), "spark-submit")
    assert os.access(spark_submit, os.X_OK), f"{spark_submit} missing: PySpark installs it"
    small_ledger(str(tmp_path / "ledger"))
    proc = subprocess.run(
        [spark_submit, "--master", "local[1]", os.path.join(REPO, "pipeline", "report.py"),
         "--ledger", str(tmp_path / "ledger"), "--out", str(tmp_path / "out")],
        cwd=str(tmp_path), env=child_env(), capture_output=True, text=True, timeout=280)
    # spark-submit runs the Python driver with its stderr merged into spark-submit's stdout
    progress = proc.stdout + proc.stderr
    assert_report(proc, progress, tmp_path / "out")
    # the master is spark-submit's: the report does not start a local[*] of its own
    assert "starting Spark on the spark-submit master" in progress


def test_amqp_gateway_report_command_runs_the_report(tmp_path):
    pytest.importorskip("pyspark")
    small_ledger(str(tmp_path / "ledger"))
    proc = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "report", "--ledger", str(tmp_path / "ledger"),
         "--out", str(tmp_path / "out"), "--master", "local[1]"],
        cwd=str(tmp_path), env=child_env(), capture_output=True, text=True, timeout=280)
    assert_report(proc, proc.stderr, tmp_path / "out")
    assert "starting Spark on local[1]" in proc.stderr
