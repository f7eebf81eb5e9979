import pytest

from gateway.auth.passwords import hash_password
from gateway.auth.users import Permission, User, UserDirectory

HASH = hash_password("pw")


def test_directory_get_and_replace():
    alice, bob = User("alice", HASH), User("bob", None)
    users = UserDirectory([alice])
    assert users.get("alice") is alice
    assert users.get("bob") is None
    users.replace([bob])
    assert users.get("alice") is None
    assert users.get("bob") is bob
    assert users.names() == ["bob"]


def test_duplicate_names_rejected_and_old_set_kept():
    users = UserDirectory([User("a", None)])
    with pytest.raises(ValueError) as info:
        users.replace([User("b", None), User("b", None)])
    assert "duplicate user 'b'" in str(info.value)
    assert "a" in users and "b" not in users


def test_malformed_hash_rejected_at_construction():
    with pytest.raises(ValueError) as info:
        User("carol", "clear-text")
    assert "user 'carol'" in str(info.value)


def test_empty_name_rejected():
    with pytest.raises(ValueError):
        User("", None)


def test_bad_regex_rejected():
    with pytest.raises(ValueError) as info:
        Permission("(", ".*", ".*")
    assert "configure permission '('" in str(info.value)


def test_permissions_are_frozen_copies():
    perms = {"/": Permission(".*", ".*", ".*")}
    user = User("dave", None, permissions=perms)
    perms["other"] = Permission("", "", "")
    assert "other" not in user.permissions
    with pytest.raises(TypeError):
        user.permissions["x"] = Permission("", "", "")  # type: ignore[index]
    assert hash(user) == hash(User("dave", None, permissions={}))
