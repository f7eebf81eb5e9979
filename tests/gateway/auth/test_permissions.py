import pytest

from gateway.auth.errors import PermissionRefused
from gateway.auth import permissions
from gateway.auth.permissions import Action, PermissionCache, check, is_permitted, may_access_vhost
from gateway.auth.users import Permission, User

USER = User("bob", None, permissions={
    "/": Permission(configure="", write="amq\\.topic|logs", read=".*"),
    "dev": Permission(configure="tmp-.*", write="amq\\.default", read="q[0-9]"),
})


@pytest.mark.parametrize("vhost, action, resource, allowed", [
    ("/", Action.READ, "anything", True),
    ("/", Action.READ, "", True),  # default exchange checked as amq.default
    ("/", Action.CONFIGURE, "x", False),  # empty pattern denies
    ("/", Action.CONFIGURE, "", False),
    ("/", Action.WRITE, "logs", True),
    ("/", Action.WRITE, "logs2", False),  # full match, not search
    ("/", Action.WRITE, "xlogs", False),
    ("/", Action.WRITE, "amq.topic", True),
    ("/", Action.WRITE, "amqXtopic", False),
    ("dev", Action.CONFIGURE, "tmp-1", True),
    ("dev", Action.CONFIGURE, "tmp", False),
    ("dev", Action.WRITE, "", True),
    ("dev", Action.READ, "q1", True),
    ("dev", Action.READ, "q12", False),
    ("prod", Action.READ, "q1", False),  # no entry for the vhost
])
def test_is_permitted(vhost, action, resource, allowed):
    assert is_permitted(USER, vhost, action, resource) is allowed


def test_check_passes_silently():
    assert check(USER, "/", Action.READ, "q") is None


def test_check_text_names_action_resource_user_vhost():
    with pytest.raises(PermissionRefused) as info:
        check(USER, "/", Action.CONFIGURE, "orders")
    assert info.value.text == (
        "configure access to resource 'orders' in vhost '/' refused for user 'bob'")
    assert str(info.value) == info.value.text


def test_may_access_vhost():
    assert may_access_vhost(USER, "/")
    assert may_access_vhost(USER, "dev")
    assert not may_access_vhost(USER, "prod")


def test_permission_cache_answers_as_check_and_asks_once(monkeypatch):
    calls = []
    real = permissions.check
    monkeypatch.setattr(permissions, "check", lambda *a: calls.append(a) or real(*a))
    cache = PermissionCache()
    for _ in range(3):
        assert cache.refusal(USER, "/", Action.WRITE, "logs") is None
        assert cache.refusal(USER, "/", Action.CONFIGURE, "orders") == (
            "configure access to resource 'orders' in vhost '/' refused for user 'bob'")
    assert len(calls) == 2
    assert PermissionCache().refusal(None, "/", Action.CONFIGURE, "q") is None  # no user table


def test_permission_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(PermissionCache, "MAX", 4)
    cache = PermissionCache()
    for n in range(10):
        assert cache.refusal(USER, "/", Action.WRITE, f"logs{n}") is not None  # refused
        assert len(cache) <= 4


def test_permission_cache_forgets_its_answers_for_a_re_read_user():
    cache = PermissionCache()
    assert cache.refusal(USER, "/", Action.WRITE, "logs") is None
    narrowed = User("bob", None, permissions={"/": Permission(".*", "^$", ".*")})
    assert cache.refusal(narrowed, "/", Action.WRITE, "logs") == (
        "write access to resource 'logs' in vhost '/' refused for user 'bob'")
