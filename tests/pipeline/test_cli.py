"""``pipeline/report.py`` run as a script, as spark-submit runs it (its own local Spark)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gateway.ledger import EventKind, LedgerWriter
from pipeline.environment import find_java

pytestmark = pytest.mark.pipeline


@pytest.mark.skipif(find_java() is None, reason="no Java runtime")
def test_report_script_runs_with_progress_lines(tmp_path):
    pytest.importorskip("pyspark")
    w = LedgerWriter(str(tmp_path / "ledger"), container_id="gw-A")
    for i in range(10):
        w.record(EventKind.RECEIVED, 1_700_000_000.0 + i, vhost="/", user="u", gateway_id=f"g{i}", size=1)
    w.close(1_700_000_100.0)
    repo = os.getcwd()
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_GATEWAY_PORT"}
    proc = subprocess.run(
        [sys.executable, os.path.join(repo, "pipeline", "report.py"), "--ledger", str(tmp_path / "ledger"),
         "--out", str(tmp_path / "out"), "--master", "local[1]"],
        cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "[report 1/6" in proc.stderr and "[report 6/6" in proc.stderr
    assert (tmp_path / "out" / "report.html").exists()
    assert (tmp_path / "out" / "tables" / "traffic_per_minute").is_dir()
