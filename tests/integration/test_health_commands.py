"""``amqp-gateway ping`` and ``status`` as a load balancer, systemd or an operator runs
them: real processes against a real gateway, running and stopped."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from gateway.product import __version__
from tests.support.amqp091_clients import pika_connection
from tests.support.gateway_process import REPO, default_config

pytestmark = pytest.mark.integration


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gateway.cli", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.process  # runs the CLI as a process
def test_ping_a_running_gateway_exits_0_with_one_line(gateway):
    r = cli("ping", "--url", f"amqp://127.0.0.1:{gateway.amqp_port}")
    assert r.returncode == 0, r.stderr
    assert re.fullmatch(rf"127\.0\.0\.1:{gateway.amqp_port}: amqp-gateway {re.escape(__version__)} "
                        r"answered in \d+ ms\n", r.stdout)
    assert r.stderr == ""


@pytest.mark.process  # runs the CLI as a process
def test_ping_a_stopped_gateway_exits_1_with_one_line(fresh_gateway):
    gw = fresh_gateway()
    port = gw.amqp_port
    assert cli("ping", "--port", str(port)).returncode == 0
    assert gw.stop() == 0
    r = cli("ping", "--port", str(port), "--timeout", "2")
    assert r.returncode == 1
    assert r.stdout == ""
    assert r.stderr == (f"amqp-gateway ping: nothing listens on 127.0.0.1:{port} (connection "
                        "refused): is the gateway running, on this address?\n")


@pytest.mark.process  # runs the CLI as a process
def test_ping_reads_the_listener_from_the_config_and_leaves_no_info_line(fresh_gateway, tmp_path):
    gw = fresh_gateway()
    cfg = tmp_path / "gw.yaml"
    cfg.write_text(f"listeners:\n  - host: 0.0.0.0\n    port: {gw.amqp_port}\n")
    before = len(gw.log_lines)
    r = cli("ping", "--config", str(cfg))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"127.0.0.1:{gw.amqp_port}: amqp-gateway ")
    # a health check every few seconds must not write a line each time
    assert gw.wait_for_log("closed the socket after connection.start", timeout=1) is False
    assert not [line for line in gw.log_lines[before:] if " INFO gateway.amqp091" in line]


@pytest.mark.process  # runs the CLI as a process
def test_ping_with_a_config_error_exits_2(tmp_path):
    cfg = tmp_path / "gw.yaml"
    cfg.write_text("listeners:\n  - port: 70000\n")
    r = cli("ping", "--config", str(cfg))
    assert r.returncode == 2
    assert r.stderr.startswith(f"amqp-gateway: invalid config: {cfg}:2: listeners[0].port: ")


@pytest.mark.process  # runs the CLI as a process
def test_status_shows_version_uptime_listeners_connections_and_queues(fresh_gateway):
    gw = fresh_gateway()
    conn = pika_connection(gw)
    try:
        ch = conn.channel()
        ch.queue_declare("status-q")
        for i in range(3):
            ch.basic_publish("", "status-q", b"m%d" % i)
        ch.queue_declare("status-q", passive=True)   # a round trip: the publishes are in
        r = cli("status", "--port", str(gw.amqp_port),
                "--metrics-url", f"http://127.0.0.1:{gw.metrics_port}{gw.metrics_path}")
    finally:
        conn.close()
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"amqp-gateway {__version__} answers on 127.0.0.1:{gw.amqp_port} "
                               "(AMQP 0-9-1, ")
    assert re.fullmatch(r"uptime: \d+m \d\ds \(since .*\)", lines[1])
    assert lines[2] == (f"listening: 127.0.0.1:{gw.amqp_port} (amqp, tls off), "
                        f"127.0.0.1:{gw.metrics_port} (metrics)")
    assert lines[3].startswith("connections: 1 open (amqp091 1); ")
    assert lines[4] == "queues: 1; messages ready 3, unacknowledged 0; 6 body bytes held"
    assert lines[5] == "alarms: none"


@pytest.mark.process  # runs the CLI as a process
def test_status_when_the_metrics_page_does_not_answer_exits_1(gateway):
    r = cli("status", "--port", str(gateway.amqp_port), "--metrics-url", "http://127.0.0.1:9/metrics",
            "--timeout", "2")
    assert r.returncode == 1
    first, second = r.stdout.splitlines()
    assert first.startswith("amqp-gateway ")
    assert second == "figures: metrics page http://127.0.0.1:9/metrics did not answer: Connection refused"


def test_status_refuses_the_metrics_page_of_another_gateway(gateway, fresh_gateway):
    other = fresh_gateway()
    r = cli("status", "--port", str(gateway.amqp_port),
            "--metrics-url", f"http://127.0.0.1:{other.metrics_port}{other.metrics_path}")
    assert r.returncode == 1
    first, second = r.stdout.splitlines()
    assert first.startswith("amqp-gateway ")
    assert second == (f"figures: the metrics page belongs to a gateway listening on "
                      f"127.0.0.1:{other.amqp_port}, not on 127.0.0.1:{gateway.amqp_port}: give the "
                      "right one with --metrics-url or --config")


def test_status_refuses_a_metrics_page_that_is_not_a_gateways(gateway):
    import http.server
    import threading

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"# TYPE up gauge\nup 1\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        r = cli("status", "--port", str(gateway.amqp_port),
                "--metrics-url", f"http://127.0.0.1:{server.server_port}/metrics")
    finally:
        server.shutdown()
    assert r.returncode == 1
    assert "is a metrics page, but not amqp-gateway's" in r.stdout.splitlines()[1]


def test_ping_and_status_read_the_config_named_by_the_environment(fresh_gateway, tmp_path):
    gw = fresh_gateway()
    cfg = tmp_path / "gw.yaml"
    cfg.write_text(f"listeners:\n  - port: {gw.amqp_port}\nmetrics:\n  port: {gw.metrics_port}\n")
    env = dict(os.environ, AMQP_GATEWAY_CONFIG=str(cfg))
    r = subprocess.run([sys.executable, "-m", "gateway.cli", "ping"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"127.0.0.1:{gw.amqp_port}: amqp-gateway ")
    r = subprocess.run([sys.executable, "-m", "gateway.cli", "status"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"127.0.0.1:{gw.metrics_port} (metrics)" in r.stdout


def test_ping_knows_a_gateway_that_announces_rabbitmq(fresh_gateway):
    gw = fresh_gateway(config_text=default_config(extra="rabbitmq_version: '4.1.0'\n"))
    r = cli("ping", "--port", str(gw.amqp_port))
    assert r.returncode == 0, r.stderr
    assert re.fullmatch(rf"127\.0\.0\.1:{gw.amqp_port}: amqp-gateway {re.escape(__version__)} "
                        r"\(announcing RabbitMQ 4\.1\.0\) answered in \d+ ms\n", r.stdout)
