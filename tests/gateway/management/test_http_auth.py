"""HTTP basic authentication against the AMQP users: tags, loopback-only users, the
verified-header cache and its reload rule."""
from __future__ import annotations

import base64

import pytest

from gateway.auth import Authenticator, Permission, User, UserDirectory, hash_password
from gateway.management.http_auth import BasicAuthenticator
from gateway.management.http_errors import HttpError

HASH = hash_password("pw", iterations=4096)
ALL = {"/": Permission(".*", ".*", ".*")}


def header(user: str, password: str) -> bytes:
    return b"Basic " + base64.b64encode(f"{user}:{password}".encode())


@pytest.fixture
def users():
    return UserDirectory([
        User("admin", HASH, tags=("administrator",), permissions=ALL),
        User("watcher", HASH, tags=("monitoring",)),
        User("app", HASH, permissions=ALL),
        User("local", HASH, tags=("management",), loopback_only=True, permissions=ALL),
    ])


@pytest.fixture
def auth(users):
    return BasicAuthenticator(Authenticator(users))


def refusal(auth, value, peer="127.0.0.1") -> HttpError:
    with pytest.raises(HttpError) as info:
        auth.user_for(value, peer)
    assert info.value.status == 401
    assert info.value.error == "not_authorised"
    return info.value


@pytest.mark.parametrize("name", ["admin", "watcher", "local"])
def test_users_with_a_management_tag_get_in(auth, name):
    assert auth.user_for(header(name, "pw"), "127.0.0.1").name == name


def test_a_user_without_a_management_tag_is_refused_naming_the_tags(auth):
    assert "Not management user: 'app' has none of the tags" in refusal(auth, header("app", "pw")).reason


@pytest.mark.parametrize("value,words", [
    (None, "needs HTTP basic authentication"),
    (b"Bearer abc", "only the Basic authentication scheme"),
    (b"Basic !!!", "not base64"),
    (b"Basic " + base64.b64encode(b"nocolon"), "no ':'"),
    (header("admin", "wrong"), "Login failed"),
    (header("nobody", "pw"), "Login failed"),
])
def test_bad_credentials_are_401(auth, value, words):
    assert words in refusal(auth, value).reason


def test_a_loopback_only_user_is_refused_from_elsewhere(auth):
    assert "can only log in via localhost" in refusal(auth, header("local", "pw"), "10.0.0.5").reason


def test_a_verified_header_is_not_checked_again(users):
    calls = []
    authenticator = Authenticator(users)
    real = authenticator.check_password

    def counting(name, password):
        calls.append(name)
        return real(name, password)

    authenticator.check_password = counting
    auth = BasicAuthenticator(authenticator)
    for _ in range(3):
        auth.user_for(header("admin", "pw"), "127.0.0.1")
    assert calls == ["admin"]
    refusal(auth, header("admin", "other"))  # a different header is checked
    assert calls == ["admin", "admin"]


def test_a_reload_that_changes_the_user_forgets_the_cached_header(users, auth):
    assert auth.user_for(header("admin", "pw"), "127.0.0.1").tags == ("administrator",)
    users.replace([User("admin", hash_password("new", iterations=4096), tags=("administrator",))])
    refusal(auth, header("admin", "pw"))
    assert auth.user_for(header("admin", "new"), "127.0.0.1").name == "admin"
