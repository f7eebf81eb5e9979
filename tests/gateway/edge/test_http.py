"""``BoundedHTTPChannel``: an over-long request head is answered 414 or 431, then the rest of
the request is dropped (issue 41, item 8). Driven over a StringTransport and a memory
reactor clock."""
from __future__ import annotations

import json

from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.web.resource import Resource

from gateway.edge.http import DISCARD_SECONDS, MAX_HEAD_BYTES, QuietSite


class _HalfClosable(StringTransport):
    write_closed = False

    def loseWriteConnection(self) -> None:  # noqa: N802 - Twisted API
        self.write_closed = True


class _Ok(Resource):
    isLeaf = True

    def render_GET(self, request) -> bytes:  # noqa: N802 - Twisted API
        return b"ok"


def _channel():
    reactor = MemoryReactorClock()
    site = QuietSite(_Ok(), reactor=reactor)
    channel = site.buildProtocol(None)
    transport = _HalfClosable()
    channel.makeConnection(transport)
    return channel, transport, reactor


def _status_and_body(transport: StringTransport) -> tuple[str, dict]:
    head, _, body = transport.value().partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0].decode(), json.loads(body)


def test_a_request_line_over_the_limit_is_a_414_and_the_rest_is_dropped():
    channel, transport, reactor = _channel()
    channel.dataReceived(b"GET /api/queues?name=" + b"a" * (MAX_HEAD_BYTES + 10))
    status, body = _status_and_body(transport)
    assert status == "HTTP/1.1 414 URI Too Long"
    assert body == {"error": "uri_too_long",
                    "reason": f"the request line is longer than {MAX_HEAD_BYTES} bytes"}
    assert transport.write_closed and not transport.disconnecting
    written = transport.value()
    channel.dataReceived(b"a" * 100_000 + b" HTTP/1.1\r\n\r\n")  # read and dropped
    assert transport.value() == written
    reactor.advance(DISCARD_SECONDS)
    assert transport.disconnecting


def test_one_long_header_and_many_headers_are_a_431():
    for head in (b"Authorization: Basic " + b"A" * (MAX_HEAD_BYTES + 1) + b"\r\n",
                 b"".join(b"X-Filler-%d: %s\r\n" % (i, b"f" * 1000) for i in range(20))):
        channel, transport, _reactor = _channel()
        channel.dataReceived(b"GET /api/overview HTTP/1.1\r\nHost: x\r\n" + head + b"\r\n")
        status, body = _status_and_body(transport)
        assert status == "HTTP/1.1 431 Request Header Fields Too Large"
        assert body["error"] == "request_header_fields_too_large"


def test_an_ordinary_request_is_served():
    channel, transport, _reactor = _channel()
    channel.dataReceived(b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
    assert transport.value().startswith(b"HTTP/1.1 200") and transport.value().endswith(b"ok")
