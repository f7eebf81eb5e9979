"""The report as operators start it on a cluster, each with its own Spark driver:
``python -m gateway.cli report --master spark://...`` (what the ``amqp-gateway report``
command runs) and ``spark-submit --master spark://... pipeline/report.py``. The cluster is a
real Spark standalone master and worker (``tests/support/spark_cluster``) started from the
installed PySpark; both runs must write the same tables as a local run of the same report
(in this process's local Spark). Two drivers, two executors and two daemons, a minute or
more each on a busy machine: keep it to these."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pipeline.environment import find_java
from pipeline.report import TABLES
from pipeline.spark_session import LOG4J2_PROPERTIES
from tests.support.ledgers import small_ledger
from tests.support.report_command import REPO, child_env, table_rows
from tests.support.small_spark import conf_args, submit_args
from tests.support.spark_cluster import SparkStandalone

pytestmark = [pytest.mark.pipeline, pytest.mark.slow,
              pytest.mark.skipif(find_java() is None, reason="no Java runtime for Spark"),
              pytest.mark.timeout(1500)]

RECEIVED, DELIVERED, SIZE = 7, 4, 10
#: a driver's and an executor's memory on the test cluster (the worker offers 1g)
SMALL = ("--conf", "spark.executor.memory=512m", "--conf", "spark.driver.memory=512m")


def assert_report(proc: subprocess.CompletedProcess, progress: str, out) -> None:
    """Exit 0, the progress lines in ``progress``, every table, the HTML, known counts."""
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert "[report 1/7" in progress and "[report 7/7" in progress, progress[-3000:]
    assert (out / "report.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert (out / "charts" / "latency_by_queue.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for table in TABLES:
        assert (out / "tables" / table / "_SUCCESS").exists(), table
    counts = {(r["event"], r["outcome"]): r["events"] for r in table_rows(out, "event_counts")}
    assert counts == {("received", None): RECEIVED, ("routed", None): RECEIVED,
                      ("delivered", None): DELIVERED, ("settled", "accepted"): DELIVERED}
    traffic = {(r["node"], r["user"], r["event"]): (r["messages"], r["bytes"])
               for r in table_rows(out, "traffic_per_minute")}
    assert traffic == {("/exchanges/ex/k", "alice", "received"): (RECEIVED, RECEIVED * SIZE),
                       ("/queues/q", "bob", "delivered"): (DELIVERED, DELIVERED * SIZE)}
    [latency] = table_rows(out, "latency_by_queue")
    assert (latency["container"], latency["vhost"], latency["queue"], latency["settled"]) == \
        ("gw-A", "/", "q", DELIVERED)
    [unsettled] = table_rows(out, "unsettled_summary")
    assert (unsettled["place"], unsettled["state"], unsettled["detail"], unsettled["messages"]) == \
        ("q", "still queued", "never delivered", RECEIVED - DELIVERED)


def assert_only_progress(terminal: str) -> None:
    """The operator's terminal: the report's progress lines, nothing of Spark's."""
    lines = [line for line in terminal.splitlines() if line.strip()]
    assert lines and all(line.startswith("[report ") for line in lines), terminal[-3000:]


def test_the_report_runs_on_a_standalone_cluster_with_the_local_tables(spark, tmp_path):
    """One test, so that one worker of pytest-xdist starts the cluster once."""
    import io

    from pipeline.progress import Progress
    from pipeline.report import run_report

    ledger = str(tmp_path / "ledger")
    small_ledger(ledger, received=RECEIVED, delivered=DELIVERED, size=SIZE)
    local = tmp_path / "local"
    run_report([ledger], str(local), spark=spark, progress=Progress(7, stream=io.StringIO()))

    cluster = SparkStandalone(str(tmp_path / "standalone"))
    cluster.start()
    try:
        # `amqp-gateway report --master spark://...`: the driver here, the executor on the worker;
        # the operator's terminal shows the progress lines only (no log4j lines, no JVM
        # warning, no task bar: stderr is not a terminal)
        out = tmp_path / "cluster"
        proc = subprocess.run(
            [sys.executable, "-m", "gateway.cli", "report", "--ledger", ledger, "--out", str(out),
             "--master", cluster.url, "--driver-memory", "512m"],
            cwd=str(tmp_path), env=child_env({"SPARK_LOCAL_IP": "127.0.0.1",
                                              "PYSPARK_SUBMIT_ARGS": submit_args(*SMALL)}),
            capture_output=True, text=True, timeout=560)
        assert_report(proc, proc.stderr, out)
        assert f"starting Spark on {cluster.url}" in proc.stderr
        assert_only_progress(proc.stderr)
        assert proc.stdout == ""
        assert len(cluster.applications()) == 1, "the worker ran this job's executor"
        assert_same_tables(out, local)

        # spark-submit --master spark://... pipeline/report.py, with the README's log4j2 option
        spark_submit = os.path.join(os.path.dirname(sys.executable), "spark-submit")
        assert os.access(spark_submit, os.X_OK), f"{spark_submit} missing: PySpark installs it"
        out = tmp_path / "submitted"
        proc = subprocess.run(
            [spark_submit, "--master", cluster.url, *SMALL, *conf_args(),
             "--driver-java-options", f"-Dlog4j2.configurationFile=file:{LOG4J2_PROPERTIES}",
             os.path.join(REPO, "pipeline", "report.py"), "--ledger", ledger, "--out", str(out)],
            cwd=str(tmp_path), env=child_env({"SPARK_LOCAL_IP": "127.0.0.1"}),
            capture_output=True, text=True, timeout=560)
        # spark-submit runs the Python driver with its stderr merged into spark-submit's stdout
        terminal = proc.stdout + proc.stderr
        assert_report(proc, terminal, out)
        assert "starting Spark on the spark-submit master" in terminal
        assert " WARN " not in terminal and " INFO " not in terminal and "WindowExec" not in terminal, terminal
        assert len(cluster.applications()) == 2, "the worker ran this job's executor"
        assert_same_tables(out, local)
    finally:
        cluster.stop()


def assert_same_tables(out, reference) -> None:
    for table in TABLES:
        assert table_rows(out, table) == table_rows(reference, table), table
