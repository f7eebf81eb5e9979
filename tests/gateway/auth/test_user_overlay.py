"""The users in effect (``gateway/auth/user_overlay.py``): the config's, with run-time
changes on top, each change keeping what it did not set."""
from __future__ import annotations

from gateway.auth import Permission, User
from gateway.auth.user_overlay import UserChange, overlay_users
from tests.support.gateway_process import password_hash

ALL = Permission(".*", ".*", ".*")
NONE = Permission("", "", "")


def test_run_time_changes_win_and_keep_what_they_did_not_set() -> None:
    base = [User("alice", password_hash("a"), ("management",), {"/": ALL, "v2": ALL}, loopback_only=True),
            User("carol", password_hash("c"))]
    users = {"alice": UserChange(password_hash("new"), ("administrator",)),
             "carol": None,
             "dave": UserChange(None, ())}
    permissions = {("alice", "v2"): None, ("alice", "v3"): NONE, ("dave", "/"): ALL}
    by_name = {u.name: u for u in overlay_users(base, users, permissions)}
    assert set(by_name) == {"alice", "dave"}
    alice = by_name["alice"]
    assert alice.tags == ("administrator",) and alice.loopback_only   # the config's flag kept
    assert alice.password_hash == users["alice"].password_hash
    assert dict(alice.permissions) == {"/": ALL, "v3": NONE}
    assert dict(by_name["dave"].permissions) == {"/": ALL} and by_name["dave"].password_hash is None


def test_a_run_time_guest_may_log_in_from_loopback_only_as_rabbitmq_s() -> None:
    [guest, other] = overlay_users([], {"guest": UserChange(None), "other": UserChange(None)}, {})
    assert (guest.name, guest.loopback_only, other.loopback_only) == ("guest", True, False)
