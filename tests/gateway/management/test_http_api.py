"""The HTTP API's handlers as plain functions over a real broker and model: routing,
percent-encoded names, status codes and RabbitMQ's error bodies, without a socket."""
from __future__ import annotations

import json
import sqlite3

import pytest

from gateway.auth import Authenticator, ConnectionRegistry, Permission, User, UserDirectory
from gateway.broker import Broker
from gateway.management import ManagementModel
from gateway.management.http_api import ApiRequest, HttpApi, handle, handle_saved, split_path
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


# -- answers that wait for the store (issue 41, item 2) ------------------------------------

def _stored_api(store) -> HttpApi:
    broker = Broker(container_id="gw-test", store=store)
    model = ManagementModel(broker, ConnectionRegistry(), Authenticator(UserDirectory([ADMIN])),
                            clock=lambda: 150.0)
    return HttpApi(model, lambda: {"enabled": False}, started_at=100.0)


def _saved_call(api, method: str, path: str, body=None) -> list:
    answers: list = []
    handle_saved(api, ApiRequest(method, split_path(path), {}, json.dumps(body or {}).encode(), ADMIN),
                 answers.append)
    return answers


def test_a_durable_declare_is_answered_once_the_store_committed_it(store, loop, tmp_path):
    api = _stored_api(store)
    answers = _saved_call(api, "PUT", "/api/queues/%2F/q", {"durable": True})
    assert answers == []  # in memory, not yet on disk
    done: list = []
    store.after_commit(done.append)
    store.flush()
    loop.run_until(lambda: bool(answers))
    assert [a.status for a in answers] == [201]
    db = sqlite3.connect(str(tmp_path / "store.db"))
    assert db.execute("SELECT name FROM queues").fetchall() == [("q",)]
    # a transient one, and a read, are answered at once
    assert [a.status for a in _saved_call(api, "PUT", "/api/queues/%2F/t", {"durable": False})] == [201]
    assert [a.status for a in _saved_call(api, "GET", "/api/queues/%2F/q")] == [200]


def test_a_failed_commit_answers_507_naming_the_change(store, loop):
    api = _stored_api(store)
    real = store.commit_thread.execute

    def full(ops):
        real(ops)
        raise sqlite3.OperationalError("database or disk is full")

    store.commit_thread.execute = full
    answers = _saved_call(api, "PUT", "/api/exchanges/%2F/x", {"type": "direct", "durable": True})
    store.flush()
    loop.run_until(lambda: bool(answers))
    (answer,) = answers
    assert answer.status == 507
    assert answer.body["reason"].startswith("PUT /api/exchanges/%2F/x is in effect but not saved: "
                                            "store write failed: database or disk is full")
