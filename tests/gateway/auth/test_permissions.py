import pytest

from gateway.auth.errors import AccessRefused
from gateway.auth.permissions import Action, check, is_permitted, may_access_vhost
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
    with pytest.raises(AccessRefused) as info:
        check(USER, "/", Action.CONFIGURE, "orders")
    assert info.value.text == (
        "configure access to resource 'orders' in vhost '/' refused for user 'bob'")
    assert str(info.value) == info.value.text


def test_may_access_vhost():
    assert may_access_vhost(USER, "/")
    assert may_access_vhost(USER, "dev")
    assert not may_access_vhost(USER, "prod")
