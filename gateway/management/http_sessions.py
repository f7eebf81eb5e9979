"""The dashboard's sign-in: a session cookie in place of the browser's basic-auth dialog,
and the checks that keep a signed-in browser's writes its own.

Why not basic auth alone: a browser keeps basic credentials until it is closed (no
logout), shows its own dialog, and cannot be told apart from a tool. The sign-in page
posts the user name and password once; the answer sets ``SESSION_COOKIE`` (``HttpOnly``
so no script reads it, ``SameSite=Strict`` so no other site's page sends it, ``Secure``
over TLS). A session ends at logout, after ``IDLE_TIMEOUT`` unused, or when its user is
deleted or loses its management tag (the user is looked up on every request).

Basic auth keeps working for tools (``rabbitmqadmin``, ``ctl``, curl): a request that
carries a session cookie is the session's, else its ``Authorization`` header is checked.

CSRF: a write (any method but GET/HEAD) made with the session cookie must carry the
session's token in ``CSRF_HEADER`` (the dashboard reads it from ``GET /session``; a
cross-site form can neither read it nor set a header). Any write whose ``Origin`` header
names another host is refused too, so a browser's cached basic credentials cannot be
used by another site's form either; tools send no ``Origin``.
"""
from __future__ import annotations

import secrets
from dataclasses import dataclass
from http.cookies import CookieError, SimpleCookie
from typing import Callable, Mapping, Optional
from urllib.parse import parse_qs, urlsplit

from gateway.auth import User
from gateway.management.http_auth import BasicAuthenticator, unauthorised
from gateway.management.http_errors import HttpError

__all__ = ["SESSION_COOKIE", "CSRF_HEADER", "IDLE_TIMEOUT", "MAX_SESSIONS", "Caller", "Session",
           "SessionStore", "SignIn", "SAFE_METHODS"]

SESSION_COOKIE = "agw_session"
#: the request header a cookie-authenticated write carries its session's token in
CSRF_HEADER = "x-csrf-token"
#: seconds a session lives unused
IDLE_TIMEOUT = 30 * 60.0
#: sessions kept at once (the least recently used goes first)
MAX_SESSIONS = 1000
SAFE_METHODS = frozenset({"GET", "HEAD"})


@dataclass
class Session:
    token: str
    user_name: str
    #: the anti-CSRF token writes made with this session's cookie must carry
    csrf: str
    last_used: float


@dataclass(frozen=True)
class Caller:
    """Who made a request, and how: ``session`` None for basic auth."""

    user: User
    session: Optional[Session] = None


class SessionStore:
    """Signed-in sessions by their cookie token, in memory (a restart signs everyone out)."""

    def __init__(self, idle_timeout: float = IDLE_TIMEOUT, max_sessions: int = MAX_SESSIONS) -> None:
        self.idle_timeout = idle_timeout
        self.max_sessions = max_sessions
        self._sessions: dict[str, Session] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def open(self, user_name: str, now: float) -> Session:
        session = Session(secrets.token_urlsafe(32), user_name, secrets.token_urlsafe(24), now)
        self._sessions[session.token] = session
        while len(self._sessions) > self.max_sessions:
            oldest = min(self._sessions.values(), key=lambda s: s.last_used)
            del self._sessions[oldest.token]
        return session

    def find(self, token: str, now: float) -> Optional[Session]:
        """The live session of ``token`` (its idle time restarted), else None."""
        session = self._sessions.get(token)
        if session is None:
            return None
        if now - session.last_used > self.idle_timeout:
            del self._sessions[token]
            return None
        session.last_used = now
        return session

    def close(self, token: str) -> None:
        self._sessions.pop(token, None)


def _cookie(headers: Mapping[str, str], name: str) -> Optional[str]:
    raw = headers.get("cookie")
    if not raw:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(raw)
    except CookieError:
        return None
    morsel = jar.get(name)
    return morsel.value if morsel is not None else None


def _same_origin(headers: Mapping[str, str]) -> bool:
    """True unless an ``Origin`` header names another host than the one asked."""
    origin = headers.get("origin")
    if not origin:
        return True
    return origin != "null" and urlsplit(origin).netloc.lower() == headers.get("host", "").lower()


class SignIn:
    """Who a request is from (session cookie, else basic auth), and the sign-in and
    sign-out answers; HTTP-free: headers in, ``HttpError`` or values out."""

    def __init__(self, basic: BasicAuthenticator, sessions: SessionStore,
                 clock: Callable[[], float]) -> None:
        self.basic = basic
        self.sessions = sessions
        self._clock = clock

    def caller(self, headers: Mapping[str, str], peer_host: str) -> Caller:
        """Raises ``HttpError`` 401 (429) when neither a live session nor the basic
        credentials let the request in."""
        token = _cookie(headers, SESSION_COOKIE)
        if token:
            session = self.sessions.find(token, self._clock())
            if session is not None:
                try:
                    return Caller(self.basic.user_named(session.user_name, peer_host), session)
                except HttpError:
                    self.sessions.close(token)
                    raise
            if not headers.get("authorization"):
                raise unauthorised("Login failed: the session has ended; sign in again")
        authorization = headers.get("authorization")
        return Caller(self.basic.user_for(authorization.encode("latin-1") if authorization else None,
                                          peer_host))

    def check_write(self, caller: Caller, method: str, headers: Mapping[str, str]) -> None:
        """Raises ``HttpError`` 403 for a write another site's page could have made."""
        if method.upper() in SAFE_METHODS:
            return
        if not _same_origin(headers):
            raise HttpError(403, None, f"a {method} from origin {headers.get('origin')!r} is refused: "
                                       f"the management API takes writes from its own pages and from tools")
        if caller.session is not None and not secrets.compare_digest(
                headers.get(CSRF_HEADER, ""), caller.session.csrf):
            raise HttpError(403, None, f"a {method} with the session cookie needs the session's "
                                       f"token in the {CSRF_HEADER} header (GET /session)")

    def sign_in(self, form_body: bytes, headers: Mapping[str, str], peer_host: str) -> Session:
        """A session for the ``username`` and ``password`` fields of the sign-in form
        (``application/x-www-form-urlencoded``). Raises ``HttpError`` 400 (fields), 401
        (credentials), 403 (another origin), 429 (throttled)."""
        if not _same_origin(headers):
            raise HttpError(403, None, "a sign-in from another site's page is refused")
        try:
            fields = parse_qs(form_body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
        except UnicodeDecodeError:
            raise HttpError(400, None, "the sign-in form is not UTF-8") from None
        name = (fields.get("username") or [""])[-1]
        password = (fields.get("password") or [""])[-1]
        if not name:
            raise HttpError(400, None, "the sign-in form needs a username")
        user = self.basic.sign_in(name, password, peer_host)
        return self.sessions.open(user.name, self._clock())

    def sign_out(self, caller: Caller) -> None:
        if caller.session is not None:
            self.sessions.close(caller.session.token)

    def cookie(self, session: Optional[Session], secure: bool) -> str:
        """The ``Set-Cookie`` value: ``session``'s, or one that removes the cookie."""
        flags = "; Path=/; HttpOnly; SameSite=Strict" + ("; Secure" if secure else "")
        if session is None:
            return f"{SESSION_COOKIE}=; Max-Age=0" + flags
        return f"{SESSION_COOKIE}={session.token}" + flags  # ends with the browser or idle
