"""Handshake timeouts in every phase, over real sockets against a real gateway process.

A peer that stalls is closed at the deadline of its phase, and the timeout is logged in
one wording (``handshake timeout: HOST:PORT stalled in phase '...' for N s; closed``),
rate-limited: at most one such line per ``logging.summary_interval`` (1 s here, 10 s by
default), the others counted by phase in the next line (or in the summary the gateway
writes once the interval is over).
"""
from __future__ import annotations

import re
import socket

import pytest
from proton import symbol

from gateway.amqp10.sasl import AMQP_HEADER, SASL_HEADER, SASL_INIT, encode_sasl_frame
from gateway.protocol_header import AMQP091_HEADER
from tests.support.access_config import access_config

pytestmark = pytest.mark.integration

DEADLINE = 1.0
#: ``logging.summary_interval``: every stall here times out within it (they all start
#: within milliseconds and share one deadline)
SUMMARY_INTERVAL = 1
#: the gateway must have closed a stalled socket within this (deadline 1 s)
CLOSED_WITHIN = 15.0
LINE = re.compile(r"handshake timeout: 127\.0\.0\.1:(\d+) stalled in phase '([^']+)' for 1\.0s; closed")
SUMMARY = re.compile(rf"handshake-timeout: (\d+) more in the last {SUMMARY_INTERVAL}s not logged: (.*)$", re.M)

#: what each stalled client sends, and the phase the gateway names
STALLS = {
    "protocol header": b"",
    "0-9-1 start-ok": AMQP091_HEADER,
    "1.0 SASL init": SASL_HEADER,
    "1.0 open": SASL_HEADER + encode_sasl_frame(SASL_INIT, [symbol("PLAIN"), b"\0guest\0guest"])
    + AMQP_HEADER,
}


@pytest.fixture
def gw(fresh_gateway):
    return fresh_gateway(config_text=access_config(
        sniff_timeout=DEADLINE, limits={"handshake_timeout": DEADLINE},
        extra=f"logging:\n  summary_interval: {SUMMARY_INTERVAL}\n"))


def _stall(gw, data: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", gw.amqp_port), timeout=CLOSED_WITHIN)
    if data:
        sock.sendall(data)
    return sock


def _closed_by_gateway(sock: socket.socket) -> bool:
    """Read until the gateway closes; False if it kept the socket open."""
    try:
        while sock.recv(65536):
            pass
    except socket.timeout:
        return False
    except ConnectionResetError:
        pass
    return True


def _summary(gw) -> dict[str, int]:
    match = SUMMARY.search(gw.log)
    assert match, gw.log
    counts = {}
    for part in match.group(2).split(", "):
        n, phase = part.split(" ", 1)
        counts[phase] = int(n)
    assert sum(counts.values()) == int(match.group(1))
    return counts


def test_every_phase_times_out_and_is_logged_in_one_wording(gw):
    socks = {phase: _stall(gw, data) for phase, data in STALLS.items()}
    ports = {sock.getsockname()[1]: phase for phase, sock in socks.items()}
    for phase, sock in socks.items():
        assert _closed_by_gateway(sock), f"stalled in {phase!r}: not closed"
        sock.close()
    assert gw.wait_for_log(LINE.pattern)
    (port, phase), = [(int(p), ph) for p, ph in LINE.findall(gw.log)]   # one line: rate-limited
    assert ports[port] == phase
    assert gw.wait_for_log(SUMMARY.pattern, timeout=15)
    others = set(STALLS) - {phase}
    assert _summary(gw) == {name: 1 for name in others}


def test_a_burst_of_stalled_clients_writes_one_line_and_a_count(gw):
    socks = [_stall(gw, AMQP091_HEADER if i % 2 else b"") for i in range(30)]
    for sock in socks:
        assert _closed_by_gateway(sock)
        sock.close()
    assert gw.wait_for_log(SUMMARY.pattern, timeout=15)
    assert len(LINE.findall(gw.log)) == 1
    counts = _summary(gw)
    assert sum(counts.values()) == 29
    assert set(counts) <= {"protocol header", "0-9-1 start-ok"}
