"""How the parent of ``workers: N`` makes one management answer from its workers'."""
from __future__ import annotations

import json

from twisted.web.http_headers import Headers

from gateway.edge.worker_http import combine
from gateway.edge.workers import WorkerPlace

W1, W2 = WorkerPlace(1, "/run/x"), WorkerPlace(2, "/run/x")
JSON = Headers({b"content-type": [b"application/json"]})


def answer(status, value):
    return status, JSON, json.dumps(value).encode()


def test_lists_of_what_each_worker_holds_are_joined_with_each_items_worker():
    status, _, body = combine(b"GET", b"/api/connections?columns=name", [
        (W1, answer(200, [{"name": "a"}])), (W2, answer(200, [{"name": "b"}, {"name": "c"}]))])
    assert status == 200
    assert json.loads(body) == [{"name": "a", "worker": 1}, {"name": "b", "worker": 2},
                                {"name": "c", "worker": 2}]


def test_lists_every_worker_has_alike_come_from_the_first():
    status, _, body = combine(b"GET", b"/api/users", [
        (W1, answer(200, [{"name": "guest"}])), (W2, answer(200, [{"name": "guest"}]))])
    assert (status, json.loads(body)) == (200, [{"name": "guest"}])


def test_run_time_definitions_come_from_the_first_worker():
    # every worker got each change (the relay sends it to all): one copy, as it is
    policy = {"vhost": "/", "name": "cap", "pattern": ".", "definition": {"max-length": 1}}
    status, _, body = combine(b"GET", b"/api/policies", [(W1, answer(200, [policy])),
                                                         (W2, answer(200, [policy]))])
    assert (status, json.loads(body)) == (200, [policy])
    doc = {"users": [], "queues": []}
    status, _, body = combine(b"GET", b"/api/definitions", [(W1, answer(200, doc)),
                                                            (W2, answer(200, doc))])
    assert (status, json.loads(body)) == (200, dict(doc, worker=1))   # an import ignores it


def test_an_object_comes_from_the_first_worker_that_has_it():
    status, _, body = combine(b"GET", b"/api/connections/b", [
        (W1, answer(404, {"error": "not_found"})), (W2, answer(200, {"name": "b"}))])
    assert (status, json.loads(body)) == (200, {"name": "b", "worker": 2})


def test_a_delete_is_answered_by_the_worker_that_held_it_and_404_by_none():
    status, _, _ = combine(b"DELETE", b"/api/connections/b", [
        (W1, answer(404, {"error": "not_found"})), (W2, (204, Headers(), b""))])
    assert status == 204
    status, _, body = combine(b"DELETE", b"/api/connections/z", [
        (W1, answer(404, {"error": "not_found"})), (W2, answer(404, {"error": "not_found"}))])
    assert (status, json.loads(body)) == (404, {"error": "not_found"})


def test_refusals_pass_through_and_no_answer_is_a_502():
    assert combine(b"GET", b"/api/connections", [(W1, answer(401, {"error": "not_authorised"})),
                                                 (W2, answer(401, {"error": "not_authorised"}))])[0] == 401
    status, _, body = combine(b"GET", b"/api/connections", [(W1, None), (W2, None)])
    assert status == 502 and json.loads(body)["reason"] == "no worker answered"
    status, _, body = combine(b"GET", b"/api/connections", [(W1, None), (W2, answer(200, [{"n": 1}]))])
    assert json.loads(body) == [{"n": 1, "worker": 2}]
