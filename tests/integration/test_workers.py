"""``workers: 2``: a parent process and two gateway workers sharing one AMQP port
(``SO_REUSEPORT``), with real processes, in edge mode: the one vhost is proxied to a
private RabbitMQ node (Debian's ``rabbitmq-server``), as ``workers`` requires. Shown:
both workers serve pika clients whose messages go through to the backend and back; a
worker killed with SIGKILL is restarted and the port keeps serving; SIGTERM closes every
client's connection properly and the parent exits 0; a dead parent takes its workers
along; systemd hears from the parent only; ``/metrics`` and the management API of the
parent show every worker.
"""
from __future__ import annotations

import os
import re
import signal
import socket
import textwrap
import time
import urllib.request
import uuid

import pika
import pytest
from pika.exceptions import ConnectionClosedByBroker

from gateway.metrics import parse_exposition
from tests.support.deadline import wait_until as wait_with_deadline
from tests.support.gateway_process import GatewayProcess, default_config
from tests.support.partner_broker import PARTNER_PASSWORD, PARTNER_USER, PARTNER_VHOST

pytestmark = [pytest.mark.integration, pytest.mark.interop, pytest.mark.process]

TIMEOUT = 15.0
READY = r"gateway ready: 2 workers \(pids (\d+), (\d+)\)"


def edge_config(rabbit, **kwargs) -> str:
    """Every vhost proxied (``edge``, to the partner's vhost), two workers."""
    return default_config(extra=textwrap.dedent(f"""\
        vhosts:
          - name: edge
            backend: rabbit
        backends:
          - name: rabbit
            kind: amqp091
            nodes: ["127.0.0.1:{rabbit.port}"]
            vhost: {PARTNER_VHOST}
            credentials: passthrough
        workers: 2
        """), **kwargs)


def workers_gateway(rabbit, **kwargs) -> GatewayProcess:
    gw = GatewayProcess(config_text=edge_config(rabbit), **kwargs).start(timeout=60)
    assert gw.wait_for_log(READY, timeout=60), gw.log
    return gw


@pytest.fixture
def gateway(partner_rabbit):
    gw = workers_gateway(partner_rabbit)
    yield gw
    gw.stop()


def client(gw: GatewayProcess) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters(
        host="127.0.0.1", port=gw.amqp_port, virtual_host="edge", socket_timeout=TIMEOUT,
        blocked_connection_timeout=TIMEOUT, connection_attempts=1,
        credentials=pika.PlainCredentials(PARTNER_USER, PARTNER_PASSWORD)))


def round_trip(connection: pika.BlockingConnection, body: bytes) -> bytes:
    """Publish with a confirm to a server-named queue of the backend and get it back."""
    ch = connection.channel()
    ch.confirm_delivery()
    queue = ch.queue_declare("", exclusive=True).method.queue
    ch.basic_publish("", queue, body, mandatory=True)
    deadline = time.monotonic() + TIMEOUT
    while True:
        method, _, got = ch.basic_get(queue, auto_ack=True)
        if method is not None:
            ch.close()
            return got
        assert time.monotonic() < deadline, "the message did not come back"
        time.sleep(0.05)


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


def wait_until(condition, what: str, timeout: float = TIMEOUT):
    return wait_with_deadline(condition, what, timeout)


def clients_on_both_workers(gw: GatewayProcess) -> list[pika.BlockingConnection]:
    """Connections until each worker has one (the kernel spreads them)."""
    clients: list[pika.BlockingConnection] = []

    def both():
        clients.append(client(gw))
        counts = accepted_by_worker(gw)
        return len(counts) == 2 and all(counts.values())

    wait_until(both, "connections on both workers")
    return clients


def test_both_workers_serve_one_port_and_metrics_show_both(gateway):
    pids = worker_pids(gateway)
    assert sorted(pids) == ["1", "2"] and gateway.proc.pid not in pids.values()
    assert f"listening on 127.0.0.1:{gateway.amqp_port} (shared by 2 workers)" in gateway.log
    clients = clients_on_both_workers(gateway)
    try:
        for i, connection in enumerate(clients):
            assert round_trip(connection, b"m%d" % i) == b"m%d" % i
    finally:
        for connection in clients:
            connection.close()
    samples = scrape(gateway)
    assert {s.labels["worker"]: s.value for s in samples if s.name == "amqp_gateway_worker_up"} == \
        {"1": 1.0, "2": 1.0}
    assert [s.value for s in samples if s.name == "amqp_gateway_workers"] == [2.0]


