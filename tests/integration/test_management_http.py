"""The management HTTP API of a real gateway process, through the standard library's HTTP
client: RabbitMQ's paths, fields, status codes and error bodies, basic authentication
against the AMQP users, and what AMQP clients do showing up in it."""
from __future__ import annotations

import os
import time
import urllib.request
from urllib.parse import quote

import pika
import pytest

from tests.support.amqp091_clients import pika_connection, unique
from tests.support.gateway_process import default_config, make_gateway
from tests.support.management_http import MANAGEMENT_USERS, call

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def gw(management_gw):
    return management_gw


def test_no_credentials_is_401_with_a_basic_challenge(gw):
    answer = call(gw, "GET", "/api/overview", user=None)
    assert answer.status == 401
    assert answer.headers["WWW-Authenticate"] == 'Basic realm="amqp-gateway management"'
    assert answer.body["error"] == "not_authorised"


def test_a_wrong_password_and_a_user_without_a_management_tag_are_401(gw):
    assert call(gw, "GET", "/api/overview", password="nope").status == 401
    answer = call(gw, "GET", "/api/overview", user="app")
    assert answer.status == 401
    assert "Not management user" in answer.body["reason"]


def test_overview_and_whoami(gw):
    overview = call(gw, "GET", "/api/overview").body
    assert overview["product_name"] == "amqp-gateway"
    assert {"queues", "exchanges", "connections"} <= set(overview["object_totals"])
    assert call(gw, "GET", "/api/whoami", user="watcher").body == {"name": "watcher",
                                                                   "tags": ["monitoring"]}


def test_declare_list_read_purge_and_delete_a_queue(gw):
    name = unique("http-q")
    path = f"/api/queues/%2F/{name}"
    assert call(gw, "PUT", path, {"durable": False, "auto_delete": "false"}).status == 201
    assert call(gw, "PUT", path, {"durable": False}).status == 204  # it existed
    conn = pika_connection(gw)
    try:
        ch = conn.channel()
        ch.confirm_delivery()
        for i in range(3):
            ch.basic_publish("", name, f"m{i}".encode())
    finally:
        conn.close()
    queue = call(gw, "GET", path).body
    assert (queue["name"], queue["vhost"], queue["durable"]) == (name, "/", False)
    assert (queue["messages"], queue["messages_ready"], queue["messages_unacknowledged"]) == (3, 3, 0)
    assert queue["message_stats"] == {"publish": 3, "deliver_get": 0, "ack": 0}
    listed = call(gw, "GET", "/api/queues/%2F?columns=name,messages").body
    assert {"name": name, "messages": 3} in listed
    assert call(gw, "DELETE", path + "/contents").status == 204
    assert call(gw, "GET", path).body["messages"] == 0
    assert call(gw, "DELETE", path).status == 204
    missing = call(gw, "GET", path)
    assert missing.status == 404
    assert set(missing.body) == {"error", "reason"}
    assert name in missing.body["reason"]


def test_a_redeclare_with_other_properties_is_a_conflict_naming_the_difference(gw):
    name = unique("http-q")
    assert call(gw, "PUT", f"/api/queues/%2F/{name}", {"durable": False}).status == 201
    answer = call(gw, "PUT", f"/api/queues/%2F/{name}", {"durable": True})
    assert answer.status == 409
    assert "durable" in answer.body["reason"]
    call(gw, "DELETE", f"/api/queues/%2F/{name}")


@pytest.mark.parametrize("method,path,body,status,words", [
    ("PUT", "/api/queues/%2F/x", b"{not json", 400, "not JSON"),
    ("PUT", "/api/queues/%2F/x", b'{"durable": "maybe"}', 400, "durable must be true or false"),
    ("PUT", "/api/exchanges/%2F/x", b"{}", 400, "type is missing"),
    ("GET", "/api/queues/no-such-vhost", None, 404, "vhost 'no-such-vhost' not found"),
    ("GET", "/api/nothing-here", None, 404, "Not Found"),
    ("POST", "/api/overview", b"{}", 405, "POST is not allowed here"),
])
def test_bad_requests_get_rabbitmq_s_error_bodies(gw, method, path, body, status, words):
    answer = call(gw, method, path, raw=body)
    assert answer.status == status
    assert words in answer.body["reason"]


