"""The parent's HTTP under ``workers: N``: metrics and the management API of all workers
on the configured ports, read from each worker's unix sockets (``edge.workers``).

Why the parent serves them: the workers share the AMQP ports, and HTTP ports shared the
same way would answer each request from a random worker: a scrape would show one
worker's counters, a connection listing a third of the connections.

- ``/metrics``: every worker's samples with a ``worker`` label, and the supervisor's
  own (``metrics.SupervisorMetrics``); a worker that does not answer within
  ``WORKER_TIMEOUT`` shows as ``amqp_gateway_worker_up{worker="N"} 0``.
- the management API: each request goes to every running worker, with the client's
  address in ``X-Forwarded-For`` (``management_http.client_host``; each worker
  authenticates it as usual). A ``GET`` that every worker answers with a JSON list
  of what each worker holds for itself (connections, channels, consumers, links,
  nodes...) is answered with the lists joined, each item marked with its ``worker``;
  lists that every worker has alike (``SHARED``: users, vhosts, permissions, policies,
  vhost limits, parameters, definitions, health checks: from the config, or changed at
  run time through this relay, which sends each change to every worker) come from the
  first worker. Anything else gets the first answer, in
  worker order, that is not 404 (an object gets its ``worker``), so ``DELETE
  /api/connections/NAME`` reaches the worker holding the connection.
"""
from __future__ import annotations

import json
import logging
from io import BytesIO
from typing import Any, Callable, Optional, Sequence

from twisted.internet import defer
from twisted.internet.endpoints import UNIXClientEndpoint
from twisted.web.client import Agent, FileBodyProducer, readBody
from twisted.web.http_headers import Headers
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Site

from gateway.edge.http import QuietSite, make_site_with
from gateway.edge.management_http import client_host
from gateway.edge.workers import WorkerPlace
from gateway.metrics import CONTENT_TYPE_LATEST, WORKER_LABEL, SupervisorMetrics

log = logging.getLogger(__name__)

__all__ = ["WorkerHttp", "make_metrics_site", "make_management_relay", "combine", "SHARED",
           "WORKER_TIMEOUT"]

#: seconds a worker has to answer the parent
WORKER_TIMEOUT = 5.0
#: request headers relayed to the workers
_RELAYED = (b"authorization", b"content-type", b"x-reason", b"accept")
#: ``/api/NAME`` lists every worker has alike: answered by the first worker, not joined
SHARED = frozenset({"users", "vhosts", "permissions", "whoami", "overview", "policies",
                    "vhost-limits", "parameters", "definitions", "health"})
#: answer headers relayed back to the client
_ANSWERED = (b"content-type", b"www-authenticate", b"retry-after", b"cache-control", b"location")


class _WorkerSockets:
    """``http://worker-N.SERVES/...`` -> the worker's unix socket."""

    def __init__(self, reactor, directory: str) -> None:
        self.reactor = reactor
        self.directory = directory

    def endpointForURI(self, uri):  # noqa: N802 - Twisted API
        number, _, serves = uri.host.decode("ascii").partition(".")
        place = WorkerPlace(int(number.removeprefix("worker-")), self.directory)
        return UNIXClientEndpoint(self.reactor, place.socket_path(serves), timeout=WORKER_TIMEOUT)


class WorkerHttp:
    """HTTP requests to the workers' unix sockets."""

    def __init__(self, reactor, directory: str) -> None:
        self.reactor = reactor
        self.agent = Agent.usingEndpointFactory(reactor, _WorkerSockets(reactor, directory))

    def request(self, place: WorkerPlace, serves: str, method: bytes, path: bytes,
                headers: Optional[Headers] = None, body: bytes = b"") -> defer.Deferred:
        """Fires with ``(status, headers, body)``; fails if the worker does not answer."""
        uri = b"http://%s.%s%s" % (place.name.encode(), serves.encode(), path)
        producer = FileBodyProducer(BytesIO(body)) if body else None
        d = self.agent.request(method, uri, headers, producer)
        d.addCallback(lambda response: readBody(response).addCallback(
            lambda data: (response.code, response.headers, data)))
        return d.addTimeout(WORKER_TIMEOUT, self.reactor)

    def ask_all(self, places: Sequence[WorkerPlace], serves: str, method: bytes, path: bytes,
                headers: Optional[Headers] = None, body: bytes = b"") -> defer.Deferred:
        """Fires with ``[(place, answer or None)]`` once every worker answered or failed."""
        def one(place):
            d = self.request(place, serves, method, path, headers, body)
            d.addCallbacks(lambda answer: (place, answer), lambda failure: _no_answer(place, failure))
            return d
        return defer.gatherResults([one(p) for p in places])


def _no_answer(place: WorkerPlace, failure) -> tuple[WorkerPlace, None]:
    log.warning("%s did not answer the supervisor: %s", place.name, failure.getErrorMessage())
    return place, None


