"""A port the gateway cannot bind: one line naming it, the likely cause and the remedy;
exit 1 (systemd may retry: the other broker may go away), no traceback."""
from __future__ import annotations

import re
import socket
import subprocess
import sys

import pytest

from tests.support.gateway_process import REPO, default_config

pytestmark = [pytest.mark.integration, pytest.mark.process]


@pytest.fixture
def held_port():
    """A port this test holds, listening, as another broker would."""
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    yield holder.getsockname()[1]
    holder.close()


def start_gateway(config_text: str, tmp_path, *args: str) -> subprocess.CompletedProcess:
    cfg = tmp_path / "gw.yaml"
    cfg.write_text(config_text)
    return subprocess.run([sys.executable, "-m", "gateway.cli", "run", "--config", str(cfg), *args],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": REPO, "PATH": "/usr/bin:/bin"})


def error_lines(r: subprocess.CompletedProcess) -> list[str]:
    assert "Traceback" not in r.stdout + r.stderr
    return [line for line in r.stderr.splitlines() if " ERROR " in line]


def test_a_busy_amqp_port_from_the_command_line(held_port, tmp_path):
    r = start_gateway(default_config(), tmp_path, "--listen", f"127.0.0.1:{held_port}",
                      "--metrics", "127.0.0.1:0")
    assert r.returncode == 1
    [line] = error_lines(r)
    assert line.endswith(
        f"ERROR gateway: cannot listen for AMQP on 127.0.0.1:{held_port}: the port is already in "
        "use, probably by another AMQP broker (RabbitMQ listens on 5672 and 5671, as do Qpid and "
        "Artemis) or a second amqp-gateway; choose another with --listen HOST:PORT")


def test_a_busy_amqp_port_from_the_config_names_the_key_and_its_line(held_port, tmp_path):
    text = default_config().replace("    port: 0\n", f"    port: {held_port}\n", 1)
    line_no = text.splitlines().index(f"    port: {held_port}") + 1
    r = start_gateway(text, tmp_path)
    assert r.returncode == 1
    [line] = error_lines(r)
    assert f"cannot listen for AMQP on 127.0.0.1:{held_port}: the port is already in use" in line
    assert line.endswith(f"choose another with --listen HOST:PORT or listeners[0].port "
                         f"({tmp_path / 'gw.yaml'}:{line_no})")


def test_a_busy_metrics_port_stops_the_started_listener_and_says_so(held_port, tmp_path):
    r = start_gateway(default_config(), tmp_path, "--listen", "127.0.0.1:0",
                      "--metrics", f"127.0.0.1:{held_port}")
    assert r.returncode == 1
    [line] = error_lines(r)
    assert re.search(rf"cannot listen for metrics on 127\.0\.0\.1:{held_port}: the port is "
                     r"already in use, probably by another Prometheus exporter .*; choose "
                     r"another with --metrics HOST:PORT$", line)
    assert "stopped" in r.stderr   # the AMQP listener bound first was closed properly


def test_a_busy_management_port_names_the_flag(held_port, tmp_path):
    r = start_gateway(default_config(), tmp_path, "--listen", "127.0.0.1:0",
                      "--metrics", "127.0.0.1:0", "--management", f"127.0.0.1:{held_port}")
    assert r.returncode == 1
    [line] = error_lines(r)
    assert re.search(rf"cannot listen for the management API on 127\.0\.0\.1:{held_port}: the "
                     r"port is already in use, probably by RabbitMQ's management plugin \(15672\) "
                     r"or a second amqp-gateway; choose another with --management HOST:PORT$", line)


def test_a_busy_management_port_from_the_config_names_the_key_and_its_line(held_port, tmp_path):
    text = default_config(extra=f"management:\n  enabled: true\n  port: {held_port}\n")
    line_no = text.splitlines().index(f"  port: {held_port}") + 1
    r = start_gateway(text, tmp_path, "--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0")
    assert r.returncode == 1
    [line] = error_lines(r)
    assert line.endswith(f"choose another with --management HOST:PORT or management.port "
                         f"({tmp_path / 'gw.yaml'}:{line_no})")