def test_exchanges_and_bindings_by_rabbitmqadmin_s_paths(gw):
    x, q = unique("http-x"), unique("http-q")
    assert call(gw, "PUT", f"/api/exchanges/%2F/{x}", {"type": "topic", "durable": False}).status == 201
    assert call(gw, "PUT", f"/api/queues/%2F/{q}", {"durable": False}).status == 201
    bound = call(gw, "POST", f"/api/bindings/%2F/e/{x}/q/{q}", {"routing_key": "a.*"})
    assert bound.status == 201
    [binding] = call(gw, "GET", f"/api/bindings/%2F/e/{x}/q/{q}").body
    # the properties key is RabbitMQ's: the routing key percent-encoded, so in a path it
    # is encoded once more (as rabbitmqadmin does)
    key = quote(binding["properties_key"], safe="")
    assert binding["properties_key"] == "a.%2A"
    assert bound.headers["Location"] == f"/api/bindings/%2F/e/{x}/q/{q}/{key}"
    assert (binding["source"], binding["destination"], binding["routing_key"]) == (x, q, "a.*")
    assert call(gw, "GET", f"/api/exchanges/%2F/{x}/bindings/source").body == [binding]
    assert binding in call(gw, "GET", f"/api/queues/%2F/{q}/bindings").body
    assert call(gw, "GET", f"/api/bindings/%2F/e/{x}/q/{q}/{key}").body == binding
    assert call(gw, "DELETE", f"/api/bindings/%2F/e/{x}/q/{q}/{key}").status == 204
    assert call(gw, "GET", f"/api/bindings/%2F/e/{x}/q/{q}").body == []
    exchange = call(gw, "GET", f"/api/exchanges/%2F/{x}").body
    assert (exchange["type"], exchange["durable"]) == ("topic", False)
    assert call(gw, "DELETE", f"/api/exchanges/%2F/{x}").status == 204
    assert call(gw, "GET", f"/api/exchanges/%2F/{x}").status == 404
    call(gw, "DELETE", f"/api/queues/%2F/{q}")


def test_connections_channels_and_consumers_show_a_pika_client_and_delete_closes_it(gw):
    q = unique("http-q")
    conn = pika_connection(gw, user="admin", password="s3cret")
    ch = conn.channel()
    ch.queue_declare(q, auto_delete=True)
    ch.basic_consume(q, lambda *a: None)
    mine = [c for c in call(gw, "GET", "/api/connections").body if c["user"] == "admin"]
    assert len(mine) == 1
    assert mine[0]["protocol"] == "AMQP 0-9-1" and mine[0]["channels"] == 1
    name = mine[0]["name"]
    assert call(gw, "GET", "/api/connections/" + name.replace(" ", "%20").replace("#", "%23")
                ).body["name"] == name
    assert any(c["connection_details"]["name"] == name for c in call(gw, "GET", "/api/channels").body)
    assert any(c["queue"]["name"] == q for c in call(gw, "GET", "/api/consumers/%2F").body)
    closed = call(gw, "DELETE", "/api/connections/" + name.replace(" ", "%20").replace("#", "%23"),
                  headers={"X-Reason": "maintenance"})
    assert closed.status == 204
    with pytest.raises(pika.exceptions.ConnectionClosed) as info:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            conn.process_data_events(time_limit=0.05)
    assert "maintenance" in str(info.value)


def test_declaring_where_the_user_has_no_permissions_is_403(gw):
    # watcher (monitoring) sees every vhost but holds permissions only in /
    assert {v["name"] for v in call(gw, "GET", "/api/vhosts", user="watcher").body} == {"/", "other"}
    answer = call(gw, "PUT", f"/api/queues/other/{unique('http-q')}", {}, user="watcher")
    assert answer.status == 403
    assert answer.body == {"error": "access_refused", "reason": answer.body["reason"]}
    assert "watcher" in answer.body["reason"] and "other" in answer.body["reason"]


def test_users_only_for_administrators(gw):
    names = {u["name"] for u in call(gw, "GET", "/api/users").body}
    assert names == {"guest", "admin", "watcher", "app"}
    assert all("password_hash" not in u for u in call(gw, "GET", "/api/users").body)
    assert call(gw, "GET", "/api/users", user="watcher").status == 401


def test_the_gateway_s_own_resources(gw):
    assert call(gw, "GET", "/api/gateway/remotes").body == []
    assert call(gw, "GET", "/api/gateway/shovels").body == []
    ledger = call(gw, "GET", "/api/gateway/ledger").body
    assert ledger["enabled"] is True and ledger["writer"] == "process"
    assert isinstance(call(gw, "GET", "/api/gateway/links").body, list)
    assert call(gw, "GET", "/api/vhosts/%2F").body["name"] == "/"


