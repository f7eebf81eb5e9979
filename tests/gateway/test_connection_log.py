"""RateLimitedLog and the handshake-timeout wording, with explicit ``now``."""
from __future__ import annotations

import logging

import pytest

from gateway.connection_log import (
    HANDSHAKE_TIMEOUT_KIND,
    HandshakeTimeout,
    RateLimitedLog,
    log_handshake_timeout,
    peer_name,
)

log = logging.getLogger("tests.connection_log")


@pytest.fixture
def lines(caplog):
    caplog.set_level(logging.DEBUG, logger="tests.connection_log")
    return lambda: [r.getMessage() for r in caplog.records]


def test_one_line_per_interval_per_kind_the_rest_counted(lines):
    limit = RateLimitedLog(interval=10.0)
    assert limit.warning(log, "a", 0.0, "first %d", 1)
    assert not limit.warning(log, "a", 5.0, "second %d", 2, tally="x")
    assert not limit.warning(log, "a", 9.9, "third %d", 3, tally="y")
    assert limit.warning(log, "b", 9.9, "other kind")      # kinds are limited apart
    assert limit.left_out("a") == 2
    assert limit.warning(log, "a", 10.0, "fourth %d", 4)
    assert limit.left_out("a") == 0
    assert lines() == ["first 1", "other kind",
                       "fourth 4 (2 more in the last 10s not logged: 1 x, 1 y)"]


def test_the_summary_names_an_interval_below_a_second_as_it_is(lines):
    limit = RateLimitedLog(interval=0.5)
    limit.warning(log, "a", 0.0, "first")
    limit.warning(log, "a", 0.2, "again")
    limit.flush(0.5)
    assert lines() == ["first", "a: 1 more in the last 0.5s not logged: 1 a"]


def test_flush_reports_a_burst_that_stopped(lines):
    limit = RateLimitedLog(interval=10.0)
    limit.warning(log, "a", 0.0, "first")
    for _ in range(3):
        limit.warning(log, "a", 1.0, "again", tally="p")
    limit.flush(9.0)                       # the interval is not over: nothing yet
    assert lines() == ["first"]
    limit.flush(10.0)
    limit.flush(30.0)                      # reported once
    assert lines() == ["first", "a: 3 more in the last 10s not logged: 3 p"]
    assert not limit.warning(log, "a", 15.0, "within the summary's interval")
    assert limit.warning(log, "a", 20.0, "after it")


def test_lines_keep_their_level_and_logger(caplog):
    caplog.set_level(logging.DEBUG)
    limit = RateLimitedLog()
    limit.log(log, logging.INFO, "k", 0.0, "info line")
    assert [(r.name, r.levelno) for r in caplog.records] == [("tests.connection_log", logging.INFO)]


def test_interval_must_be_positive():
    with pytest.raises(ValueError):
        RateLimitedLog(interval=0)


@pytest.mark.parametrize("host,port,name", [
    ("10.0.0.1", 5672, "10.0.0.1:5672"), ("::1", 5672, "[::1]:5672"), ("10.0.0.1", 0, "10.0.0.1"),
    ("", 0, "?"),
])
def test_peer_name(host, port, name):
    assert peer_name(host, port) == name


def test_handshake_timeout_wording(lines):
    limit = RateLimitedLog()
    log_handshake_timeout(limit, log, HandshakeTimeout("1.0 SASL init", 10.0), "10.0.0.1:4000", 0.0)
    log_handshake_timeout(limit, log, HandshakeTimeout("protocol header", 10.0), "10.0.0.1:4001", 1.0)
    limit.flush(10.0)
    assert lines() == [
        "handshake timeout: 10.0.0.1:4000 stalled in phase '1.0 SASL init' for 10.0s; closed",
        f"{HANDSHAKE_TIMEOUT_KIND}: 1 more in the last 10s not logged: 1 protocol header",
    ]


# -- the lines about one connection -------------------------------------------------------

from gateway.connection_log import (CONNECTION_ID, ConnectionLogger,  # noqa: E402
                                    ConnectionTrail, TextFormatter)


@pytest.fixture
def trail_records(caplog):
    caplog.set_level(logging.INFO, logger="gateway.connection_log")
    return lambda: [r for r in caplog.records if r.name == "gateway.connection_log"]


