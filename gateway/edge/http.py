"""The HTTP side: ``/metrics`` in Prometheus' text format, served by twisted.web."""
from __future__ import annotations

from twisted.web.resource import Resource
from twisted.web.server import Site

from gateway.metrics import CONTENT_TYPE_LATEST, GatewayMetrics

__all__ = ["MetricsResource", "make_site"]


class MetricsResource(Resource):
    isLeaf = True

    def __init__(self, metrics: GatewayMetrics) -> None:
        super().__init__()
        self.metrics = metrics

    def render_GET(self, request) -> bytes:
        request.setHeader(b"Content-Type", CONTENT_TYPE_LATEST.encode())
        return self.metrics.render()


def make_site(metrics: GatewayMetrics, path: str = "/metrics") -> Site:
    root = Resource()
    node = root
    parts = [p for p in path.strip("/").split("/") if p]
    for part in parts[:-1]:
        child = Resource()
        node.putChild(part.encode(), child)
        node = child
    node.putChild((parts[-1] if parts else "metrics").encode(), MetricsResource(metrics))
    site = Site(root)
    site.noisy = False
    return site
