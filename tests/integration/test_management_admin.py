"""Users, vhosts, permissions, policies and vhost limits changed at run time through the
HTTP API of a real gateway (standard library HTTP client), shown working by real AMQP
clients over both protocols, and kept across a restart and a SIGHUP reload."""
from __future__ import annotations

import signal

import pika
import pika.exceptions
import pytest
from proton import ConnectionException, Message
from proton.utils import BlockingConnection, LinkDetached

from tests.support.amqp091_clients import unique
from tests.support.cross_protocol_clients import TIMEOUT
from tests.support.gateway_process import Gateway, default_config, make_gateway
from tests.support.management_http import MANAGEMENT_USERS, call

pytestmark = pytest.mark.integration

#: a user RabbitMQ 3.10.8 made (PUT /api/users/bob {"password": "pw"}), as it exports it
RABBIT_BOB = {"password_hash": "PxXaU889YAVUbjL0LOUHxJsrjUYYpMa7o+n7hHDuBj4d+T/J",
              "hashing_algorithm": "rabbit_password_hashing_sha256"}


def admin_gateway(state_dir, extra: str = "", process: bool = False) -> Gateway:
    """A gateway with the management API whose store lives in ``state_dir`` (in this
    process unless ``process``)."""
    return make_gateway(
        config_text=default_config(users=MANAGEMENT_USERS, extra=f"state_dir: {state_dir}\n{extra}"),
        extra_args=("--management", "127.0.0.1:0"), process=process)


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    gateway = admin_gateway(tmp_path_factory.mktemp("admin-state")).start()
    yield gateway
    gateway.stop()


def pika_as(gw, user: str, password: str, vhost: str = "/") -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", gw.amqp_port, vhost, pika.PlainCredentials(user, password),
        socket_timeout=TIMEOUT, blocked_connection_timeout=TIMEOUT))


def proton_as(gw, user: str, password: str, vhost: str = "/") -> BlockingConnection:
    return BlockingConnection(f"amqp://127.0.0.1:{gw.amqp_port}", user=user, password=password,
                              virtual_host=f"vhost:{vhost}", allowed_mechs="PLAIN", timeout=TIMEOUT)


def wait_closed(conn: pika.BlockingConnection) -> pika.exceptions.ConnectionClosed:
    with pytest.raises(pika.exceptions.ConnectionClosed) as info:
        conn.process_data_events(time_limit=TIMEOUT)
        conn.channel()  # the close may arrive with the next frame
    return info.value


def test_a_user_made_over_http_logs_in_over_both_protocols_and_goes_when_deleted(gw):
    name = unique("carol")
    path = f"/api/users/{name}"
    assert call(gw, "PUT", path, {"password": "pw-1", "tags": "management"}).status == 201
    assert call(gw, "PUT", f"/api/permissions/%2F/{name}",
                {"configure": ".*", "write": ".*", "read": ".*"}).status == 201
    assert call(gw, "GET", path).body == {"name": name, "tags": ["management"],
                                          "permissions": {"/": {"configure": ".*", "write": ".*",
                                                                "read": ".*"}},
                                          "hashing_algorithm": "amqp_gateway_scram_sha_256",
                                          "limits": {}}
    assert {"name": name, "tags": ["management"]} in call(gw, "GET", "/api/users?columns=name,tags").body
    conn = pika_as(gw, name, "pw-1")
    proton_as(gw, name, "pw-1").close()
    assert call(gw, "GET", "/api/whoami", user=name, password="pw-1").body["name"] == name
    assert call(gw, "PUT", path, {"password": "pw-2", "tags": ["management"]}).status == 204
    with pytest.raises(pika.exceptions.ProbableAuthenticationError):
        pika_as(gw, name, "pw-1")
    pika_as(gw, name, "pw-2").close()
    assert call(gw, "DELETE", path).status == 204
    closed = wait_closed(conn)
    assert f"user '{name}' was deleted" in str(closed)
    with pytest.raises(pika.exceptions.ProbableAuthenticationError):
        pika_as(gw, name, "pw-2")
    assert call(gw, "DELETE", path).status == 404
    assert call(gw, "GET", path).status == 404


