"""The HTTP side: ``/metrics`` in Prometheus' text format, served by twisted.web; and the
one channel every HTTP listener uses (``BoundedHTTPChannel``)."""
from __future__ import annotations

import json
import logging

from twisted.web.http import HTTPChannel
from twisted.web.resource import Resource
from twisted.web.server import Site

from gateway.management.http_errors import ERROR_KINDS
from gateway.metrics import CONTENT_TYPE_LATEST, GatewayMetrics

__all__ = ["BoundedHTTPChannel", "MAX_HEAD_BYTES", "MetricsResource", "QuietSite", "make_site",
           "make_site_with"]

log = logging.getLogger(__name__)


#: bytes of a request line, of one header line, and of all of them together
MAX_HEAD_BYTES = 16384
_REASONS = {414: "URI Too Long", 431: "Request Header Fields Too Large"}
#: how long the rest of a refused request is read and dropped before the socket closes
DISCARD_SECONDS = 10.0


class BoundedHTTPChannel(HTTPChannel):
    """twisted.web's channel, answering an over-long request head as RabbitMQ does: a
    request line over ``MAX_HEAD_BYTES`` gets 414, a header line or all of them together
    431 (Twisted drops the first two with no answer at all and says 400 to the third).
    The rest of the request is then read and thrown away until the client closes (for at
    most ``DISCARD_SECONDS``), so the client is not reset before it reads the answer.
    """

    MAX_LENGTH = MAX_HEAD_BYTES
    #: Twisted's own count stays above ours, so ours answers first
    totalHeadersSize = 4 * MAX_HEAD_BYTES

    def __init__(self) -> None:
        super().__init__()
        self._head_lines = 0
        self._head_bytes = 0
        self._refused = False

    def dataReceived(self, data: bytes) -> None:  # noqa: N802 - Twisted API
        if not self._refused:
            super().dataReceived(data)

    def lineReceived(self, line: bytes) -> None:  # noqa: N802 - Twisted API
        self._head_lines += 1
        self._head_bytes += len(line)
        if self._head_bytes > MAX_HEAD_BYTES:
            self._refuse(414 if self._head_lines == 1 else 431)
            return
        super().lineReceived(line)

    def allHeadersReceived(self) -> None:  # noqa: N802 - Twisted API
        self._head_lines = self._head_bytes = 0
        super().allHeadersReceived()

    def lineLengthExceeded(self, line: bytes) -> None:  # noqa: N802 - Twisted API
        self._refuse(414 if self._head_lines == 0 else 431)

    def _refuse(self, status: int) -> None:
        if self._refused:
            return
        self._refused = True
        what = "request line" if status == 414 else "request headers"
        body = json.dumps({"error": ERROR_KINDS[status],
                           "reason": f"the {what} are longer than {MAX_HEAD_BYTES} bytes"
                           if status == 431 else
                           f"the {what} is longer than {MAX_HEAD_BYTES} bytes"}).encode()
        self.transport.write(
            f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
        # half-close: the answer goes out, what the client still sends is read and dropped
        # for at most DISCARD_SECONDS more
        lose_write = getattr(self.transport, "loseWriteConnection", None)
        if lose_write is not None:
            lose_write()
            self.setTimeout(DISCARD_SECONDS)
        else:
            self.transport.loseConnection()


class QuietSite(Site):
    """A twisted.web site whose access log is at DEBUG: a scrape every few seconds, or
    the dashboard's refresh, is no news to an operator (Twisted writes each at INFO).
    Its channels are ``BoundedHTTPChannel``s."""

    noisy = False
    protocol = BoundedHTTPChannel

    def log(self, request) -> None:
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%s %s %s from %s", request.method.decode("ascii", "replace"),
                      request.uri.decode("ascii", "replace"), request.code,
                      getattr(request.getClientAddress(), "host", "?"))


class MetricsResource(Resource):
    isLeaf = True

    def __init__(self, metrics: GatewayMetrics) -> None:
        super().__init__()
        self.metrics = metrics

    def render_GET(self, request) -> bytes:
        request.setHeader(b"Content-Type", CONTENT_TYPE_LATEST.encode())
        return self.metrics.render()


def make_site(metrics: GatewayMetrics, path: str = "/metrics") -> Site:
    return make_site_with(path, MetricsResource(metrics))


def make_site_with(path: str, page: Resource) -> Site:
    """A site serving ``page`` at ``path`` (``/metrics``, or a configured nested path)."""
    root = Resource()
    node = root
    parts = [p for p in path.strip("/").split("/") if p]
    for part in parts[:-1]:
        child = Resource()
        node.putChild(part.encode(), child)
        node = child
    node.putChild((parts[-1] if parts else "metrics").encode(), page)
    return QuietSite(root)
