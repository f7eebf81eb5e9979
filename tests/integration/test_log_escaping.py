"""Issue 41, item 5: nothing a client sends can write a line of its own into the log.

A raw 0-9-1 socket sends a SASL mechanism name holding ``\\n... CRITICAL ...`` before it
has logged in, then a user name and a vhost name that do the same; a 1.0 client uses a
hostname (the vhost) with a newline and a terminal escape sequence. In text and in JSON format, every line
the gateway writes is its own (a timestamped line, or one JSON object), and each forged
text shows up escaped inside a line of the gateway's."""
from __future__ import annotations

import json
import re

import pytest
from proton import ConnectionException
from proton.utils import BlockingConnection

from gateway.amqp091 import methods as m
from tests.support.amqp091_raw_client import ConnectionEnded, RawClient
from tests.support.gateway_process import default_config, make_gateway

pytestmark = pytest.mark.integration

FORGED = "\n2030-01-01 00:00:00,000 CRITICAL forged"
#: what fits the 40 characters of a mechanism name the gateway logs
SHORT_FORGED = "\nCRITICAL forged"
#: a text line of the gateway's starts with its timestamp
_TEXT_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ ")


@pytest.fixture(params=["text", "json"])
def gw(request):
    g = make_gateway(config_text=default_config(
        extra=f"logging:\n  format: {request.param}\n")).start()
    g.format = request.param
    yield g
    g.stop()


def _until_closed(client: RawClient) -> None:
    try:
        while True:
            frame = client.read_method()
            if isinstance(frame.method, m.ConnectionClose):
                client.send_method(0, m.ConnectionCloseOk())
    except (ConnectionEnded, OSError):
        pass


def _forge_over_amqp091(gw) -> None:
    # the mechanism, before any login (the gateway cuts it at 40 characters)
    with RawClient(gw) as client:
        client.read_method()
        client.send(client.frames.start_ok(mechanism="X" + SHORT_FORGED))
        _until_closed(client)
    # the user name of a refused login
    with RawClient(gw) as client:
        client.read_method()
        client.send(client.frames.start_ok(user="mallory" + FORGED, password="nope"))
        _until_closed(client)
    # the vhost name, after a good login
    with RawClient(gw) as client:
        client.read_method()
        client.send(client.frames.start_ok())
        assert isinstance(client.read_method().method, m.ConnectionTune)
        client.send(client.frames.tune_ok() + client.frames.open(vhost="nowhere" + FORGED))
        _until_closed(client)


def _forge_over_amqp10(gw) -> None:
    # the hostname names a vhost that is not there (and holds a terminal escape)
    with pytest.raises(ConnectionException):
        BlockingConnection(f"amqp://127.0.0.1:{gw.amqp_port}", user="guest", password="guest",
                           virtual_host="vhost:nowhere" + FORGED + "\x1b[2J",
                           allowed_mechs="PLAIN", sasl_enabled=True, allow_insecure_mechs=True,
                           timeout=10)


def test_no_client_string_starts_a_line_of_its_own(gw):
    _forge_over_amqp091(gw)
    _forge_over_amqp10(gw)
    gw.stop()
    lines = [line.rstrip("\n") for line in gw.log_lines]
    if gw.format == "text":
        foreign = [line for line in lines if line and not _TEXT_LINE.match(line)]
        forged = [line for line in lines if "forged" in line]
    else:
        foreign = []
        forged = []
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                foreign.append(line)
                continue
            if "forged" in line:
                forged.append(record["message"])
    assert not foreign, foreign
    # the mechanism, the user and the vhost (over both protocols) were each logged, escaped
    assert len(forged) >= 4, "\n".join(lines[-40:])
    assert all("\\nCRITICAL forged" in text or "\\n2030-01-01" in text for text in forged), forged
    assert not any("\x1b" in line for line in lines)