def test_a_rabbitmq_password_hash_logs_in_with_its_password(gw):
    name = unique("bob")
    answer = call(gw, "PUT", f"/api/users/{name}", dict(RABBIT_BOB, tags=""))
    assert answer.status == 201, answer.body
    call(gw, "PUT", f"/api/permissions/%2F/{name}", {"configure": "", "write": "", "read": ""})
    pika_as(gw, name, "pw").close()
    with pytest.raises(pika.exceptions.ProbableAuthenticationError):
        pika_as(gw, name, "PW")
    assert call(gw, "GET", f"/api/users/{name}").body["hashing_algorithm"] == \
        "rabbit_password_hashing_sha256"
    call(gw, "DELETE", f"/api/users/{name}")


@pytest.mark.parametrize("body,words", [
    ({"tags": ""}, "a new user needs password or password_hash"),
    ({"password_hash": "AAAA", "tags": ""}, "password_hash: a rabbit_password_hashing_sha256 "
                                            "password hash is 36 bytes"),
    ({"password_hash": "x", "hashing_algorithm": "rabbit_password_hashing_md5"},
     "unknown hashing algorithm 'rabbit_password_hashing_md5'"),
    ({"password": "", "tags": ""}, "password must be non-empty text"),
    ({"password": "x", "tags": 7}, "tags must be text separated by commas or a list"),
])
def test_bad_users_are_400_naming_the_problem(gw, body, words):
    answer = call(gw, "PUT", f"/api/users/{unique('bad')}", body)
    assert answer.status == 400 and words in answer.body["reason"], answer.body


def test_only_administrators_change_users_vhosts_permissions_and_limits(gw):
    for method, path, body in [("PUT", "/api/users/x", {"password": "p"}),
                               ("PUT", "/api/vhosts/x", {}),
                               ("PUT", "/api/permissions/%2F/app", {"configure": ".*", "write": ".*",
                                                                    "read": ".*"}),
                               ("PUT", "/api/vhost-limits/%2F/max-queues", {"value": 1}),
                               ("GET", "/api/permissions", None)]:
        answer = call(gw, method, path, body, user="watcher")
        assert answer.status == 403, (path, answer)
        assert "needs tag 'administrator'" in answer.body["reason"]
    assert call(gw, "PUT", "/api/policies/%2F/p", {"pattern": ".", "definition": {"max-length": 1}},
                user="watcher").status == 403


def test_a_vhost_made_over_http_takes_connections_and_its_deletion_closes_them(gw):
    vhost = unique("vh")
    path = f"/api/vhosts/{vhost}"
    assert call(gw, "PUT", path, {"description": "orders", "tags": "prod,eu"}).status == 201
    assert call(gw, "PUT", path, {"description": "orders!"}).status == 204
    shown = call(gw, "GET", path).body
    assert (shown["name"], shown["description"], shown["tags"]) == (vhost, "orders!", ["prod", "eu"])
    # RabbitMQ gives the creating user full permissions on a new vhost
    assert call(gw, "GET", f"/api/permissions/{vhost}/admin").body["configure"] == ".*"
    assert [p["user"] for p in call(gw, "GET", f"/api/vhosts/{vhost}/permissions").body] == ["admin"]
    conn = pika_as(gw, "admin", "s3cret", vhost)
    conn.channel().queue_declare("in-new-vhost")
    amqp10 = proton_as(gw, "admin", "s3cret", vhost)
    assert call(gw, "GET", f"/api/queues/{vhost}/in-new-vhost").status == 200
    assert call(gw, "DELETE", path).status == 204
    assert f"vhost '{vhost}' was deleted" in str(wait_closed(conn))
    with pytest.raises(ConnectionException):
        amqp10.create_receiver("in-new-vhost")
    assert call(gw, "GET", path).status == 404
    assert call(gw, "GET", f"/api/permissions/{vhost}/admin").status == 404
    assert call(gw, "DELETE", path).status == 404


