"""``amqp-gateway ctl`` against a real gateway: tables of its connections and queues with
their depths, JSON, changes, and one-line errors with the documented exit statuses."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pika
import pytest

from tests.support.amqp091_clients import pika_connection, unique
from tests.support.gateway_process import REPO
from tests.support.management_http import call, management_gateway

pytestmark = [pytest.mark.integration, pytest.mark.process]  # runs the CLI (ctl) as a process


@pytest.fixture(scope="module")
def gw(management_gw):
    return management_gw


def ctl(gw, *args: str, user: str = "admin", password: str = "s3cret", url: str = ""
        ) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gateway.cli", "ctl", "--url",
                           url or gw.management_url, "-u", user, "-p", password, *args],
                          cwd=REPO, capture_output=True, text=True, timeout=60)


def rows(table: str) -> list[list[str]]:
    return [line.split() for line in table.splitlines()]


@pytest.fixture
def busy_queue(gw):
    """A queue with 5 messages, 2 of them delivered and unacknowledged, and its consumer's
    connection (user admin)."""
    q = unique("ctl-q")
    conn = pika_connection(gw, user="admin", password="s3cret")
    ch = conn.channel()
    ch.queue_declare(q, durable=False)
    ch.confirm_delivery()
    for i in range(5):
        ch.basic_publish("", q, b"m%d" % i)
    ch.basic_qos(prefetch_count=2)
    got = []
    ch.basic_consume(q, lambda c, m, p, b: got.append(m.delivery_tag))
    deadline = time.monotonic() + 10
    while len(got) < 2 and time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.05)
    assert len(got) == 2
    yield q, conn
    if conn.is_open:
        conn.close()
    call(gw, "DELETE", f"/api/queues/%2F/{q}")


@pytest.mark.process  # runs the CLI as a process
def test_list_queues_shows_their_depths(gw, busy_queue):
    q, _ = busy_queue
    r = ctl(gw, "list", "queues")
    assert r.returncode == 0, r.stderr
    table = rows(r.stdout)
    assert table[0] == ["vhost", "name", "messages", "ready", "unacked", "consumers", "durable",
                        "auto_delete"]
    assert ["/", q, "5", "3", "2", "1", "false", "false"] in table


@pytest.mark.process  # runs the CLI as a process
def test_list_connections_shows_the_client(gw, busy_queue):
    _, conn = busy_queue
    r = ctl(gw, "list", "connections")
    assert r.returncode == 0, r.stderr
    header, *entries = r.stdout.splitlines()
    assert header.split() == ["name", "user", "vhost", "protocol", "peer_host", "peer_port", "tls",
                              "channels", "backend"]
    mine = [e for e in entries if " admin " in e]
    assert len(mine) == 1 and "AMQP 0-9-1" in mine[0]


@pytest.mark.process  # runs the CLI as a process
def test_json_is_the_api_s(gw, busy_queue):
    q, _ = busy_queue
    r = ctl(gw, "--json", "--vhost", "/", "list", "queues")
    assert r.returncode == 0, r.stderr
    [mine] = [x for x in json.loads(r.stdout) if x["name"] == q]
    assert (mine["messages_ready"], mine["messages_unacknowledged"]) == (3, 2)


@pytest.mark.process  # runs the CLI as a process
def test_status_summarises_the_overview(gw, busy_queue):
    r = ctl(gw, "status")
    assert r.returncode == 0, r.stderr
    fields = dict(line.split(None, 1) for line in r.stdout.splitlines())
    assert fields["product"] == "amqp-gateway"
    assert int(fields["connections"]) >= 1 and fields["alarms"] == "none"


@pytest.mark.process  # runs the CLI as a process
def test_purge_delete_and_close(gw, busy_queue):
    q, conn = busy_queue
    r = ctl(gw, "purge", "queue", q)
    assert (r.returncode, r.stdout) == (0, f"queue '{q}' in vhost '/' purged\n"), r.stderr
    assert call(gw, "GET", f"/api/queues/%2F/{q}").body["messages_ready"] == 0
    [name] = [c["name"] for c in call(gw, "GET", "/api/connections").body if c["user"] == "admin"]
    r = ctl(gw, "close", "connection", name, "--reason", "ctl test")
    assert (r.returncode, r.stdout) == (0, f"connection '{name}' closed\n"), r.stderr
    with pytest.raises(pika.exceptions.ConnectionClosed, match="ctl test"):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            conn.process_data_events(time_limit=0.05)
    r = ctl(gw, "delete", "queue", q)
    assert r.returncode == 0, r.stderr
    assert call(gw, "GET", f"/api/queues/%2F/{q}").status == 404


@pytest.mark.process  # runs the CLI as a process
def test_a_missing_entity_is_one_line_and_exit_1(gw):
    r = ctl(gw, "delete", "exchange", "no-such-x")
    assert r.returncode == 1
    assert r.stderr == ("amqp-gateway ctl: not found: no exchange 'no-such-x' in vhost '/' "
                        "(DELETE /api/exchanges/%2F/no-such-x)\n")


@pytest.mark.process  # runs the CLI as a process
def test_refused_credentials_are_exit_2(gw):
    r = ctl(gw, "list", "queues", password="wrong")
    assert r.returncode == 2
    assert r.stderr == "amqp-gateway ctl: the gateway refused the credentials: Login failed\n"
    r = ctl(gw, "list", "queues", user="app", password="app")
    assert r.returncode == 2 and "Not management user" in r.stderr


@pytest.mark.process  # runs the CLI as a process
def test_a_refused_change_is_exit_1_with_the_reason(gw):
    # watcher (monitoring) holds permissions only in vhost /
    r = ctl(gw, "--vhost", "other", "delete", "queue", "anything", user="watcher", password="look")
    assert r.returncode == 1
    assert r.stderr == ("amqp-gateway ctl: the gateway refused DELETE /api/queues/other/anything: "
                        "403 access to vhost 'other' refused for user 'watcher'\n")


@pytest.mark.process  # runs the CLI as a process
def test_an_unreachable_gateway_is_one_line_and_exit_1():
    stopped = management_gateway().start()
    url = stopped.management_url
    stopped.stop()
    r = ctl(stopped, "list", "queues", url=url)
    assert r.returncode == 1
    assert r.stdout == ""
    assert r.stderr.startswith(f"amqp-gateway ctl: no management API at {url}: ")
    assert "Connection refused" in r.stderr and "Traceback" not in r.stderr


def ctl_input(gw, data: bytes, *args: str) -> subprocess.CompletedProcess:
    """``ctl`` with ``data`` on its standard input (bytes in, text out)."""
    done = subprocess.run([sys.executable, "-m", "gateway.cli", "ctl", "--url", gw.management_url,
                           "-u", "admin", "-p", "s3cret", *args], cwd=REPO, input=data,
                          capture_output=True, timeout=60)
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(),
                                       done.stderr.decode())


def test_declare_publish_and_get(gw):
    x, q = unique("ctl-x"), unique("ctl-q")
    assert ctl(gw, "declare", "exchange", x, "--type", "topic", "--durable", "false").stdout == \
        f"exchange '{x}' declared in vhost '/'\n"
    r = ctl(gw, "declare", "queue", q, "--durable", "false", "--arguments", '{"x-max-length": 10}')
    assert r.returncode == 0, r.stderr
    assert ctl(gw, "declare", "binding", x, q, "--routing-key", "a.*").returncode == 0
    assert ctl(gw, "publish", "--exchange", x, "a.b", "hello", "--properties",
               '{"content_type": "text/plain"}').stdout == "message published\n"
    assert ctl(gw, "publish", "--exchange", x, "z.z", "lost").stdout == \
        "message published but not routed (no queue took it)\n"
    r = ctl_input(gw, b"\x00\x01binary", "publish", q)
    assert r.stdout == "message published\n", r.stderr
    r = ctl(gw, "get", q, "--count", "5")
    assert r.returncode == 0, r.stderr
    table = rows(r.stdout)
    assert table[0] == ["routing_key", "exchange", "message_count", "payload_bytes", "redelivered", "payload"]
    assert table[1] == ["a.b", x, "1", "5", "false", "hello"]
    assert table[2][:4] == [q, "0", "8", "false"]   # the default exchange: an empty cell
    r = ctl(gw, "--json", "get", q, "--count", "5", "--ackmode", "ack_requeue_false")
    got = json.loads(r.stdout)
    assert [m["redelivered"] for m in got] == [True, True]   # the first get put them back
    assert got[0]["properties"] == {"content_type": "text/plain"}
    assert json.loads(ctl(gw, "--json", "get", q).stdout) == []
    assert call(gw, "GET", f"/api/queues/%2F/{q}").body["arguments"] == {"x-max-length": 10}
    call(gw, "DELETE", f"/api/queues/%2F/{q}")
    call(gw, "DELETE", f"/api/exchanges/%2F/{x}")


def test_add_user_set_permissions_and_set_policy(gw):
    name, vhost = unique("ctl-user"), unique("ctl-vh")
    assert ctl(gw, "declare", "vhost", vhost, "--description", "team").returncode == 0
    r = ctl_input(gw, b"pw-from-stdin\n", "add_user", name, "--password-stdin", "--tags", "management")
    assert r.stdout == f"user '{name}' set\n", r.stderr
    r = ctl(gw, "--vhost", vhost, "set_permissions", name, "^own-", ".*", ".*")
    assert r.stdout == f"permissions of user '{name}' on vhost '{vhost}' set\n", r.stderr
    conn = pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", gw.amqp_port, vhost, pika.PlainCredentials(name, "pw-from-stdin")))
    conn.close()
    r = ctl(gw, "--vhost", vhost, "set_policy", "cap", "^own-", '{"max-length": 100}', "--priority", "5",
            "--apply-to", "queues")
    assert r.returncode == 0, r.stderr
    assert call(gw, "GET", f"/api/policies/{vhost}/cap").body["definition"] == {"max-length": 100}
    listed = rows(ctl(gw, "--vhost", vhost, "list", "policies").stdout)
    assert listed[1][:5] == [vhost, "cap", "^own-", "queues", "5"]
    assert [name, vhost, "^own-", ".*", ".*"] in rows(ctl(gw, "list", "permissions").stdout)
    r = ctl(gw, "--vhost", vhost, "set_policy", "bad", ".", '{"max-lenght": 1}')
    assert r.returncode == 1
    assert "key 'max-lenght' is not supported" in r.stderr
    r = ctl(gw, "--vhost", vhost, "set_policy", "bad", ".", "{not json")
    assert r.returncode == 2 and "not JSON" in r.stderr
    r = ctl(gw, "add_user", unique("twice"), "pw", "--password-hash", "x")
    assert r.returncode == 2 and "give the password once" in r.stderr
    call(gw, "DELETE", f"/api/vhosts/{vhost}")
    call(gw, "DELETE", f"/api/users/{name}")


def test_export_and_import_round_trip(gw, tmp_path):
    vhost, q = unique("ctl-defs"), unique("ctl-kept")
    call(gw, "PUT", f"/api/vhosts/{vhost}", {})
    call(gw, "PUT", f"/api/queues/{vhost}/{q}", {"durable": True, "arguments": {"x-message-ttl": 5000}})
    path = tmp_path / "defs.json"
    r = ctl(gw, "--vhost", vhost, "export", str(path))
    assert r.stdout == f"definitions written to {path}\n", r.stderr
    exported = json.loads(path.read_text())
    assert [x["name"] for x in exported["queues"]] == [q]
    call(gw, "DELETE", f"/api/queues/{vhost}/{q}")
    assert ctl(gw, "--vhost", vhost, "import", str(path)).returncode == 0
    assert call(gw, "GET", f"/api/queues/{vhost}/{q}").body["arguments"] == {"x-message-ttl": 5000}
    full = json.loads(ctl(gw, "export", "-").stdout)
    assert {"users", "vhosts", "permissions", "policies"} <= set(full)
    r = ctl_input(gw, b"{broken", "import", "-")
    assert r.returncode == 2 and "- is not JSON" in r.stderr
    call(gw, "DELETE", f"/api/vhosts/{vhost}")
