"""A definitions file exported from a real RabbitMQ (a private node, Debian's 3.10) imports
into a real gateway and gives the same queues, exchanges, bindings, users, permissions,
policies and vhost limits; RabbitMQ's users log in with their passwords; the gateway's own
export imports into a fresh gateway and exports the same again (the identity)."""
from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from typing import Any

import pika
import pytest

from bench.reference import PrivateRabbit, ReferenceUnavailable, rabbit_installed
from tests.support.gateway_process import Gateway, default_config, make_gateway
from tests.support.management_http import MANAGEMENT_USERS, call

pytestmark = [pytest.mark.integration, pytest.mark.interop, pytest.mark.slow]


def rabbit_api(rabbit: PrivateRabbit, method: str, path: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{rabbit.management_port}{path}", data=data,
                                 method=method)
    req.add_header("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=30) as resp:
        raw = resp.read()
    return json.loads(raw) if raw else None


#: what is made in RabbitMQ before the export: (method, path, body)
SETUP = [
    ("PUT", "/api/vhosts/shop", {}),
    ("PUT", "/api/users/bob", {"password": "bob-pw", "tags": "management"}),
    ("PUT", "/api/users/ops", {"password": "ops-pw", "tags": "policymaker,monitoring"}),
    ("PUT", "/api/permissions/shop/bob", {"configure": "^orders", "write": ".*", "read": ".*"}),
    ("PUT", "/api/permissions/%2F/ops", {"configure": "", "write": "", "read": ".*"}),
    ("PUT", "/api/queues/%2F/q-kept", {"durable": True, "arguments": {"x-max-length": 5,
                                                                       "x-message-ttl": 60000}}),
    ("PUT", "/api/queues/%2F/q-passing", {"durable": False, "auto_delete": False}),
    ("PUT", "/api/queues/shop/orders", {"durable": True,
                                        "arguments": {"x-dead-letter-exchange": "dead",
                                                      "x-overflow": "reject-publish"}}),
    ("PUT", "/api/exchanges/%2F/events", {"type": "topic", "durable": True}),
    ("PUT", "/api/exchanges/%2F/fan", {"type": "fanout", "durable": False,
                                       "arguments": {"alternate-exchange": "amq.fanout"}}),
    ("PUT", "/api/exchanges/shop/dead", {"type": "fanout", "durable": True}),
    ("POST", "/api/bindings/%2F/e/events/q/q-kept", {"routing_key": "order.#", "arguments": {"k": 1}}),
    ("POST", "/api/bindings/%2F/e/events/e/fan", {"routing_key": "audit.*"}),
    ("POST", "/api/bindings/%2F/e/fan/q/q-passing", {"routing_key": ""}),
    ("POST", "/api/bindings/shop/e/dead/q/orders", {"routing_key": "again"}),
    ("PUT", "/api/policies/%2F/cap", {"pattern": "^q-", "definition": {"max-length": 3},
                                      "priority": 2, "apply-to": "queues"}),
    ("PUT", "/api/policies/shop/ttl", {"pattern": ".*", "definition": {"message-ttl": 30000,
                                                                       "ha-mode": "all"}}),
    ("PUT", "/api/vhost-limits/shop/max-queues", {"value": 10}),
]


@pytest.fixture(scope="module")
def rabbit_export() -> dict[str, Any]:
    if not rabbit_installed():
        pytest.skip("needs Debian's rabbitmq-server")
    try:
        rabbit = PrivateRabbit(management_port=0).start()
    except ReferenceUnavailable as exc:
        pytest.fail(f"the private RabbitMQ did not start: {exc}")
    try:
        for method, path, body in SETUP:
            rabbit_api(rabbit, method, path, body)
        return rabbit_api(rabbit, "GET", "/api/definitions")
    finally:
        rabbit.stop()


def gateway(state_dir) -> Gateway:
    return make_gateway(
        config_text=default_config(users=MANAGEMENT_USERS, extra=f"state_dir: {state_dir}\n"),
        extra_args=("--management", "127.0.0.1:0")).start()


def keyed(items: list[dict[str, Any]], *keys: str) -> dict[tuple, dict[str, Any]]:
    return {tuple(item[k] for k in keys): item for item in items}


def comparable(doc: dict[str, Any]) -> dict[str, Any]:
    """The entities of an export, as sets keyed by their identity."""
    return {"queues": keyed(doc["queues"], "vhost", "name"),
            "exchanges": keyed(doc["exchanges"], "vhost", "name"),
            "bindings": {json.dumps(b, sort_keys=True) for b in doc["bindings"]},
            "policies": keyed(doc["policies"], "vhost", "name"),
            "parameters": keyed(doc["parameters"], "vhost", "component", "name")}


def test_a_rabbitmq_export_imports_into_the_gateway_as_the_same_state(rabbit_export, tmp_path):
    assert rabbit_export["product_name"] == "RabbitMQ" and rabbit_export["queues"]
    gw = gateway(tmp_path / "one")
    try:
        answer = call(gw, "POST", "/api/definitions", rabbit_export)
        assert answer.status == 204, answer.body
        ours = call(gw, "GET", "/api/definitions").body
        assert comparable(ours) == comparable(rabbit_export)
        users = keyed(ours["users"], "name")
        for user in rabbit_export["users"]:
            mine = users[(user["name"],)]
            assert (mine["password_hash"], mine["hashing_algorithm"], sorted(mine["tags"])) == (
                user["password_hash"], user["hashing_algorithm"], sorted(user["tags"]))
        assert {json.dumps(p, sort_keys=True) for p in rabbit_export["permissions"]} <= {
            json.dumps(p, sort_keys=True) for p in ours["permissions"]}
        assert {v["name"] for v in rabbit_export["vhosts"]} <= {v["name"] for v in ours["vhosts"]}
        # RabbitMQ's users log in with their passwords, with their permissions
        conn = pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", gw.amqp_port, "shop", pika.PlainCredentials("bob", "bob-pw")))
        conn.channel().queue_declare("orders", passive=True)
        conn.close()
        # the policies are in effect: the stricter max-length, the shop's TTL
        q_kept = call(gw, "GET", "/api/queues/%2F/q-kept").body
        assert (q_kept["policy"], q_kept["arguments"]["x-max-length"]) == ("cap", 5)
        assert call(gw, "GET", "/api/queues/shop/orders").body["policy"] == "ttl"
        # importing it again changes nothing
        assert call(gw, "POST", "/api/definitions", rabbit_export).status == 204
        assert call(gw, "GET", "/api/definitions").body == ours
    finally:
        gw.stop()
    # the gateway's own export, into a fresh gateway: the same export again
    fresh = gateway(tmp_path / "two")
    try:
        assert call(fresh, "POST", "/api/definitions", ours).status == 204
        assert call(fresh, "GET", "/api/definitions").body == ours
        per_vhost = call(fresh, "GET", "/api/definitions/shop").body
        assert [q["name"] for q in per_vhost["queues"]] == ["orders"]
        assert "vhost" not in per_vhost["queues"][0] and "users" not in per_vhost
    finally:
        fresh.stop()


def test_a_per_vhost_export_imports_into_another_vhost(tmp_path):
    gw = gateway(tmp_path)
    try:
        call(gw, "PUT", "/api/vhosts/src", {})
        call(gw, "PUT", "/api/vhosts/dst", {})
        call(gw, "PUT", "/api/queues/src/work", {"durable": True, "arguments": {"x-max-length": 9}})
        call(gw, "PUT", "/api/exchanges/src/in", {"type": "direct"})
        call(gw, "POST", "/api/bindings/src/e/in/q/work", {"routing_key": "w"})
        call(gw, "PUT", "/api/policies/src/p", {"pattern": "^w", "definition": {"expires": 60000}})
        exported = call(gw, "GET", "/api/definitions/src").body
        assert call(gw, "POST", "/api/definitions/dst", exported).status == 204
        moved = call(gw, "GET", "/api/definitions/dst").body
        for key in ("queues", "exchanges", "bindings"):
            assert moved[key] == exported[key]
        assert [(p["vhost"], p["name"]) for p in moved["policies"]] == [("dst", "p")]
    finally:
        gw.stop()


@pytest.mark.parametrize("doc,words", [
    ([], "the body must be a JSON object"),
    ({"queues": {"q": 1}}, "definitions: queues must be a list of objects"),
    ({"topic_permissions": [{"user": "u"}]}, "topic_permissions are not supported"),
    ({"parameters": [{"component": "shovel", "vhost": "/", "name": "s", "value": {}}]},
     "parameters of component 'shovel' cannot be imported"),
    ({"users": [{"name": "u", "password_hash": "", "tags": [], "limits": {"max-connections": 1}}]},
     "per-user limits are set in the config file"),
    ({"queues": [{"name": "q", "vhost": "nowhere", "durable": True}]},
     "definitions: queue 'q': no vhost 'nowhere'"),
    ({"policies": [{"vhost": "/", "name": "p", "pattern": ".", "definition": {"nope": 1}}]},
     "definitions: policy 'p': policy 'p': key 'nope' is not supported"),
    ({"users": [{"name": "u", "password_hash": "xx", "hashing_algorithm": "rabbit_password_hashing_md5",
                 "tags": []}]}, "unknown hashing algorithm"),
])
def test_an_import_it_cannot_take_is_400_naming_the_item(management_gw, doc, words):
    before = call(management_gw, "GET", "/api/definitions").body
    answer = call(management_gw, "POST", "/api/definitions", doc)
    assert answer.status == 400 and words in answer.body["reason"], answer.body
    assert call(management_gw, "GET", "/api/definitions").body == before
    assert call(management_gw, "POST", "/api/definitions", {}, user="watcher").status == 403