def test_permissions_set_over_http_are_what_amqp_enforces(gw):
    name = unique("perm")
    call(gw, "PUT", f"/api/users/{name}", {"password": "pw", "tags": ""})
    with pytest.raises(pika.exceptions.ProbableAccessDeniedError) as info:
        pika_as(gw, name, "pw")
    assert "(530)" in str(info.value)
    assert call(gw, "PUT", f"/api/permissions/%2F/{name}",
                {"configure": "mine-.*", "write": ".*", "read": ".*"}).status == 201
    conn = pika_as(gw, name, "pw")
    ch = conn.channel()
    ch.queue_declare("mine-" + name, auto_delete=True)
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as refused:
        ch.queue_declare("theirs-" + name)
    assert refused.value.reply_code == 403
    conn.close()
    assert call(gw, "GET", f"/api/permissions/%2F/{name}").body == {
        "user": name, "vhost": "/", "configure": "mine-.*", "write": ".*", "read": ".*"}
    bad = call(gw, "PUT", f"/api/permissions/%2F/{name}", {"configure": "(", "write": "", "read": ""})
    assert bad.status == 400 and "not a valid regular expression" in bad.body["reason"]
    assert call(gw, "PUT", f"/api/permissions/%2F/{name}", {"configure": ".*"}).status == 400
    assert call(gw, "DELETE", f"/api/permissions/%2F/{name}").status == 204
    assert call(gw, "DELETE", f"/api/permissions/%2F/{name}").status == 404
    call(gw, "DELETE", f"/api/users/{name}")


def test_a_policy_changes_existing_queues_and_new_ones(gw):
    q = unique("pol-q")
    conn = pika_as(gw, "admin", "s3cret")
    ch = conn.channel()
    ch.queue_declare(q, arguments={"x-max-length": 10})
    ch.confirm_delivery()
    for i in range(5):
        ch.basic_publish("", q, b"m%d" % i)
    answer = call(gw, "PUT", "/api/policies/%2F/short", {
        "pattern": "^pol-", "definition": {"max-length": 2, "message-ttl": 60000},
        "priority": 3, "apply-to": "queues"})
    assert answer.status == 201, answer.body
    queue = call(gw, "GET", f"/api/queues/%2F/{q}").body
    assert (queue["messages"], queue["policy"]) == (2, "short")
    assert queue["effective_policy_definition"] == {"max-length": 2, "message-ttl": 60000}
    assert queue["arguments"] == {"x-max-length": 10}
    assert [ch.basic_get(q, auto_ack=True)[2] for _ in range(2)] == [b"m3", b"m4"]
    assert call(gw, "GET", "/api/policies/%2F/short").body == {
        "vhost": "/", "name": "short", "pattern": "^pol-", "apply-to": "queues",
        "definition": {"max-length": 2, "message-ttl": 60000}, "priority": 3}
    assert call(gw, "GET", "/api/policies").body == [call(gw, "GET", "/api/policies/%2F/short").body]
    assert call(gw, "DELETE", "/api/policies/%2F/short").status == 204
    for i in range(5):
        ch.basic_publish("", q, b"n%d" % i)
    assert call(gw, "GET", f"/api/queues/%2F/{q}").body["messages"] == 5
    conn.close()
    call(gw, "DELETE", f"/api/queues/%2F/{q}")


@pytest.mark.parametrize("body,words", [
    ({"pattern": "^x", "definition": {"max-lenght": 2}}, "key 'max-lenght' is not supported"),
    ({"pattern": "(", "definition": {"max-length": 2}}, "is not a regular expression"),
    ({"pattern": "^x", "definition": {"message-ttl": "1s"}}, "message-ttl must be an integer"),
])
def test_bad_policies_are_400_and_change_nothing(gw, body, words):
    answer = call(gw, "PUT", "/api/policies/%2F/bad", body)
    assert answer.status == 400 and words in answer.body["reason"], answer.body
    assert call(gw, "GET", "/api/policies/%2F/bad").status == 404


