"""Logs an operator can use (issue 35): with ``logging.format: json`` every line the
gateway writes is one JSON object; each connection, 0-9-1 (pika) and 1.0 (proton), gets an
INFO line when it opens, one when it logs in and one when it closes, all with the same
``connection_id`` and in the same words for both protocols; a refused login names the user
and the peer; a close at shutdown is logged; a /metrics scrape writes nothing at INFO."""
from __future__ import annotations

import json
import time
import urllib.request

import pika
import pytest
from proton import Message

from tests.support.access_config import QUICK_CLOSE, access_config
from tests.support.cross_protocol_clients import pika_connection, proton_connection, unique
from tests.support.gateway_process import Gateway, default_config, make_gateway

pytestmark = pytest.mark.integration


JSON_LOGS = "logging:\n  format: json\n"


@pytest.fixture
def gw():
    g = make_gateway(config_text=default_config(extra=JSON_LOGS)).start()
    yield g
    g.stop()


def records(gw: Gateway, start: int = 0) -> list[dict]:
    """The JSON objects of the log from line ``start`` on (every line must be one)."""
    out = []
    for line in list(gw.log_lines)[start:]:
        out.append(json.loads(line))
    return out


def wait_for(gw: Gateway, start: int, predicate, timeout: float = 10.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        got = [r for r in records(gw, start) if predicate(r)]
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


def story(gw: Gateway, start: int, protocol: str) -> dict[str, dict]:
    """The opened, authenticated and closed records of the one ``protocol`` connection
    opened since line ``start``."""
    [opened] = wait_for(gw, start, lambda r: r.get("event") == "connection.opened"
                        and r["protocol"] == protocol)
    cid = opened["connection_id"]
    [closed] = wait_for(gw, start, lambda r: r.get("event") == "connection.closed"
                        and r["connection_id"] == cid)
    events = {r["event"]: r for r in records(gw, start)
              if r.get("connection_id") == cid and "event" in r}
    assert events["connection.closed"] == closed
    return events


def check_story(events: dict[str, dict], protocol: str, messages_in: int, messages_out: int) -> None:
    opened, login, closed = (events["connection.opened"], events["connection.authenticated"],
                             events["connection.closed"])
    assert opened["level"] == login["level"] == closed["level"] == "INFO"
    assert opened["peer"].startswith("127.0.0.1:") and opened["listener"].startswith("127.0.0.1:")
    assert opened["tls_version"] is None and opened["protocol"] == protocol
    assert (login["user"], login["vhost"], login["mechanism"]) == ("guest", "/", "PLAIN")
    assert login["message"] == (f"connection authenticated: user 'guest', vhost '/', mechanism "
                                f"PLAIN ({protocol}, {opened['peer']})")
    assert closed["closed_by"] == "client" and closed["peer"] == opened["peer"]
    assert (closed["messages_in"], closed["messages_out"]) == (messages_in, messages_out)
    assert closed["duration_s"] >= 0 and closed["user"] == "guest"


def test_a_0_9_1_connection_opens_logs_in_and_closes_in_three_json_lines(gw) -> None:
    start = len(gw.log_lines)
    q = unique("logs")
    conn = pika_connection(gw)
    ch = conn.channel()
    ch.queue_declare(q)
    for i in range(3):
        ch.basic_publish("", q, b"m%d" % i)
    got = 0
    while got < 2:
        method, _, _ = ch.basic_get(q, auto_ack=True)
        got += method is not None
    conn.close()
    events = story(gw, start, "AMQP 0-9-1")
    check_story(events, "AMQP 0-9-1", 3, 2)
    closed = events["connection.closed"]
    assert closed["code"] == 200 and closed["reason"] == "Normal shutdown"
    assert closed["message"].startswith("connection closed by client: 200 Normal shutdown; ")


def test_a_1_0_connection_says_the_same_things(gw) -> None:
    start = len(gw.log_lines)
    q = unique("logs")
    conn = proton_connection(gw)
    sender = conn.create_sender(f"/queue/{q}")
    for i in range(2):
        sender.send(Message(body=f"m{i}"))
    receiver = conn.create_receiver(f"/queue/{q}", credit=1)
    receiver.receive(timeout=10)
    receiver.accept()
    conn.close()
    events = story(gw, start, "AMQP 1.0")
    check_story(events, "AMQP 1.0", 2, 1)
    assert events["connection.closed"]["message"].startswith("connection closed by client: ")


def test_a_refused_login_names_user_and_peer_with_the_connection_id(gw) -> None:
    start = len(gw.log_lines)
    params = pika.ConnectionParameters("127.0.0.1", gw.amqp_port,
                                       credentials=pika.PlainCredentials("mallory", "wrong"),
                                       connection_attempts=1, socket_timeout=10)
    with pytest.raises(pika.exceptions.AMQPError):
        pika.BlockingConnection(params)
    [refused] = wait_for(gw, start, lambda r: r["message"].startswith("login refused"))
    assert refused["level"] == "WARNING" and "'mallory'" in refused["message"]
    [opened] = [r for r in records(gw, start) if r.get("event") == "connection.opened"]
    assert refused["connection_id"] == opened["connection_id"]
    assert opened["peer"] in refused["message"]
    [closed] = wait_for(gw, start, lambda r: r.get("event") == "connection.closed")
    assert closed["connection_id"] == opened["connection_id"]
    assert closed["closed_by"] == "server" and closed["code"] == 403 and closed["user"] is None


def test_connections_open_at_shutdown_are_logged_as_closed_by_it(fresh_gateway) -> None:
    # the clients read nothing meanwhile: the gateway's close is not answered
    gw = fresh_gateway(config_text=access_config(limits=QUICK_CLOSE, extra=JSON_LOGS))
    start = len(gw.log_lines)
    c091 = pika_connection(gw)
    c10 = proton_connection(gw)
    c10.create_sender(f"/queue/{unique('logs')}")
    wait_for(gw, start, lambda r: r.get("event") == "connection.authenticated"
             and r["protocol"] == "AMQP 1.0")
    gw.stop()
    closed = [r for r in records(gw, start) if r.get("event") == "connection.closed"]
    assert sorted(r["protocol"] for r in closed) == ["AMQP 0-9-1", "AMQP 1.0"]
    for r in closed:
        assert r["closed_by"] == "shutdown" and r["reason"] == "shutdown", r
    for c in (c091, c10):
        try:
            c.close()
        except Exception:  # noqa: BLE001 - the gateway is gone
            pass


def test_a_metrics_scrape_writes_no_info_line(gw) -> None:
    urllib.request.urlopen(f"http://127.0.0.1:{gw.metrics_port}{gw.metrics_path}", timeout=10).read()
    start = len(gw.log_lines)
    for _ in range(3):
        urllib.request.urlopen(f"http://127.0.0.1:{gw.metrics_port}{gw.metrics_path}", timeout=10).read()
    # a line the gateway writes after the scrapes' (a connection's): once it is in the
    # log, so is anything the scrapes wrote
    conn = pika_connection(gw)
    conn.close()
    [closed] = wait_for(gw, start, lambda r: r.get("event") == "connection.closed")
    later = records(gw, start)
    assert [r for r in later[:later.index(closed)] if r["level"] == "INFO"
            and r.get("connection_id") != closed["connection_id"]] == []


def test_json_times_are_iso_8601_utc_and_twisted_factory_lines_are_debug(tmp_path) -> None:
    """Issue 46: ``time`` was local time without a zone; every outbound connection attempt
    (here: a forwarding remote nothing listens for) logged Twisted's "Starting factory"
    and "Stopping factory" at INFO."""
    from datetime import datetime, timedelta, timezone

    from tests.support.gateway_process import free_port

    password = tmp_path / "pw"
    password.write_text("x\n")
    remote = (f"forwarding:\n  remotes:\n    - container: nobody\n      host: 127.0.0.1\n"
              f"      port: {free_port()}\n      password_file: {password}\n"
              "      reconnect_initial: 0.1\n      reconnect_max: 0.2\n")
    g = make_gateway(config_text=default_config(extra="logging:\n  format: json\n" + remote)).start()
    try:
        assert g.wait_for_log_count("forwarding to 'nobody'.*reconnecting", 3)
        lines = records(g)
    finally:
        g.stop()
    now = datetime.now(timezone.utc)
    for line in lines:
        when = datetime.fromisoformat(line["time"])
        assert line["time"].endswith("+00:00") and "T" in line["time"], line
        assert when.utcoffset() == timedelta(0) and abs(now - when) < timedelta(minutes=5)
    assert not [r for r in lines if r["message"].startswith(("Starting factory", "Stopping factory"))]
