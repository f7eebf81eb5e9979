"""Issue 41, item 8: the management HTTP API answers hostile requests with a status, never
a traceback or a dropped connection: a JSON body nested 5,000 levels is a 400, a 70 KB URL
a 414 and a 100 KB header a 431 (as RabbitMQ answers); a queue name over 255 bytes or
holding NUL is refused as 0-9-1 would refuse it. The listener serves on afterwards and
the log holds no traceback."""
from __future__ import annotations

import json
from urllib.parse import quote

import pytest

from tests.support.amqp091_clients import unique
from tests.support.management_http import call

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def gw(management_gw):
    return management_gw


def _nested(depth: int) -> bytes:
    return b'{"arguments": {"x-deep": ' + b"[" * depth + b"]" * depth + b"}}"


@pytest.mark.parametrize("depth", [5000, 40])
def test_a_deeply_nested_json_body_is_a_400(gw, depth):
    answer = call(gw, "PUT", f"/api/queues/%2F/{unique('deep')}", raw=_nested(depth))
    assert answer.status == 400, answer
    assert "nests deeper than 32 levels" in answer.body["reason"]
    assert "Traceback" not in gw.log


def test_a_body_of_ordinary_depth_is_taken(gw):
    body = json.dumps({"durable": False, "arguments": {"x-args": [[{"a": [1]}]]}}).encode()
    assert call(gw, "PUT", f"/api/queues/%2F/{unique('shallow')}", raw=body).status == 201


def test_a_70_kb_url_is_a_414(gw):
    answer = call(gw, "GET", "/api/queues?name=" + "a" * 70_000)
    assert answer.status == 414
    assert answer.body == {"error": "uri_too_long",
                           "reason": "the request line is longer than 16384 bytes"}


def test_a_100_kb_header_is_a_431(gw):
    answer = call(gw, "GET", "/api/overview", headers={"Authorization": "Basic " + "A" * 100_000})
    assert answer.status == 431
    assert answer.body["error"] == "request_header_fields_too_large"
    many = {f"X-Filler-{i}": "f" * 1000 for i in range(20)}  # each line fits, together they do not
    assert call(gw, "GET", "/api/overview", headers=many).status == 431
    assert call(gw, "GET", "/api/overview").status == 200  # the listener serves on


@pytest.mark.parametrize("name,words", [
    ("q" * 256, "256 bytes long; at most 255"),
    ("é" * 128, "256 bytes long; at most 255"),
    ("nul\0inside", "contains NUL"),
])
def test_a_queue_name_0_9_1_could_not_carry_is_refused(gw, name, words):
    answer = call(gw, "PUT", f"/api/queues/%2F/{quote(name, safe='')}", {"durable": True})
    assert answer.status == 400
    assert words in answer.body["reason"]
    listed = [q["name"] for q in call(gw, "GET", "/api/queues/%2F").body]
    assert name not in listed
    exchange = call(gw, "PUT", f"/api/exchanges/%2F/{quote(name, safe='')}", {"type": "direct"})
    assert exchange.status == 400 and words in exchange.body["reason"]


def test_a_name_of_255_bytes_is_taken(gw):
    name = unique("q") + "x" * (255 - len(unique("q")))
    assert len(name.encode()) == 255
    assert call(gw, "PUT", f"/api/queues/%2F/{name}", {"durable": False}).status == 201
    assert call(gw, "DELETE", f"/api/queues/%2F/{name}").status == 204
    assert "Traceback" not in gw.log
