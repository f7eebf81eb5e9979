"""``workers: 2``: a parent process and two gateway workers sharing one AMQP port
(``SO_REUSEPORT``), with real processes: both serve, a worker killed with SIGKILL is
restarted, SIGTERM stops all of them with status 0, a dead parent takes its workers
along, systemd hears from the parent only, and ``/metrics`` shows every worker.

The config has no embedded vhost (``vhosts: []``), the one shape besides proxied vhosts
that ``workers`` allows on this branch; the clients here speak up to
``connection.start`` (each connection is served by one worker), which needs no vhost.
"""
from __future__ import annotations

import os
import re
import signal
import socket
import time
import urllib.request
import uuid

import pytest

from gateway.metrics import parse_exposition
from gateway.protocol_header import AMQP091_HEADER
from tests.support.gateway_process import GatewayProcess, default_config

pytestmark = pytest.mark.integration

TIMEOUT = 15.0
READY = r"gateway ready: 2 workers \(pids (\d+), (\d+)\)"


def workers_gateway(**kwargs) -> GatewayProcess:
    gw = GatewayProcess(config_text=default_config(extra="vhosts: []\nworkers: 2\n"),
                        **kwargs).start(timeout=60)
    assert gw.wait_for_log(READY, timeout=60), gw.log
    return gw


@pytest.fixture
def gateway():
    gw = workers_gateway()
    yield gw
    gw.stop()


def worker_pids(gw: GatewayProcess) -> dict[str, int]:
    """Each worker's pid as its last start line says."""
    pids = {}
    for m in re.finditer(r"worker (\d+) started \(pid (\d+)\)", gw.log):
        pids[m.group(1)] = int(m.group(2))
    return pids


def scrape(gw: GatewayProcess) -> list:
    with urllib.request.urlopen(f"http://127.0.0.1:{gw.metrics_port}{gw.metrics_path}",
                                timeout=TIMEOUT) as resp:
        return parse_exposition(resp.read().decode())


def accepted_by_worker(gw: GatewayProcess) -> dict[str, float]:
    return {s.labels["worker"]: s.value for s in scrape(gw)
            if s.name == "amqp_gateway_connections_accepted_total" and s.labels.get("protocol") == "amqp091"}


def connection_start(gw: GatewayProcess) -> socket.socket:
    """A connection that got its ``connection.start`` (a worker serves it)."""
    sock = socket.create_connection(("127.0.0.1", gw.amqp_port), timeout=TIMEOUT)
    sock.sendall(AMQP091_HEADER)
    frame = sock.recv(7)
    assert frame[:1] == b"\x01", frame                       # a method frame
    return sock


def wait_until(condition, what: str, timeout: float = TIMEOUT):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_both_workers_serve_one_port_and_metrics_show_both(gateway):
    pids = worker_pids(gateway)
    assert sorted(pids) == ["1", "2"] and gateway.proc.pid not in pids.values()
    assert f"listening on 127.0.0.1:{gateway.amqp_port} (shared by 2 workers)" in gateway.log
    socks = []

    def both_served():
        socks.append(connection_start(gateway))
        counts = accepted_by_worker(gateway)
        return len(counts) == 2 and all(counts.values())

    try:
        wait_until(both_served, "connections on both workers")   # the kernel spreads them
    finally:
        for s in socks:
            s.close()
    samples = scrape(gateway)
    assert {s.labels["worker"]: s.value for s in samples if s.name == "amqp_gateway_worker_up"} == \
        {"1": 1.0, "2": 1.0}
    assert [s.value for s in samples if s.name == "amqp_gateway_workers"] == [2.0]


def test_a_worker_killed_with_sigkill_is_restarted(gateway):
    old = worker_pids(gateway)
    os.kill(old["1"], signal.SIGKILL)
    assert gateway.wait_for_log(rf"worker 1 \(pid {old['1']}\) was killed by signal 9 \(SIGKILL\); "
                                r"restarting it in \d+\.\ds", timeout=TIMEOUT), gateway.log
    assert gateway.wait_for_log(r"worker 1 \(pid \d+\) ready", timeout=TIMEOUT)
    new = wait_until(lambda: (p := worker_pids(gateway))["1"] != old["1"] and p, "a new worker 1")
    assert new["2"] == old["2"]
    wait_until(lambda: gateway.count_log(rf"worker 1 \(pid {new['1']}\) ready"), "the new worker ready")
    samples = scrape(gateway)
    assert {s.labels["worker"]: s.value for s in samples
            if s.name == "amqp_gateway_worker_restarts_total"} == {"1": 1.0, "2": 0.0}
    for _ in range(6):                              # the port still serves, whoever answers
        connection_start(gateway).close()


