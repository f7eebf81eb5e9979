"""Issue 41, item 1: a client's name pattern (``?name=...&use_regex=true``) cannot stall
the gateway. A user with only the ``management`` tag sends the issue's catastrophic
pattern while a pika client keeps publishing and getting over 0-9-1: each round trip
is answered within its deadline, and so is the HTTP request. Patterns RE2 does not take,
and over-long ones, are a 400 naming the problem."""
from __future__ import annotations

import threading
from urllib.parse import quote

import pytest

from tests.support.amqp091_clients import pika_connection, unique
from tests.support.gateway_process import GatewayProcess, default_config
from tests.support.management_http import call

pytestmark = [pytest.mark.integration, pytest.mark.process]

#: name -> (password, loopback_only, tags); ``call`` reads the passwords from here
USERS = {"guest": ("guest", True, ("administrator",)), "keeper": ("keep", False, ("management",))}
DEADLINE = 10.0
CATASTROPHIC = "(.|.)*X"  # 2**len(name) steps for a backtracking engine


@pytest.fixture(scope="module")
def gw():  # a process: a stalled reactor is killed, not waited for
    gateway = GatewayProcess(config_text=default_config(users=USERS),
                             extra_args=("--management", "127.0.0.1:0")).start()
    yield gateway
    gateway.kill()  # a stalled reactor would not answer SIGTERM


def _as_keeper(gw, path: str):
    return call(gw, "GET", path, user="keeper", password=USERS["keeper"][0])


def _round_trip(conn, queue: str, body: bytes) -> bool:
    channel = conn.channel()
    channel.basic_publish("", queue, body)
    for _ in range(200):
        method, _props, got = channel.basic_get(queue, auto_ack=True)
        if method is not None:
            channel.close()
            return got == body
    return False


def test_the_catastrophic_pattern_neither_stalls_amqp_nor_the_request(gw):
    victim = "a" * 60  # a queue name the pattern must be tried against
    assert call(gw, "PUT", f"/api/queues/%2F/{victim}", {"durable": False}, user="guest").status in (201, 204)
    queue = unique("regex-rt")
    conn = pika_connection(gw)
    try:
        conn.channel().queue_declare(queue)
        answers: list = []
        request = threading.Thread(target=lambda: answers.append(_as_keeper(
            gw, f"/api/queues?name={quote(CATASTROPHIC)}&use_regex=true")), daemon=True)
        request.start()
        for n in range(3):  # the request is under way from here on
            result: list[bool] = []
            trip = threading.Thread(target=lambda: result.append(_round_trip(conn, queue, b"m%d" % n)),
                                    daemon=True)
            trip.start()
            trip.join(DEADLINE)
            assert result == [True], f"round trip {n} not answered within {DEADLINE}s"
        request.join(DEADLINE)
        assert answers, f"the request was not answered within {DEADLINE}s"
        assert answers[0].status == 200 and answers[0].body == []
    finally:
        if conn.is_open:
            conn.close()


def test_a_pattern_that_matches_lists_the_queue(gw):
    name = unique("regex-match")
    assert call(gw, "PUT", f"/api/queues/%2F/{name}", {"durable": False}, user="guest").status == 201
    answer = _as_keeper(gw, f"/api/queues?name={quote('^regex-m(a|b)tch-[0-9a-f]+$')}&use_regex=true")
    assert answer.status == 200
    assert name in [q["name"] for q in answer.body]


@pytest.mark.parametrize("pattern,words", [
    (r"(a)\1", "invalid escape sequence"),
    ("(?<=a)b", "invalid perl operator"),
    ("a" * 1001, "at most 1000 are taken"),
])
def test_a_pattern_the_engine_does_not_take_is_a_400_naming_the_problem(gw, pattern, words):
    answer = _as_keeper(gw, f"/api/queues?name={quote(pattern)}&use_regex=true")
    assert answer.status == 400
    assert answer.body["error"] == "bad_request"
    assert words in answer.body["reason"]
