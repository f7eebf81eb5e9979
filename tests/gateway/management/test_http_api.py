"""The HTTP API's handlers as plain functions over a real broker and model: routing,
percent-encoded names, status codes and RabbitMQ's error bodies, without a socket."""
from __future__ import annotations

import json

import pytest

from gateway.auth import Authenticator, ConnectionRegistry, Permission, User, UserDirectory
from gateway.broker import Broker
from gateway.management import ManagementModel
from gateway.management.http_api import ApiRequest, HttpApi, handle, split_path
from gateway.management.http_errors import HttpError

ALL = Permission(".*", ".*", ".*")
ADMIN = User("admin", None, tags=("administrator",), permissions={"/": ALL, "a/b": ALL})
MANAGER = User("manager", None, tags=("management",), permissions={"/": ALL})


@pytest.fixture
def api() -> HttpApi:
    broker = Broker(container_id="gw-test", vhosts=("/", "a/b"))
    model = ManagementModel(broker, ConnectionRegistry(),
                            Authenticator(UserDirectory([ADMIN, MANAGER])), clock=lambda: 150.0)
    return HttpApi(model, lambda: {"enabled": False}, started_at=100.0)


def call(api, method: str, path: str, body=None, user: User = ADMIN, **query):
    raw = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    return handle(api, ApiRequest(method, split_path(path), {k: [v] for k, v in query.items()},
                                  raw, user))


def test_split_path_decodes_each_segment_after_splitting():
    assert split_path(b"/api/queues/%2F/a%2Fb?x=1") == ("api", "queues", "/", "a/b")
    assert split_path("/") == ()
    with pytest.raises(HttpError) as info:
        split_path(b"/api/queues/%ff")
    assert info.value.status == 400


def test_a_vhost_with_a_slash_in_its_name(api):
    assert call(api, "PUT", "/api/queues/a%2Fb/q%2F1", {"durable": False}).status == 201
    [q] = call(api, "GET", "/api/queues/a%2Fb").body
    assert (q["vhost"], q["name"]) == ("a/b", "q/1")


def test_declare_is_201_then_204_and_delete_is_204(api):
    assert call(api, "PUT", "/api/exchanges/%2F/x", {"type": "fanout"}).status == 201
    assert call(api, "PUT", "/api/exchanges/%2F/x", {"type": "fanout"}).status == 204
    assert call(api, "PUT", "/api/exchanges/%2F/x", {"type": "topic"}).status == 409
    assert call(api, "DELETE", "/api/exchanges/%2F/x").status == 204
    assert call(api, "DELETE", "/api/exchanges/%2F/x").status == 404


def test_routing_errors():
    api = None
    assert handle(api, ApiRequest("GET", ("api", "nope"), user=ADMIN)).status == 404
    answer = handle(api, ApiRequest("PATCH", ("api", "queues", "/", "q"), user=ADMIN))
    assert answer.status == 405
    assert answer.body == {"error": "Method Not Allowed",
                           "reason": "PATCH is not allowed here; allowed: DELETE, GET, PUT"}


def test_list_parameters_apply(api):
    for name in ("b", "a", "c"):
        call(api, "PUT", f"/api/queues/%2F/{name}", {})
    answer = call(api, "GET", "/api/queues/%2F", columns="name", sort="name", sort_reverse="true")
    assert answer.body == [{"name": "c"}, {"name": "b"}, {"name": "a"}]
    assert call(api, "GET", "/api/queues", page="x").status == 400


def test_nodes_and_overview_carry_uptime_and_alarms(api):
    [node] = call(api, "GET", "/api/nodes").body
    assert (node["uptime"], node["alarms"], node["mem_alarm"]) == (50_000, [], False)
    api.model.broker.gate.alarms["disk"] = "free disk space below the limit"
    overview = call(api, "GET", "/api/overview").body
    assert (overview["uptime"], overview["alarms"]) == (50_000, ["disk"])
    assert call(api, "GET", "/api/nodes").body[0]["disk_free_alarm"] is True


def test_a_management_user_sees_only_its_vhosts(api):
    names = {v["name"] for v in call(api, "GET", "/api/vhosts", user=MANAGER).body}
    assert names == {"/"}
    assert call(api, "GET", "/api/queues/a%2Fb", user=MANAGER).status == 404
    assert call(api, "GET", "/api/users", user=MANAGER).status == 401


def test_the_ledger_status_is_the_service_s(api):
    assert call(api, "GET", "/api/gateway/ledger").body == {"enabled": False}