def test_sigterm_drains_every_worker_and_the_parent_exits_0(gateway):
    clients = []
    wait_until(lambda: clients.append(connection_start(gateway)) or
               len([v for v in accepted_by_worker(gateway).values() if v]) == 2, "both workers serving")
    pids = list(worker_pids(gateway).values())
    gateway.signal(signal.SIGTERM)
    for sock in clients:                             # each worker closes its connections
        sock.settimeout(TIMEOUT)
        while sock.recv(4096):
            pass
    assert gateway.proc.wait(TIMEOUT) == 0
    for pid in pids:
        assert not _alive(pid)
    assert gateway.count_log(r"\[worker \d\] .*stopped") == 2
    assert gateway.count_log(r"worker \d \(pid \d+\) exited with status 0") == 2


def test_workers_stop_when_the_parent_is_killed():
    gw = workers_gateway()
    try:
        pids = list(worker_pids(gw).values())
        gw.kill(children=False)
        wait_until(lambda: not any(_alive(p) for p in pids), "the workers to stop")
        assert gw.count_log("the supervisor \\(parent process\\) has gone; stopping") == 2
    finally:
        gw.stop()


def test_systemd_hears_ready_and_stopping_from_the_parent_only():
    name = f"amqp-gateway-test-{uuid.uuid4().hex}"
    systemd = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    systemd.bind("\0" + name)
    systemd.settimeout(TIMEOUT)
    gw = None
    try:
        gw = workers_gateway(env={"NOTIFY_SOCKET": "@" + name, "WATCHDOG_USEC": "2000000"})
        messages = [systemd.recv(4096)]
        while b"WATCHDOG=1" not in messages:
            messages.append(systemd.recv(4096))
        ready = [m for m in messages if m.startswith(b"READY=1")]
        assert ready == [b"READY=1\nSTATUS=2 workers listening on 127.0.0.1:%d" % gw.amqp_port]
        gw.signal(signal.SIGTERM)
        while (m := systemd.recv(4096)) != b"STOPPING=1":
            assert not m.startswith(b"READY"), m
        assert gw.proc.wait(TIMEOUT) == 0
    finally:
        systemd.close()
        if gw is not None:
            gw.stop()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return "State:\tZ" not in f.read()
    except FileNotFoundError:
        return False


def test_the_parent_serves_every_workers_management_api():
    from tests.support.management_http import MANAGEMENT_USERS, call

    gw = GatewayProcess(config_text=default_config(users=MANAGEMENT_USERS, extra="vhosts: []\nworkers: 2\n"),
                        extra_args=("--management", "127.0.0.1:0")).start(timeout=60)
    try:
        assert gw.wait_for_log(READY, timeout=60), gw.log
        nodes = call(gw, "GET", "/api/nodes")
        assert nodes.status == 200 and sorted(n["worker"] for n in nodes.body) == [1, 2]
        users = call(gw, "GET", "/api/users")
        assert sorted(u["name"] for u in users.body) == sorted(MANAGEMENT_USERS)
        # guest may log in from loopback only: the parent names the real client to the
        # worker, and a client's own X-Forwarded-For is not believed
        whoami = call(gw, "GET", "/api/whoami", user="guest", headers={"X-Forwarded-For": "203.0.113.9"})
        assert (whoami.status, whoami.body["name"], whoami.body["worker"]) == (200, "guest", 1)
        refused = call(gw, "GET", "/api/connections", password="wrong")
        assert refused.status == 401 and "Basic" in refused.headers["WWW-Authenticate"]
        assert call(gw, "DELETE", "/api/connections/nobody").status == 404
    finally:
        gw.stop()
