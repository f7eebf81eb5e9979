"""Issue 41, item 4: a 1.0 client cannot hide from the operator with a malformed ``open``.

``open.properties`` that is not a map, or holds invalid UTF-8 (in a key, a value or deep
inside), and capabilities that are not symbols are refused at ``open`` with
``amqp:invalid-field`` naming the field. A connection whose properties are odd but
readable (string keys, binary and nested values) is listed by ``/api/connections`` with
them. Every list call answers 200 listing every open connection, and the gateway's log
holds no traceback."""
from __future__ import annotations

import socket
from urllib.parse import quote

import pytest
from proton import symbol, uint

from gateway.amqp10.sasl import AMQP_HEADER, SASL_HEADER, SASL_INIT, encode_sasl_frame
from tests.support.amqp10_socket_client import amqp_frame, parse_performatives, read_exactly, read_sasl_frames
from tests.support.management_http import call, management_gateway

pytestmark = pytest.mark.integration

OPEN, CLOSE = 0x10, 0x18
TIMEOUT = 10.0


def _open_fields(container: str, *, offered=None, desired=None, properties=None) -> list:
    return [container, "vhost:/", None, None, None, None, None, offered, desired, properties]


#: (case, open fields, {placeholder: the invalid bytes of the same length}, the field named)
REFUSED = [
    ("properties a list", _open_fields("c-list", properties=["x"]), {}, "open.properties must be a map"),
    ("properties a string", _open_fields("c-str", properties="x"), {}, "open.properties must be a map"),
    ("a value not UTF-8", _open_fields("c-value", properties={symbol("k"): "@VALUE@"}),
     {b"@VALUE@": b"\xff\xfeVALUE"}, "open.properties is not valid UTF-8"),
    ("a key not ASCII", _open_fields("c-key", properties={symbol("@KEY@"): 1}),
     {b"@KEY@": b"\xff\xffKEY"}, "open.properties is not valid ASCII"),
    ("a nested value not UTF-8",
     _open_fields("c-nested", properties={symbol("k"): {symbol("n"): ["@DEEP@"]}}),
     {b"@DEEP@": b"\xc0DEEP@"}, "open.properties is not valid UTF-8"),
    ("offered capabilities an int", _open_fields("c-offered", offered=uint(5)), {},
     "open.offered-capabilities must be a symbol or an array of symbols"),
    ("desired capabilities a string", _open_fields("c-desired", desired="@CAP@"),
     {b"@CAP@": b"\xffCAP@"}, "open.desired-capabilities is not valid UTF-8"),
]


def _connect(gw, fields: list, bad: dict[bytes, bytes]) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", gw.amqp_port), timeout=TIMEOUT)
    sock.sendall(SASL_HEADER + encode_sasl_frame(SASL_INIT, [symbol("PLAIN"), b"\0guest\0guest"]))
    assert read_exactly(sock, 8) == SASL_HEADER
    assert read_sasl_frames(sock, 2)[1][1][0] == 0
    frame = amqp_frame(OPEN, fields)
    for placeholder, replacement in bad.items():
        assert frame.count(placeholder) == 1 and len(placeholder) == len(replacement)
        frame = frame.replace(placeholder, replacement)
    sock.sendall(AMQP_HEADER + frame)
    assert read_exactly(sock, 8) == AMQP_HEADER
    return sock


def _until_eof(sock: socket.socket) -> list[tuple[int, list]]:
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return parse_performatives(received)


def _whole_frames(data: bytes) -> bytes:
    """The frames of ``data`` that arrived whole."""
    end = 0
    while end + 8 <= len(data):
        size = int.from_bytes(data[end:end + 4], "big")
        if size < 8 or end + size > len(data):
            break
        end += size
    return data[:end]


def _until_close_answered(sock: socket.socket) -> list[tuple[int, list]]:
    """Frames up to the gateway's close, which is answered as a client does (our close,
    then the socket), and what follows up to the gateway's EOF."""
    received = b""
    while not any(d == CLOSE for d, _f in parse_performatives(_whole_frames(received))):
        chunk = sock.recv(65536)
        assert chunk, parse_performatives(received)  # EOF before a close
        received += chunk
    sock.sendall(amqp_frame(CLOSE, []))
    sock.shutdown(socket.SHUT_WR)
    return parse_performatives(received) + _until_eof(sock)


@pytest.fixture(scope="module")
def gw():
    gateway = management_gateway().start()
    yield gateway
    gateway.stop()


@pytest.mark.parametrize("case,fields,bad,words", REFUSED, ids=[c[0] for c in REFUSED])
def test_a_malformed_open_is_refused_naming_the_field(gw, case, fields, bad, words):
    with _connect(gw, fields, bad) as sock:
        # answered as a client does: our close, then the socket (the gateway's close linger
        # after a close of its own is test_amqp10_transport's and test_close_handshake's)
        sock.sendall(amqp_frame(CLOSE, []))
        sock.shutdown(socket.SHUT_WR)
        frames = _until_eof(sock)
    closes = [f for d, f in frames if d == CLOSE]
    assert closes and closes[0], frames
    condition, description = closes[0][0].value[0], closes[0][0].value[1]
    assert str(condition) == "amqp:invalid-field"
    assert str(description).startswith(words), description
    listed = call(gw, "GET", "/api/connections")
    assert listed.status == 200
    assert "Traceback" not in gw.log, gw.log[-3000:]


def test_odd_but_readable_properties_are_listed_with_every_other_connection(gw):
    odd = {symbol("product"): "odd-client", "string-key": 1, symbol("blob"): b"\xff\x00",
           symbol("nested"): {symbol("list"): [1, "two", None]}}
    plain = _connect(gw, _open_fields("c-plain", properties={symbol("product"): "plain"}), {})
    weird = _connect(gw, _open_fields("c-odd", properties=odd), {})
    try:
        for sock in (plain, weird):
            sock.settimeout(TIMEOUT)
            assert [d for d, _f in parse_performatives(sock.recv(65536))] == [OPEN]
        listed = call(gw, "GET", "/api/connections")
        assert listed.status == 200
        products = {c["client_properties"].get("product"): c for c in listed.body}
        assert {"plain", "odd-client"} <= set(products)
        shown = products["odd-client"]["client_properties"]
        assert shown["string-key"] == 1 and shown["nested"] == {"list": [1, "two", None]}
        assert isinstance(shown["blob"], str)
        name = products["odd-client"]["name"]
        assert call(gw, "DELETE", "/api/connections/" + quote(name, safe="")).status == 204
        assert any(d == CLOSE for d, _f in _until_close_answered(weird))
    finally:
        plain.close()
        weird.close()
    assert "Traceback" not in gw.log, gw.log[-3000:]
