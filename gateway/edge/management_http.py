"""The management listener: the HTTP API (``gateway/management/http_api.py``) and the
dashboard, served by twisted.web.

Everything but the sign-in page and the static files it needs takes a user with a
management tag (``http_auth``): a signed-in session's cookie, or HTTP basic credentials
(tools), as ``http_sessions`` decides, writes checked against CSRF there too. The
dashboard's pages redirect to ``/login`` when neither is given; the API answers 401
with the basic-auth challenge, except to the dashboard's own requests.
"""
from __future__ import annotations

import base64
import json
import logging
from importlib import resources
import time
from typing import Any, Callable, Optional
from urllib.parse import urlencode

from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Site

from gateway.auth import Authenticator, LoginThrottle
from gateway.edge.http import QuietSite
from gateway.management.http_api import ApiRequest, ApiResponse, HttpApi, handle_saved, split_path
from gateway.management.http_auth import REALM, BasicAuthenticator
from gateway.management.http_errors import HttpError
from gateway.management.http_sessions import Caller, SessionStore, SignIn

__all__ = ["ManagementResource", "make_management_site", "client_host", "MAX_BODY", "DASHBOARD_CLIENT"]

log = logging.getLogger(__name__)

#: the largest request body taken (a declare is a few hundred bytes)
MAX_BODY = 1 << 20
#: the largest definitions file imported (``POST /api/definitions``: ten thousand queues
#: with their bindings are a few MiB)
MAX_DEFINITIONS_BODY = 64 << 20
#: what the dashboard's requests carry in ``X-Requested-With`` (a 401 then comes without
#: the basic-auth challenge that would open the browser's dialog)
DASHBOARD_CLIENT = "amqp-gateway-dashboard"
#: files anyone may fetch (the sign-in page needs them; they hold no data)
_PUBLIC_FILES = {
    "login.html": ("login.html", "text/html; charset=utf-8"),
    "login.js": ("login.js", "text/javascript; charset=utf-8"),
    "dashboard.js": ("dashboard.js", "text/javascript; charset=utf-8"),
    "dashboard.css": ("dashboard.css", "text/css; charset=utf-8"),
    "charts.js": ("charts.js", "text/javascript; charset=utf-8"),
}
#: the dashboard itself: a signed-in user's (else a redirect to the sign-in page)
_DASHBOARD_PAGES = {
    "": ("index.html", "text/html; charset=utf-8"),
    "dashboard": ("index.html", "text/html; charset=utf-8"),
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


def _body(request, limit: int) -> bytes:
    body = request.content.read(limit + 1) if request.content is not None else b""
    if len(body) > limit:
        raise HttpError(413, "payload_too_large", f"the body is larger than {limit} bytes")
    return body


def _dashboard_file(name: str) -> bytes:
    return resources.files("gateway.management.dashboard").joinpath(name).read_bytes()


class ManagementResource(Resource):
    """Every path of the management listener (a leaf: the API routes itself)."""

    isLeaf = True

    def __init__(self, api: HttpApi, sign_in: SignIn) -> None:
        super().__init__()
        self.api = api
        self.sign_in = sign_in

    def render(self, request) -> bytes:
        try:
            segments = split_path(request.path)
            page = "/".join(segments)
            method = request.method.decode("ascii", "replace")
            headers = {k.decode("latin-1").lower(): vs[0].decode("latin-1")
                       for k, vs in request.requestHeaders.getAllRawHeaders() if vs}
            peer = client_host(request)
            if page in _PUBLIC_FILES:
                return self._static(request, page)
            if page == "login":
                return self._login(request, method, headers, peer)
            if page not in _DASHBOARD_PAGES and page not in ("session", "logout") and segments[:1] != ("api",):
                raise HttpError(404, None, "Not Found")
            try:
                caller = self.sign_in.caller(headers, peer)
            except HttpError as exc:
                if exc.status == 401 and page in _DASHBOARD_PAGES:
                    return self._redirect(request, "/login")
                raise
            if page in _DASHBOARD_PAGES:
                return self._static(request, page)
            self.sign_in.check_write(caller, method, headers)
            if page == "session":
                return self._session(request, method, caller)
            if page == "logout":
                return self._logout(request, method, caller)
            limit = MAX_DEFINITIONS_BODY if segments[:2] == ("api", "definitions") else MAX_BODY
            body = _body(request, limit)
            answer = _LaterAnswer(self, request)
            handle_saved(self.api, ApiRequest(
                method=method, segments=segments,
                query={k.decode("utf-8", "replace"): [v.decode("utf-8", "replace") for v in vs]
                       for k, vs in request.args.items()},
                body=body, user=caller.user, headers=headers), answer.respond)
            return answer.now()
        except HttpError as exc:
            response = ApiResponse(exc.status, exc.body(), exc.headers)
        except Exception:  # noqa: BLE001 - a bug answers 500, never kills the listener
            log.exception("management API request %s %r failed", request.method, request.uri)
            response = ApiResponse(500, HttpError(500, None, "internal error; see the "
                                                  "gateway's log").body())
        return self._answer(request, response)

    def _static(self, request, page: str) -> bytes:
        if request.method not in (b"GET", b"HEAD"):
            raise HttpError(405, None, "the dashboard's files are read-only")
        name, content_type = _PUBLIC_FILES.get(page) or _DASHBOARD_PAGES[page]
        request.setHeader(b"Content-Type", content_type.encode())
        request.setHeader(b"Cache-Control", b"no-cache")
        return _dashboard_file(name)

    def _redirect(self, request, location: str, cookie: Optional[str] = None) -> bytes:
        """303 to ``location``, a path on this listener (never an absolute URL: the page
        may have been opened as ``http://user:pass@host/``)."""
        request.setResponseCode(303)
        request.setHeader(b"Location", location.encode())
        request.setHeader(b"Cache-Control", b"no-cache")
        if cookie is not None:
            request.setHeader(b"Set-Cookie", cookie.encode())
        return b""

    def _login(self, request, method: str, headers: dict, peer: str) -> bytes:
        """GET: the sign-in page. POST (its form): a session cookie and on to the
        dashboard, or back to the page with the reason."""
        if method in ("GET", "HEAD"):
            return self._static(request, "login.html")
        if method != "POST":
            raise HttpError(405, None, f"{method} is not allowed here; allowed: GET, POST")
        try:
            session = self.sign_in.sign_in(_body(request, MAX_BODY), headers, peer)
        except HttpError as exc:
            if exc.status == 403:
                raise
            return self._redirect(request, "/login?" + urlencode({"error": exc.reason}))
        return self._redirect(request, "/", self.sign_in.cookie(session, request.isSecure()))

    def _session(self, request, method: str, caller: Caller) -> bytes:
        """Who is signed in, and the token the dashboard's writes carry."""
        if method not in ("GET", "HEAD"):
            raise HttpError(405, None, f"{method} is not allowed here; allowed: GET")
        user = caller.user
        return self._answer(request, ApiResponse(200, {
            "user": user.name, "tags": sorted(user.tags), "signed_in": caller.session is not None,
            "csrf_token": caller.session.csrf if caller.session is not None else None}))

    def _logout(self, request, method: str, caller: Caller) -> bytes:
        if method != "POST":
            raise HttpError(405, None, f"{method} is not allowed here; allowed: POST")
        self.sign_in.sign_out(caller)
        return self._answer(request, ApiResponse(204, headers={
            "Set-Cookie": self.sign_in.cookie(None, request.isSecure())}))

    def _answer(self, request, response: ApiResponse) -> bytes:
        request.setResponseCode(response.status)
        for key, value in response.headers.items():
            request.setHeader(key.encode(), value.encode())
        if response.status == 401 and request.getHeader(b"x-requested-with") != DASHBOARD_CLIENT.encode():
            # tools get the challenge; the dashboard goes to its sign-in page instead of
            # the browser's dialog
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
    basic = BasicAuthenticator(authenticator, login_throttle, clock)
    site = QuietSite(ManagementResource(api, SignIn(basic, SessionStore(), clock)))
    site.displayTracebacks = False
    return site