def _trail() -> ConnectionTrail:
    return ConnectionTrail(7, peer="127.0.0.1:50432", listener="127.0.0.1:5672",
                           protocol="AMQP 1.0", opened_at=100.0, tls_version="TLSv1.3",
                           sni="gw.example.org")


def test_the_trail_tells_open_login_and_close_with_its_id(trail_records):
    trail = _trail()
    trail.opened()
    trail.authenticated("app", "/", "PLAIN")
    trail.messages_in, trail.messages_out = 10, 5
    trail.closing("client", "amqp:connection:forced", "bye")
    trail.closing("server", 320, "later words do not replace the first")
    trail.closed(103.25)
    trail.closed(104.0)  # once only
    opened, login, closed = trail_records()
    assert [getattr(r, CONNECTION_ID) for r in (opened, login, closed)] == [7, 7, 7]
    assert opened.getMessage() == ("connection opened: 127.0.0.1:50432 on listener 127.0.0.1:5672, "
                                   "AMQP 1.0, TLS TLSv1.3, SNI gw.example.org")
    assert login.getMessage() == ("connection authenticated: user 'app', vhost '/', mechanism PLAIN "
                                  "(AMQP 1.0, 127.0.0.1:50432)")
    assert closed.getMessage() == ("connection closed by client: amqp:connection:forced bye; "
                                   "127.0.0.1:50432, user 'app', open 3.2s, messages in 10, out 5")
    assert (closed.closed_by, closed.duration_s, closed.messages_in) == ("client", 3.25, 10)


def test_a_connection_nobody_closed_was_lost(trail_records):
    trail = _trail()
    trail.closed(101.0)
    [closed] = trail_records()
    assert closed.closed_by == "peer lost" and closed.reason == "connection lost"


def test_text_lines_about_a_connection_start_with_its_id():
    formatter = TextFormatter()
    about = logging.LogRecord("x", logging.INFO, __file__, 1, "hello %s", ("you",), None)
    setattr(about, CONNECTION_ID, 7)
    plain = logging.LogRecord("x", logging.INFO, __file__, 1, "plain", (), None)
    assert formatter.format(about).endswith(" INFO x: [#7] hello you")
    assert formatter.format(plain).endswith(" INFO x: plain")


def test_a_connection_logger_adds_the_id_and_keeps_the_call_s_extra(caplog):
    caplog.set_level(logging.INFO, logger="tests.connection_log")
    ConnectionLogger(log, 9).info("x", extra={"event": "e"})
    [record] = [r for r in caplog.records if r.name == "tests.connection_log"]
    assert (getattr(record, CONNECTION_ID), record.event) == (9, "e")


# ------------------------------------------------------------------ escaping (issue 41, item 5)

@pytest.mark.parametrize("text,shown", [
    ("plain text", "plain text"),
    ("a\nb\rc\td", "a\\nb\\rc\\td"),
    ("bell\x07 del\x7f c1\x85", "bell\\x07 del\\x7f c1\\x85"),
    ("esc\x1b[31mred", "esc\\x1b[31mred"),
    ("sep\u2028par\u2029", "sep\\u2028par\\u2029"),
    (b"bad \xff\xfe utf-8".decode("utf-8", "surrogateescape"), "bad \\xff\\xfe utf-8"),
    ("ünïcode stays", "ünïcode stays"),
])
def test_escape_for_log_keeps_a_message_on_one_line(text, shown):
    from gateway.connection_log import escape_for_log
    assert escape_for_log(text) == shown


def _formatted(formatter: logging.Formatter, *args: object) -> str:
    record = logging.LogRecord("gateway.test", logging.WARNING, __file__, 1,
                               "mechanism %s offered by %s", args, None)
    return formatter.format(record)


def test_text_and_json_formats_escape_the_message_alike():
    import json

    from gateway.connection_log import TextFormatter, json_formatter
    forged = "X\n2030-01-01 00:00:00,000 CRITICAL forged"
    text = _formatted(TextFormatter(), forged, "peer\x1b[2J")
    assert "\n" not in text and "\x1b" not in text
    assert text.endswith("mechanism X\\n2030-01-01 00:00:00,000 CRITICAL forged offered by peer\\x1b[2J")
    line = _formatted(json_formatter(), forged, "peer\x1b[2J")
    assert "\n" not in line
    assert json.loads(line)["message"] == ("mechanism X\\n2030-01-01 00:00:00,000 CRITICAL forged "
                                           "offered by peer\\x1b[2J")
