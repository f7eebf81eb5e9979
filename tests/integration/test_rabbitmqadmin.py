"""Debian's ``rabbitmqadmin`` (shipped with rabbitmq-server) against a real gateway's
management API: it lists, declares (queues, exchanges, bindings, vhosts, users,
permissions, policies, vhost limits), purges, deletes, publishes, gets, exports and
imports as it would against RabbitMQ."""
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


def test_publish_and_get(gw):
    q = unique("admin-pub")
    assert admin(gw, "declare", "queue", f"name={q}", "durable=false").returncode == 0
    r = admin(gw, "publish", "exchange=amq.default", f"routing_key={q}", "payload=hello admin",
              'properties={"content_type": "text/plain", "headers": {"n": 1}}')
    assert (r.returncode, r.stdout.strip()) == (0, "Message published"), r.stderr
    r = subprocess.run([RABBITMQADMIN, "-H", "127.0.0.1", "-P", str(gw.management_port), "-u", "admin",
                        "-p", "s3cret", "publish", "exchange=amq.default", f"routing_key={q}"],
                       input="from stdin", capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert admin(gw, "publish", "exchange=amq.default", "routing_key=nowhere-" + q,
                 "payload=x").stdout.strip() == "Message published but NOT routed"
    r = admin(gw, "-f", "raw_json", "get", f"queue={q}", "count=2")   # ackmode ack_requeue_true
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert [(m["payload"], m["redelivered"]) for m in got] == [("hello admin", False), ("from stdin", False)]
    assert got[0]["properties"] == {"content_type": "text/plain", "headers": {"n": 1}}
    r = admin(gw, "-f", "raw_json", "get", f"queue={q}", "count=2", "ackmode=ack_requeue_false")
    assert [m["redelivered"] for m in json.loads(r.stdout)] == [True, True]
    assert {"name": q, "messages": 0} in listed(gw, "queues", "name", "messages")
    admin(gw, "delete", "queue", f"name={q}")


def test_declare_user_permission_and_policy_then_list_them(gw):
    user, vhost = unique("admin-user"), unique("admin-vh")
    assert admin(gw, "declare", "vhost", f"name={vhost}").stdout.strip() == "vhost declared"
    r = admin(gw, "declare", "user", f"name={user}", "password=pw-1", "tags=monitoring")
    assert (r.returncode, r.stdout.strip()) == (0, "user declared"), r.stderr
    r = admin(gw, "declare", "permission", f"vhost={vhost}", f"user={user}", "configure=.*",
              "write=.*", "read=.*")
    assert (r.returncode, r.stdout.strip()) == (0, "permission declared"), r.stderr
    r = admin(gw, "-V", vhost, "declare", "policy", "name=cap", "pattern=^q", 'definition={"max-length": 7}',
              "priority=3", "apply-to=queues")
    assert (r.returncode, r.stdout.strip()) == (0, "policy declared"), r.stderr
    assert admin(gw, "declare", "vhost_limit", f"vhost={vhost}", "name=max-queues", "value=9").returncode == 0
    assert {"name": user, "tags": ["monitoring"]} in listed(gw, "users", "name", "tags")
    assert {"user": user, "vhost": vhost, "configure": ".*", "write": ".*", "read": ".*"} in \
        listed(gw, "permissions")
    [policy] = [p for p in listed(gw, "policies") if p["vhost"] == vhost]
    assert (policy["name"], policy["definition"], policy["priority"], policy["apply-to"]) == (
        "cap", {"max-length": 7}, 3, "queues")
    assert {"vhost": vhost, "value": {"max-queues": 9}} in listed(gw, "vhost_limits")
    table = admin(gw, "list", "policies").stdout
    assert "cap" in table and '{"max-length": 7}' in table
    # the user logs in with the password rabbitmqadmin gave it, to the vhost it may use
    conn = pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", gw.amqp_port, vhost, pika.PlainCredentials(user, "pw-1")))
    conn.close()
    assert admin(gw, "delete", "policy", "name=cap", "-V", vhost).returncode == 0
    assert admin(gw, "delete", "permission", f"vhost={vhost}", f"user={user}").returncode == 0
    assert admin(gw, "delete", "user", f"name={user}").returncode == 0
    assert admin(gw, "delete", "vhost", f"name={vhost}").returncode == 0


def test_export_and_import(gw, tmp_path):
    q = unique("admin-exported")
    admin(gw, "declare", "queue", f"name={q}", "durable=true", 'arguments={"x-max-length": 3}')
    path = tmp_path / "defs.json"
    r = admin(gw, "export", str(path))
    assert r.returncode == 0 and "Exported definitions" in r.stdout, r.stderr
    exported = json.loads(path.read_text())
    assert {"name": q, "vhost": "/", "durable": True, "auto_delete": False,
            "arguments": {"x-max-length": 3}} in exported["queues"]
    admin(gw, "delete", "queue", f"name={q}")
    r = admin(gw, "import", str(path))
    assert r.returncode == 0 and "Uploaded definitions" in r.stdout, r.stderr
    assert {"name": q} in listed(gw, "queues", "name")
    admin(gw, "delete", "queue", f"name={q}")
