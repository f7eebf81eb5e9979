"""admit_to_vhost: the vhost admission both protocols share (existence, access, the
user's connection limit), in that order, with nothing counted on a refusal."""
from __future__ import annotations

import pytest

from gateway.auth.limits import ConnectionLimitReached, ConnectionRegistry
from gateway.auth.users import Permission, User
from gateway.auth.vhost_admission import (VhostAccessRefused, VhostNotFound, admit_to_vhost,
                                          vhost_access_refusal)

VHOSTS = {"/": "root vhost", "other": "other vhost"}
BOB = User("bob", None, permissions={"/": Permission(".*", ".*", ".*")})


def test_admits_to_an_existing_vhost_the_user_may_use() -> None:
    assert admit_to_vhost(VHOSTS.get, BOB, "/") == ("root vhost", None)
    registry = ConnectionRegistry()
    vhost, token = admit_to_vhost(VHOSTS.get, BOB, "/", registry=registry, connection="conn")
    assert vhost == "root vhost" and token is not None
    assert registry.count("bob") == 1 and list(registry.connections()) == ["conn"]
    registry.release(token)
    assert registry.count("bob") == 0


def test_a_missing_vhost_is_refused_before_access_is_looked_at() -> None:
    stranger = User("stranger", None, permissions={})
    with pytest.raises(VhostNotFound) as info:
        admit_to_vhost(VHOSTS.get, stranger, "nope")
    assert (info.value.name, info.value.text) == ("nope", "vhost 'nope' not found")


def test_a_vhost_without_permissions_is_refused_and_nothing_counted() -> None:
    registry = ConnectionRegistry()
    with pytest.raises(VhostAccessRefused) as info:
        admit_to_vhost(VHOSTS.get, BOB, "other", registry=registry)
    assert info.value.text == "access to vhost 'other' refused for user 'bob'"
    assert info.value.text == vhost_access_refusal("other", "bob")
    assert registry.count("bob") == 0
    # the listener's own access check replaces the permission table's
    assert admit_to_vhost(VHOSTS.get, BOB, "other", may_access=lambda user, name: True)[0] == "other vhost"


def test_the_connection_limit_comes_last() -> None:
    registry = ConnectionRegistry(default_max_connections=1)
    admit_to_vhost(VHOSTS.get, BOB, "/", registry=registry)
    with pytest.raises(ConnectionLimitReached) as info:
        admit_to_vhost(VHOSTS.get, BOB, "/", registry=registry)
    assert info.value.text == "connection limit (1) for user 'bob' reached"
    assert registry.count("bob") == 1
