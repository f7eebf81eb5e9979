"""The management listener: the HTTP API (``gateway/management/http_api.py``) and the live
dashboard, served by twisted.web behind HTTP basic authentication.

Everything on this listener needs a user with a management tag (``http_auth``), the
dashboard included: the browser asks once (``WWW-Authenticate``) and sends the same
credentials with the dashboard's own API calls.
"""
from __future__ import annotations

import base64
import json
import logging
from importlib import resources
import time
from typing import Any, Callable, Optional

from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Site

from gateway.auth import Authenticator, LoginThrottle
from gateway.edge.http import QuietSite
from gateway.management.http_api import ApiRequest, ApiResponse, HttpApi, handle_saved, split_path
from gateway.management.http_auth import REALM, BasicAuthenticator
from gateway.management.http_errors import HttpError

__all__ = ["ManagementResource", "make_management_site", "client_host", "MAX_BODY"]

log = logging.getLogger(__name__)

#: the largest request body taken (a declare is a few hundred bytes)
MAX_BODY = 1 << 20
#: the largest definitions file imported (``POST /api/definitions``: ten thousand queues
#: with their bindings are a few MiB)
MAX_DEFINITIONS_BODY = 64 << 20
#: the dashboard's files (package data of ``gateway.management.dashboard``)
_DASHBOARD_FILES = {
    "": ("index.html", "text/html; charset=utf-8"),
    "dashboard": ("index.html", "text/html; charset=utf-8"),
    "dashboard.js": ("dashboard.js", "text/javascript; charset=utf-8"),
    "dashboard.css": ("dashboard.css", "text/css; charset=utf-8"),
}


def _jsonable(value: Any) -> Any:
    """What JSON lacks: AMQP binary values (as text when they are UTF-8, else base64),
    and anything else as its text."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return base64.b64encode(raw).decode()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def client_host(request) -> str:
    """The HTTP client's address. On a worker's unix socket (``workers: N``; only the
    parent can reach it) the parent relays each request and names its client in
    ``X-Forwarded-For``; anywhere else that header is the client's own word and ignored."""
    host = getattr(request.getClientAddress(), "host", None)
    if host is not None:
        return host
    forwarded = request.getHeader(b"x-forwarded-for")
    return forwarded.decode("ascii", "replace") if forwarded else ""


def _dashboard_file(name: str) -> bytes:
    return resources.files("gateway.management.dashboard").joinpath(name).read_bytes()


class ManagementResource(Resource):
    """Every path of the management listener (a leaf: the API routes itself)."""

    isLeaf = True

    def __init__(self, api: HttpApi, auth: BasicAuthenticator) -> None:
        super().__init__()
        self.api = api
        self.auth = auth

    def render(self, request) -> bytes:
        try:
            segments = split_path(request.path)
            user = self.auth.user_for(request.getHeader(b"authorization"), client_host(request))
            if not segments or segments[0] != "api":
                return self._static(request, segments)
            limit = MAX_DEFINITIONS_BODY if segments[:2] == ("api", "definitions") else MAX_BODY
            body = request.content.read(limit + 1) if request.content is not None else b""
            if len(body) > limit:
                raise HttpError(413, "payload_too_large", f"the body is larger than {limit} bytes")
            answer = _LaterAnswer(self, request)
            handle_saved(self.api, ApiRequest(
                method=request.method.decode("ascii", "replace"), segments=segments,
                query={k.decode("utf-8", "replace"): [v.decode("utf-8", "replace") for v in vs]
                       for k, vs in request.args.items()},
                body=body, user=user,
                headers={k.decode("latin-1").lower(): vs[0].decode("latin-1")
                         for k, vs in request.requestHeaders.getAllRawHeaders() if vs}), answer.respond)
            return answer.now()
        except HttpError as exc:
            response = ApiResponse(exc.status, exc.body(), exc.headers)
        except Exception:  # noqa: BLE001 - a bug answers 500, never kills the listener
            log.exception("management API request %s %r failed", request.method, request.uri)
            response = ApiResponse(500, HttpError(500, None, "internal error; see the "
                                                  "gateway's log").body())
        return self._answer(request, response)

    def _static(self, request, segments: tuple[str, ...]) -> bytes:
        if request.method not in (b"GET", b"HEAD"):
            raise HttpError(405, None, "the dashboard is read-only")
        entry = _DASHBOARD_FILES.get("/".join(segments))
        if entry is None:
            raise HttpError(404, None, "Not Found")
        name, content_type = entry
        request.setHeader(b"Content-Type", content_type.encode())
        request.setHeader(b"Cache-Control", b"no-cache")
        return _dashboard_file(name)

    def _answer(self, request, response: ApiResponse) -> bytes:
        request.setResponseCode(response.status)
        for key, value in response.headers.items():
            request.setHeader(key.encode(), value.encode())
        if response.status == 401:
            request.setHeader(b"WWW-Authenticate", f'Basic realm="{REALM}"'.encode())
        request.setHeader(b"Cache-Control", b"no-cache")
        if response.status == 204 or response.body is None:
            return b""
        request.setHeader(b"Content-Type", b"application/json")
        return json.dumps(response.body, default=_jsonable).encode()


class _LaterAnswer:
    """The answer to one API request: given during ``render`` (returned from it) or later,
    once the store committed what the request changed (written then; dropped if the
    client went away meanwhile)."""

    __slots__ = ("_resource", "_request", "_response", "_waiting", "_gone")

    def __init__(self, resource: ManagementResource, request: Any) -> None:
        self._resource = resource
        self._request = request
        self._response: Optional[ApiResponse] = None
        self._waiting = False
        self._gone = False

    def respond(self, response: ApiResponse) -> None:
        if not self._waiting:
            self._response = response
        elif not self._gone:
            self._request.write(self._resource._answer(self._request, response))
            self._request.finish()

    def now(self) -> Any:
        """What ``render`` returns: the answer's bytes, or NOT_DONE_YET while it waits."""
        if self._response is not None:
            return self._resource._answer(self._request, self._response)
        self._waiting = True
        self._request.notifyFinish().addErrback(self._lost)
        return NOT_DONE_YET

    def _lost(self, _reason: Any) -> None:
        self._gone = True


def make_management_site(api: HttpApi, authenticator: Authenticator,
                         login_throttle: Optional[LoginThrottle] = None,
                         clock: Callable[[], float] = time.monotonic) -> Site:
    """``login_throttle``: the AMQP listeners' one (failures count across protocols),
    with the clock it is used with."""
    site = QuietSite(ManagementResource(api, BasicAuthenticator(authenticator, login_throttle, clock)))
    site.displayTracebacks = False
    return site
