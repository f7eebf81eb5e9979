"""``make run`` with the ports on the command line, as the README tells a newcomer:
``MANAGEMENT=HOST:PORT`` turns the management API on there, next to LISTEN and METRICS."""
from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import threading
import urllib.request

import pytest

from tests.support.gateway_process import REPO, default_config

pytestmark = pytest.mark.integration


def test_make_run_serves_the_management_api_where_management_says(tmp_path):
    cfg = tmp_path / "gw.yaml"
    cfg.write_text(default_config(users={"admin": ("s3cret", False, ("administrator",))})
                   + f"state_dir: {tmp_path / 'var'}\n")
    # -o: the virtual environment the tests run in is taken as it is (a re-install under
    # the other tests' feet would break them)
    proc = subprocess.Popen(
        ["make", "--no-print-directory", "-o", ".venv/.installed", "run", f"CONFIG={cfg}",
         "LISTEN=127.0.0.1:0",
         "METRICS=127.0.0.1:0", "MANAGEMENT=127.0.0.1:0"], cwd=REPO, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"))
    lines: list[str] = []
    found = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if "management API on http://" in line:
                found.set()
    threading.Thread(target=read, daemon=True).start()
    try:
        assert found.wait(60), "".join(lines)
        [command] = [line for line in lines if "amqp-gateway run " in line]
        assert "--management 127.0.0.1:0" in command, command
        port = int(re.search(r"management API on http://127\.0\.0\.1:(\d+)/", "".join(lines)).group(1))
        req = urllib.request.Request(f"http://127.0.0.1:{port}/api/overview")
        req.add_header("Authorization", "Basic " + base64.b64encode(b"admin:s3cret").decode())
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert json.load(resp)["product_name"] == "amqp-gateway"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
