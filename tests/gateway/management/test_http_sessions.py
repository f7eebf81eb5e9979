"""The dashboard's sessions: who a request is from (cookie, else basic), the CSRF and
origin checks on writes, idle expiry, a deleted user's session ending, the cookie's flags."""
from __future__ import annotations

import base64

import pytest

from gateway.auth import Authenticator, Permission, User, UserDirectory, hash_password
from gateway.management.http_auth import BasicAuthenticator
from gateway.management.http_errors import HttpError
from gateway.management.http_sessions import CSRF_HEADER, SESSION_COOKIE, SessionStore, SignIn

HASH = hash_password("pw", iterations=4096)
ALL = {"/": Permission(".*", ".*", ".*")}
HOST = {"host": "127.0.0.1:15672"}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def users():
    return UserDirectory([User("admin", HASH, tags=("administrator",), permissions=ALL),
                          User("app", HASH, permissions=ALL)])


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def sign_in(users, clock):
    return SignIn(BasicAuthenticator(Authenticator(users)), SessionStore(idle_timeout=60), clock)


def cookie_headers(session) -> dict:
    return {**HOST, "cookie": f"{SESSION_COOKIE}={session.token}"}


def refused(call, status: int) -> HttpError:
    with pytest.raises(HttpError) as info:
        call()
    assert info.value.status == status
    return info.value


def test_a_signed_in_session_is_its_user_s_and_writes_need_its_token(sign_in):
    session = sign_in.sign_in(b"username=admin&password=pw", HOST, "127.0.0.1")
    caller = sign_in.caller(cookie_headers(session), "127.0.0.1")
    assert caller.user.name == "admin" and caller.session is session
    sign_in.check_write(caller, "GET", cookie_headers(session))
    error = refused(lambda: sign_in.check_write(caller, "DELETE", cookie_headers(session)), 403)
    assert CSRF_HEADER in error.reason
    refused(lambda: sign_in.check_write(caller, "POST", {**cookie_headers(session), CSRF_HEADER: "guess"}), 403)
    sign_in.check_write(caller, "POST", {**cookie_headers(session), CSRF_HEADER: session.csrf})


def test_another_origin_is_refused_for_writes_and_sign_in(sign_in):
    basic = {**HOST, "authorization": "Basic " + base64.b64encode(b"admin:pw").decode(),
             "origin": "http://evil.example"}
    caller = sign_in.caller(basic, "127.0.0.1")
    assert caller.session is None
    assert "evil.example" in refused(lambda: sign_in.check_write(caller, "PUT", basic), 403).reason
    sign_in.check_write(caller, "PUT", {**basic, "origin": "http://127.0.0.1:15672"})
    refused(lambda: sign_in.sign_in(b"username=admin&password=pw", {**HOST, "origin": "null"}, "127.0.0.1"), 403)


def test_sign_in_refusals_name_the_problem(sign_in):
    assert refused(lambda: sign_in.sign_in(b"password=pw", HOST, "127.0.0.1"), 400).reason == \
        "the sign-in form needs a username"
    assert refused(lambda: sign_in.sign_in(b"username=admin&password=no", HOST, "127.0.0.1"), 401).reason == \
        "Login failed"
    assert "tags" in refused(lambda: sign_in.sign_in(b"username=app&password=pw", HOST, "127.0.0.1"), 401).reason


def test_a_session_ends_idle_at_logout_and_with_its_user(sign_in, users, clock):
    session = sign_in.sign_in(b"username=admin&password=pw", HOST, "127.0.0.1")
    clock.now += 61
    assert "sign in again" in refused(lambda: sign_in.caller(cookie_headers(session), "127.0.0.1"), 401).reason
    session = sign_in.sign_in(b"username=admin&password=pw", HOST, "127.0.0.1")
    sign_in.sign_out(sign_in.caller(cookie_headers(session), "127.0.0.1"))
    refused(lambda: sign_in.caller(cookie_headers(session), "127.0.0.1"), 401)
    session = sign_in.sign_in(b"username=admin&password=pw", HOST, "127.0.0.1")
    users.replace([users.get("app")])  # admin deleted
    assert "no longer exists" in refused(lambda: sign_in.caller(cookie_headers(session), "127.0.0.1"), 401).reason
    assert len(sign_in.sessions) == 0


def test_the_cookie_is_http_only_same_site_and_secure_over_tls(sign_in):
    session = sign_in.sign_in(b"username=admin&password=pw", HOST, "127.0.0.1")
    plain = sign_in.cookie(session, secure=False).split("; ")
    assert plain[0] == f"{SESSION_COOKIE}={session.token}"
    assert {"HttpOnly", "SameSite=Strict", "Path=/"} <= set(plain) and "Secure" not in plain
    assert "Secure" in sign_in.cookie(session, secure=True).split("; ")
    assert sign_in.cookie(None, secure=False).startswith(f"{SESSION_COOKIE}=; Max-Age=0")
