"""The HTTP side: ``/metrics`` in Prometheus' text format, served by twisted.web."""
from __future__ import annotations

import logging

from twisted.web.resource import Resource
from twisted.web.server import Site

from gateway.metrics import CONTENT_TYPE_LATEST, GatewayMetrics

__all__ = ["MetricsResource", "QuietSite", "make_site", "make_site_with"]

log = logging.getLogger(__name__)


class QuietSite(Site):
    """A twisted.web site whose access log is at DEBUG: a scrape every few seconds, or
    the dashboard's refresh, is no news to an operator (Twisted writes each at INFO)."""

    noisy = False

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