def test_the_metrics_page_has_the_per_entity_figures(gw):
    q = unique("http-q")
    conn = pika_connection(gw)
    try:
        ch = conn.channel()
        ch.queue_declare(q, auto_delete=False)
        ch.confirm_delivery()
        for _ in range(4):
            ch.basic_publish("", q, b"m")
        method, _, _ = ch.basic_get(q)
        ch.basic_ack(method.delivery_tag)
        ch.basic_get(q)  # left unacknowledged
        with urllib.request.urlopen(f"http://127.0.0.1:{gw.metrics_port}{gw.metrics_path}",
                                    timeout=10) as resp:
            page = resp.read().decode()
    finally:
        conn.close()
        call(gw, "DELETE", f"/api/queues/%2F/{q}")
    labels = f'{{queue="{q}",vhost="/"}}'
    for line in (f"amqp_gateway_queue_messages_ready{labels} 2.0",
                 f"amqp_gateway_queue_messages_unacked{labels} 1.0",
                 f"amqp_gateway_queue_messages_published_total{labels} 4.0",
                 f"amqp_gateway_queue_messages_delivered_total{labels} 2.0",
                 f"amqp_gateway_queue_messages_acked_total{labels} 1.0"):
        assert line in page.splitlines()
    assert 'amqp_gateway_deliveries_unsettled_older_than{seconds="60"} 0.0' in page


THROTTLE_LIMITS = ("limits:\n  failed_logins_before_delay: 2\n  failed_login_max_delay: 3.0\n"
                   "  failed_login_max_pending: 2\n")


def test_repeated_failed_logins_from_a_peer_get_429_for_a_while():
    gw = make_gateway(config_text=default_config(users=MANAGEMENT_USERS).replace("limits:\n", THROTTLE_LIMITS),
                        extra_args=("--management", "127.0.0.1:0")).start()
    try:
        assert call(gw, "GET", "/api/overview", password="nope").status == 401
        second = call(gw, "GET", "/api/overview", password="nope")  # the rules delay it: 429
        assert second.status == 429 and second.headers["Retry-After"] == "2"
        assert second.body["error"] == "too_many_requests"
        assert call(gw, "GET", "/api/overview", password="nope").headers["Retry-After"] == "3"
        blocked = call(gw, "GET", "/api/overview")  # admin past its limit: even a right password
        assert blocked.status == 429 and "too many failed logins for user 'admin'" in blocked.body["reason"]
        with pytest.raises(pika.exceptions.AMQPConnectionError):  # one count for both protocols
            pika_connection(gw, user="admin", password=MANAGEMENT_USERS["admin"][0]).close()
        pika_connection(gw).close()  # another user from the same address: never refused for it
        assert gw.wait_for_log(r"login refused: user 'admin' from 127\.0\.0\.1 \(HTTP, basic\)")
        deadline = time.monotonic() + int(blocked.headers["Retry-After"]) + 5
        while call(gw, "GET", "/api/overview").status != 200:
            assert time.monotonic() < deadline, "admin was not checked again after Retry-After"
            time.sleep(0.2)
    finally:
        gw.stop()


def test_overview_names_the_rabbitmq_api_version_and_the_resident_memory(gw):
    overview = call(gw, "GET", "/api/overview").body
    assert overview["rabbitmq_version"] == "3.10.8"   # gateway.product.API_RABBITMQ_VERSION
    with open(f"/proc/{gw.pid}/statm") as f:
        rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    # the RSS of the process that runs the gateway, read a moment apart: same order of magnitude
    assert 0.5 * rss < overview["memory_used"] < 2 * rss
    assert overview["memory_used"] > 10 * 1024 * 1024
    assert "queued_bytes" in overview


def test_connections_carry_the_name_the_client_gave_itself(gw):
    from proton import symbol
    from proton.utils import BlockingConnection

    conn091 = pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", gw.amqp_port, credentials=pika.PlainCredentials("admin", "s3cret"),
        client_properties={"connection_name": "orders-worker-091"}))
    conn10 = BlockingConnection(f"amqp://127.0.0.1:{gw.amqp_port}", user="admin", password="s3cret",
                                allowed_mechs="PLAIN", timeout=10,
                                properties={symbol("connection_name"): "orders-worker-10"})
    try:
        named = {c["user_provided_name"]: c["protocol"]
                 for c in call(gw, "GET", "/api/connections").body}
        assert named["orders-worker-091"] == "AMQP 0-9-1"
        assert named["orders-worker-10"] == "AMQP 1.0"
    finally:
        conn091.close()
        conn10.close()


def test_the_configured_rabbitmq_version_is_the_overview_s(tmp_path):
    from tests.support.management_http import management_gateway

    gw = management_gateway(extra="rabbitmq_version: '4.1.0'\n").start()
    try:
        overview = call(gw, "GET", "/api/overview").body
        assert (overview["rabbitmq_version"], overview["product_name"]) == ("4.1.0", "amqp-gateway")
    finally:
        gw.stop()
