"""Debian's ``rabbitmqadmin`` (shipped with rabbitmq-server) against a real gateway's
management API: it lists, declares, purges and deletes as it would against RabbitMQ."""
from __future__ import annotations

import json
import shutil
import subprocess
import time

import pika
import pytest

from tests.support.amqp091_clients import pika_connection, unique
from tests.support.management_http import management_gateway

pytestmark = [pytest.mark.integration, pytest.mark.interop]

RABBITMQADMIN = shutil.which("rabbitmqadmin")


@pytest.fixture(scope="module")
def gw():
    if RABBITMQADMIN is None:
        pytest.skip("rabbitmqadmin missing (apt-get install rabbitmq-server)")
    gateway = management_gateway().start()
    yield gateway
    gateway.stop()


def admin(gw, *args: str, user: str = "admin", password: str = "s3cret"
          ) -> subprocess.CompletedProcess:
    assert RABBITMQADMIN is not None
    return subprocess.run([RABBITMQADMIN, "-H", "127.0.0.1", "-P", str(gw.management_port),
                           "-u", user, "-p", password, *args],
                          capture_output=True, text=True, timeout=60)


def listed(gw, what: str, *columns: str) -> list[dict]:
    r = admin(gw, "-f", "raw_json", "list", what, *columns)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_declare_publish_list_purge_and_delete_a_queue(gw):
    q = unique("admin-q")
    r = admin(gw, "declare", "queue", f"name={q}", "durable=false")
    assert (r.returncode, r.stdout.strip()) == (0, "queue declared"), r.stderr
    conn = pika_connection(gw)
    try:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.basic_publish("", q, b"one")
        ch.basic_publish("", q, b"two")
    finally:
        conn.close()
    assert {"name": q, "messages": 2} in listed(gw, "queues", "name", "messages")
    table = admin(gw, "list", "queues").stdout
    assert any(line.split("|")[1:3] == [f" {q} ", " 2        "] for line in table.splitlines()), table
    assert admin(gw, "purge", "queue", f"name={q}").returncode == 0
    assert {"name": q, "messages": 0} in listed(gw, "queues", "name", "messages")
    assert admin(gw, "delete", "queue", f"name={q}").stdout.strip() == "queue deleted"
    assert q not in {row["name"] for row in listed(gw, "queues", "name")}


def test_exchanges_and_bindings(gw):
    x, q = unique("admin-x"), unique("admin-q")
    assert admin(gw, "declare", "exchange", f"name={x}", "type=topic", "durable=false").returncode == 0
    assert admin(gw, "declare", "queue", f"name={q}", "durable=false").returncode == 0
    r = admin(gw, "declare", "binding", f"source={x}", f"destination={q}", "routing_key=a.#")
    assert r.returncode == 0, r.stderr
    assert {"name": x, "type": "topic"} in listed(gw, "exchanges", "name", "type")
    assert {"source": x, "destination": q, "routing_key": "a.#"} in listed(
        gw, "bindings", "source", "destination", "routing_key")
    r = admin(gw, "delete", "binding", f"source={x}", "destination_type=queue",
              f"destination={q}", "properties_key=a.%23")
    assert r.returncode == 0, r.stderr
    assert not [b for b in listed(gw, "bindings", "source") if b["source"] == x]
    assert admin(gw, "delete", "exchange", f"name={x}").returncode == 0
    admin(gw, "delete", "queue", f"name={q}")


def test_connections_overview_nodes_and_users(gw):
    conn = pika_connection(gw, user="admin", password="s3cret")
    try:
        assert "admin" in {c["user"] for c in listed(gw, "connections", "name", "user")}
        r = admin(gw, "show", "overview")
        assert r.returncode == 0 and "cluster_name" in r.stdout, r.stderr
        [node] = listed(gw, "nodes")
        assert node["running"] is True and node["alarms"] == []
        assert {"name": "watcher", "tags": ["monitoring"]} in listed(gw, "users", "name", "tags")
    finally:
        conn.close()


def test_refusals_are_rabbitmqadmin_s_messages(gw):
    r = admin(gw, "delete", "queue", "name=no-such-queue")
    assert r.returncode == 1
    assert "Not found: /api/queues/%2F/no-such-queue" in r.stdout + r.stderr
    r = admin(gw, "list", "queues", password="wrong")
    assert r.returncode == 1
    assert "Access refused: /api/queues" in r.stdout + r.stderr


def test_close_a_connection(gw):
    conn = pika_connection(gw, user="admin", password="s3cret")
    [name] = [c["name"] for c in listed(gw, "connections", "name", "user") if c["user"] == "admin"]
    r = admin(gw, "close", "connection", f"name={name}")
    assert r.returncode == 0, r.stderr
    with pytest.raises(pika.exceptions.ConnectionClosed):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            conn.process_data_events(time_limit=0.05)