def test_a_worker_killed_with_sigkill_is_restarted(gateway):
    old = worker_pids(gateway)
    os.kill(old["1"], signal.SIGKILL)
    assert gateway.wait_for_log(rf"worker 1 \(pid {old['1']}\) was killed by signal 9 \(SIGKILL\); "
                                r"restarting it in \d+\.\ds", timeout=TIMEOUT), gateway.log
    new = wait_until(lambda: (p := worker_pids(gateway))["1"] != old["1"] and p, "a new worker 1")
    assert new["2"] == old["2"]
    wait_until(lambda: gateway.count_log(rf"worker 1 \(pid {new['1']}\) ready"), "the new worker ready")
    samples = scrape(gateway)
    assert {s.labels["worker"]: s.value for s in samples
            if s.name == "amqp_gateway_worker_restarts_total"} == {"1": 1.0, "2": 0.0}
    clients = clients_on_both_workers(gateway)     # the port serves on both again
    try:
        assert [round_trip(c, b"after") for c in clients] == [b"after"] * len(clients)
    finally:
        for connection in clients:
            connection.close()


def test_sigterm_closes_every_client_properly_and_the_parent_exits_0(gateway):
    clients = clients_on_both_workers(gateway)
    pids = list(worker_pids(gateway).values())
    gateway.signal(signal.SIGTERM)
    for connection in clients:                       # each worker closes its connections
        with pytest.raises(ConnectionClosedByBroker) as closed:
            connection.process_data_events(time_limit=TIMEOUT)
            connection.sleep(TIMEOUT)
        assert closed.value.reply_code == 320
    assert gateway.proc.wait(TIMEOUT) == 0
    for pid in pids:
        assert not _alive(pid)
    assert gateway.count_log(r"\[worker \d\] .*stopped") == 2
    assert gateway.count_log(r"worker \d \(pid \d+\) exited with status 0") == 2


def test_workers_stop_when_the_parent_is_killed(partner_rabbit):
    gw = workers_gateway(partner_rabbit)
    try:
        pids = list(worker_pids(gw).values())
        gw.kill(children=False)
        wait_until(lambda: not any(_alive(p) for p in pids), "the workers to stop")
        assert gw.count_log("the supervisor \\(parent process\\) has gone; stopping") == 2
    finally:
        gw.stop()


def test_systemd_hears_ready_and_stopping_from_the_parent_only(partner_rabbit):
    name = f"amqp-gateway-test-{uuid.uuid4().hex}"
    systemd = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    systemd.bind("\0" + name)
    systemd.settimeout(TIMEOUT)
    gw = None
    try:
        gw = workers_gateway(partner_rabbit, env={"NOTIFY_SOCKET": "@" + name, "WATCHDOG_USEC": "2000000"})
        messages = [systemd.recv(4096)]
        while b"WATCHDOG=1" not in messages:
            messages.append(systemd.recv(4096))
        ready = [m for m in messages if m.startswith(b"READY=1")]
        assert ready == [b"READY=1\nSTATUS=2 workers listening on 127.0.0.1:%d" % gw.amqp_port]
        # a hung worker (stopped: its reactor pings no more) is killed and restarted,
        # while the parent keeps pinging systemd
        hung = worker_pids(gw)["2"]
        os.kill(hung, signal.SIGSTOP)
        assert gw.wait_for_log(rf"worker 2 \(pid {hung}\) sent no watchdog ping for \d+\.\ds: "
                               r"killing it to restart it", timeout=TIMEOUT), gw.log
        assert gw.wait_for_log(rf"worker 2 \(pid {hung}\) was killed by signal 9", timeout=TIMEOUT)
        wait_until(lambda: worker_pids(gw)["2"] != hung and gw.count_log(
            rf"worker 2 \(pid {worker_pids(gw)['2']}\) ready"), "worker 2 restarted")
        assert systemd.recv(4096) == b"WATCHDOG=1"
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


def test_the_parent_serves_every_workers_management_api(partner_rabbit):
    from tests.support.management_http import MANAGEMENT_USERS, call

    gw = GatewayProcess(config_text=edge_config(partner_rabbit, users=MANAGEMENT_USERS),
                        extra_args=("--management", "127.0.0.1:0")).start(timeout=60)
    try:
        assert gw.wait_for_log(READY, timeout=60), gw.log
        clients = clients_on_both_workers(gw)
        listed = call(gw, "GET", "/api/connections").body
        assert sorted({c["worker"] for c in listed}) == [1, 2] and len(listed) == len(clients)
        for connection in clients:
            connection.close()
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
