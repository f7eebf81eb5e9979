"""admit_to_vhost / check_vhost_access: the vhost admission both protocols share (the
vhost exists, then the user may use it), with the texts sent to the peer."""
from __future__ import annotations

import pytest

from gateway.auth.users import Permission, User
from gateway.auth.vhost_admission import (VhostAccessRefused, VhostNotFound, admit_to_vhost,
                                          check_vhost_access, vhost_access_refusal)

VHOSTS = {"/": "root vhost", "other": "other vhost"}
BOB = User("bob", None, permissions={"/": Permission(".*", ".*", ".*")})


def test_admits_to_an_existing_vhost_the_user_may_use() -> None:
    assert admit_to_vhost(VHOSTS.get, BOB, "/") == "root vhost"
    check_vhost_access(BOB, "/")


def test_a_missing_vhost_is_refused_before_access_is_looked_at() -> None:
    stranger = User("stranger", None, permissions={})
    with pytest.raises(VhostNotFound) as info:
        admit_to_vhost(VHOSTS.get, stranger, "nope")
    assert (info.value.name, info.value.text) == ("nope", "vhost 'nope' not found")


def test_a_vhost_without_permissions_is_refused() -> None:
    with pytest.raises(VhostAccessRefused) as info:
        admit_to_vhost(VHOSTS.get, BOB, "other")
    assert info.value.text == "access to vhost 'other' refused for user 'bob'"
    assert info.value.text == vhost_access_refusal("other", "bob")
    with pytest.raises(VhostAccessRefused):
        check_vhost_access(BOB, "proxied")   # a proxied vhost: not ours, access still checked


def test_the_listeners_own_access_check_replaces_the_permission_table() -> None:
    assert admit_to_vhost(VHOSTS.get, BOB, "other", may_access=lambda user, name: True) == "other vhost"
    with pytest.raises(VhostAccessRefused):
        check_vhost_access(BOB, "/", may_access=lambda user, name: False)