def test_vhost_limits_are_enforced_over_both_protocols(gw):
    vhost = unique("limited")
    call(gw, "PUT", f"/api/vhosts/{vhost}", {})
    assert call(gw, "PUT", f"/api/vhost-limits/{vhost}/max-connections", {"value": 1}).status == 204
    assert call(gw, "PUT", f"/api/vhost-limits/{vhost}/max-queues", {"value": 1}).status == 204
    assert call(gw, "GET", f"/api/vhost-limits/{vhost}").body == [
        {"vhost": vhost, "value": {"max-connections": 1, "max-queues": 1}}]
    first = pika_as(gw, "admin", "s3cret", vhost)
    with pytest.raises(pika.exceptions.ProbableAccessDeniedError) as info:
        pika_as(gw, "admin", "s3cret", vhost)
    assert (f"(530) \"NOT_ALLOWED - access to vhost '{vhost}' refused for user 'admin': connection "
            "limit (1) is reached\"" in str(info.value))
    with pytest.raises(ConnectionException) as refused10:
        proton_as(gw, "admin", "s3cret", vhost)
    assert "amqp:resource-limit-exceeded" in str(refused10.value)
    ch = first.channel()
    ch.queue_declare("one")
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as full:
        ch.queue_declare("two")
    assert full.value.reply_code == 406
    assert f"queue limit in vhost '{vhost}' (1) is reached" in full.value.reply_text
    first.close()
    amqp10 = proton_as(gw, "admin", "s3cret", vhost)
    with pytest.raises(LinkDetached) as detached:
        amqp10.create_sender("/queue/three").send(Message(body="x"), timeout=TIMEOUT)
    assert "amqp:resource-limit-exceeded" in str(detached.value)
    amqp10.close()
    assert call(gw, "PUT", f"/api/vhost-limits/{vhost}/max-channels", {"value": 1}).status == 400
    assert call(gw, "DELETE", f"/api/vhost-limits/{vhost}/max-connections").status == 204
    pika_as(gw, "admin", "s3cret", vhost).close()
    pika_as(gw, "admin", "s3cret", vhost).close()
    call(gw, "DELETE", f"/api/vhosts/{vhost}")


@pytest.mark.process  # SIGHUP to a gateway process
def test_run_time_definitions_survive_a_restart_and_a_reload(tmp_path):
    gw = admin_gateway(tmp_path, process=True).start()
    try:
        call(gw, "PUT", "/api/vhosts/kept", {"description": "kept"})
        call(gw, "PUT", "/api/users/dora", {"password": "pw", "tags": "monitoring"})
        call(gw, "PUT", "/api/permissions/kept/dora", {"configure": "", "write": ".*", "read": ".*"})
        call(gw, "PUT", "/api/policies/kept/cap", {"pattern": ".", "definition": {"max-length": 1}})
        call(gw, "PUT", "/api/vhost-limits/kept/max-queues", {"value": 7})
        call(gw, "DELETE", "/api/users/watcher")       # a config user, removed at run time
        call(gw, "PUT", "/api/users/app", {"password": "new-app-pw"})   # a config user, changed
        conn = pika_as(gw, "admin", "s3cret", "kept")
        ch = conn.channel()
        ch.queue_declare("durable-q", durable=True)
        ch.confirm_delivery()
        for i in range(3):
            ch.basic_publish("", "durable-q", b"m%d" % i, pika.BasicProperties(delivery_mode=2))
        conn.close()
    finally:
        assert gw.stop() == 0
    again = admin_gateway(tmp_path, process=True).start()
    try:
        assert call(again, "GET", "/api/vhosts/kept").body["description"] == "kept"
        assert call(again, "GET", "/api/users/dora").body["tags"] == ["monitoring"]
        assert call(again, "GET", "/api/permissions/kept/dora").body["write"] == ".*"
        assert call(again, "GET", "/api/policies/kept/cap").body["definition"] == {"max-length": 1}
        assert call(again, "GET", "/api/vhost-limits/kept").body[0]["value"] == {"max-queues": 7}
        # the durable queue came back with its policy in effect
        queue = call(again, "GET", "/api/queues/kept/durable-q").body
        assert (queue["messages"], queue["policy"]) == (1, "cap")
        assert call(again, "GET", "/api/users/watcher").status == 404
        pika_as(again, "app", "new-app-pw").close()
        pika_as(again, "dora", "pw", "kept").close()
        # a reload re-reads the config's users; the run-time changes stay on top
        with open(again.config_path, "a") as f:
            f.write("")
        count = again.count_log("users reloaded")
        again.signal(signal.SIGHUP)
        assert again.wait_for_log_count("users reloaded", count + 1)
        assert call(again, "GET", "/api/users/watcher").status == 404
        pika_as(again, "app", "new-app-pw").close()
        assert call(again, "GET", "/api/users/admin").status == 200
    finally:
        again.stop()