class _MetricsResource(Resource):
    isLeaf = True

    def __init__(self, http: WorkerHttp, metrics: SupervisorMetrics, places: Callable[[], Sequence[WorkerPlace]],
                 all_places: Sequence[WorkerPlace], restarts: Callable[[], dict[int, int]], path: bytes) -> None:
        super().__init__()
        self.http, self.metrics, self.places = http, metrics, places
        self.all_places, self.restarts, self.path = all_places, restarts, path

    def render_GET(self, request):  # noqa: N802 - Twisted API
        def answer(results):
            pages: dict[str, Optional[bytes]] = {str(p.number): None for p in self.all_places}
            for place, got in results:
                if got is not None and got[0] == 200:
                    pages[str(place.number)] = got[2]
            restarts = {str(n): count for n, count in self.restarts().items()}
            request.setHeader(b"Content-Type", CONTENT_TYPE_LATEST.encode())
            request.write(self.metrics.render(pages, restarts))
            request.finish()

        d = self.http.ask_all(self.places(), "metrics", b"GET", self.path)
        d.addCallback(answer)
        d.addErrback(_failed, request)
        return NOT_DONE_YET


def make_metrics_site(http: WorkerHttp, metrics: SupervisorMetrics, places: Callable[[], Sequence[WorkerPlace]],
                      all_places: Sequence[WorkerPlace], restarts: Callable[[], dict[int, int]],
                      path: str = "/metrics") -> Site:
    """The parent's metrics page at ``path`` (the workers serve theirs at the same path)."""
    return make_site_with(path, _MetricsResource(http, metrics, places, all_places, restarts,
                                                 path.encode()))


class _ManagementRelay(Resource):
    isLeaf = True

    def __init__(self, http: WorkerHttp, places: Callable[[], Sequence[WorkerPlace]]) -> None:
        super().__init__()
        self.http = http
        self.places = places

    def render(self, request):
        headers = Headers({b"x-forwarded-for": [client_host(request).encode()]})
        for name in _RELAYED:
            value = request.getHeader(name)
            if value is not None:
                headers.setRawHeaders(name, [value])
        body = request.content.read() if request.content is not None else b""
        d = self.http.ask_all(self.places(), "management", request.method, request.uri, headers, body)
        d.addCallback(lambda results: _answer(request, combine(request.method, request.uri, results)))
        d.addErrback(_failed, request)
        return NOT_DONE_YET


def combine(method: bytes, path: bytes, results: Sequence[tuple[WorkerPlace, Any]]) -> tuple[int, Any, bytes]:
    """One answer ``(status, headers, body)`` from the workers' (see the module doc)."""
    answered = [(place, got) for place, got in results if got is not None]
    if not answered:
        body = json.dumps({"error": "bad_gateway", "reason": "no worker answered"}).encode()
        return 502, Headers({b"content-type": [b"application/json"]}), body
    segments = path.split(b"?", 1)[0].strip(b"/").split(b"/")
    shared = len(segments) > 1 and segments[1].decode("latin-1") in SHARED
    if method == b"GET" and not shared and all(got[0] == 200 for _, got in answered):
        lists = [(place, _json(got)) for place, got in answered]
        if all(isinstance(items, list) for _, items in lists):
            joined = [_marked(item, place) for place, items in lists for item in items]
            return 200, answered[0][1][1], json.dumps(joined).encode()
    place, (status, headers, body) = next(((p, got) for p, got in answered if got[0] != 404), answered[0])
    if method == b"GET" and status == 200:
        value = _json((status, headers, body))
        if isinstance(value, dict):
            body = json.dumps(_marked(value, place)).encode()
    return status, headers, body


def _json(answer: tuple[int, Any, bytes]) -> Any:
    status, headers, body = answer
    types = headers.getRawHeaders(b"content-type") or [b""]
    if b"json" not in types[0]:
        return None
    try:
        return json.loads(body)
    except ValueError:
        return None


def _marked(item: Any, place: WorkerPlace) -> Any:
    return {**item, WORKER_LABEL: place.number} if isinstance(item, dict) else item


def _answer(request, answer: tuple[int, Any, bytes]) -> None:
    status, headers, body = answer
    request.setResponseCode(status)
    for name in _ANSWERED:
        for value in headers.getRawHeaders(name) or ():
            request.setHeader(name, value)
    request.write(body)
    request.finish()


def _failed(failure, request) -> None:
    log.error("relaying %s %s to the workers failed: %s", request.method, request.uri,
              failure.getErrorMessage())
    if not request.finished:
        request.setResponseCode(500)
        request.finish()


def make_management_relay(http: WorkerHttp, places: Callable[[], Sequence[WorkerPlace]]) -> Site:
    site = QuietSite(_ManagementRelay(http, places))
    site.displayTracebacks = False
    return site
