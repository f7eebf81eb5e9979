"""ConnectionRegistry: per-user counts, limit resolution, idempotent release."""
from __future__ import annotations

import pytest

from gateway.auth.limits import (
    ConnectionLimitReached,
    ConnectionRegistry,
    ListenerAdmission,
    ListenerLimitReached,
    ListenerSlots,
    UserLimits,
    VhostLimitReached,
    cap_channel_max,
)


def test_default_limit_applies_to_every_user():
    registry = ConnectionRegistry(default_max_connections=2)
    registry.admit("bob")
    registry.admit("bob")
    with pytest.raises(ConnectionLimitReached) as info:
        registry.admit("bob")
    assert info.value.text == "connection limit (2) for user 'bob' reached"
    assert (info.value.user, info.value.limit) == ("bob", 2)
    assert registry.count("bob") == 2
    registry.admit("carol")
    assert registry.count("carol") == 1


def test_own_limit_wins_over_the_default_and_zero_is_unlimited():
    registry = ConnectionRegistry(default_max_connections=5,
                                  per_user={"bob": UserLimits(max_connections=1, max_channels=3)})
    assert registry.limits_for("bob") == UserLimits(1, 3)
    assert registry.limits_for("carol") == UserLimits(5, 0)
    registry.admit("bob")
    with pytest.raises(ConnectionLimitReached):
        registry.admit("bob")
    unlimited = ConnectionRegistry()
    for _ in range(100):
        unlimited.admit("x")
    assert unlimited.count("x") == 100


def test_explicit_limit_overrides_the_resolved_one():
    registry = ConnectionRegistry(default_max_connections=1)
    registry.admit("bob", limit=0)
    registry.admit("bob", limit=0)
    with pytest.raises(ConnectionLimitReached):
        registry.admit("bob", limit=2)


def test_release_gives_the_slot_back_once():
    registry = ConnectionRegistry(default_max_connections=1)
    token = registry.admit("bob")
    registry.release(token)
    registry.release(token)
    registry.release(None)
    assert registry.count("bob") == 0 and len(registry) == 0
    other = registry.admit("bob")
    registry.release(token)  # stale token must not free the new connection's slot
    assert registry.count("bob") == 1
    registry.release(other)
    assert list(registry.users()) == []


def test_refused_admission_counts_nothing():
    registry = ConnectionRegistry(default_max_connections=1)
    registry.admit("bob")
    with pytest.raises(ConnectionLimitReached):
        registry.admit("bob")
    assert registry.count("bob") == 1 and len(registry) == 1


def test_replace_limits_keeps_open_connections():
    registry = ConnectionRegistry(per_user={"bob": UserLimits(max_connections=3)})
    registry.admit("bob")
    registry.admit("bob")
    registry.replace_limits({"bob": UserLimits(max_connections=1)})
    assert registry.count("bob") == 2
    with pytest.raises(ConnectionLimitReached):
        registry.admit("bob")


def test_negative_default_is_refused():
    with pytest.raises(ValueError, match="negative"):
        ConnectionRegistry(default_max_connections=-1)


@pytest.mark.parametrize("listener, user, expected", [
    (2047, 0, 2047), (2047, 5, 5), (3, 5, 3), (0, 7, 7), (0, 0, 0)])
def test_cap_channel_max(listener, user, expected):
    assert cap_channel_max(listener, user) == expected


def test_listener_admission_refuses_a_full_listener_naming_it():
    registry = ConnectionRegistry()
    slots = ListenerSlots("edge", 2)
    a, b = ListenerAdmission(registry, slots), ListenerAdmission(registry, slots)
    first, second = a.admit("bob"), b.admit("carol")
    with pytest.raises(ConnectionLimitReached) as info:      # what the engines catch
        a.admit("dave")
    assert isinstance(info.value, ListenerLimitReached)
    assert info.value.text == "connection limit (2) of listener 'edge' reached"
    assert registry.count("dave") == 0 and slots.count == 2  # nothing counted
    a.release(first)
    a.release(first)                                         # idempotent
    assert slots.count == 1 and registry.count("bob") == 0
    third = b.admit("dave")
    assert registry.count("dave") == 1 and slots.count == 2
    b.release(third)
    b.release(second)
    assert slots.count == 0 and len(registry) == 0


def test_listener_admission_keeps_the_user_limit_and_counts_only_admitted():
    registry = ConnectionRegistry(per_user={"bob": UserLimits(max_connections=1, max_channels=4)})
    slots = ListenerSlots("edge", 5)
    adm = ListenerAdmission(registry, slots)
    adm.admit("bob")
    with pytest.raises(ConnectionLimitReached) as info:
        adm.admit("bob")
    assert not isinstance(info.value, ListenerLimitReached)
    assert "for user 'bob'" in info.value.text
    assert slots.count == 1                                   # the refused one holds no slot
    assert adm.limits_for("bob") == UserLimits(1, 4)
    assert adm.count("bob") == 1                              # the rest is the registry's


def test_unlimited_listener_and_other_listeners_tokens():
    registry = ConnectionRegistry()
    unlimited, other = ListenerSlots("a", 0), ListenerSlots("b", 1)
    tokens = [ListenerAdmission(registry, unlimited).admit("bob") for _ in range(100)]
    assert not unlimited.full and unlimited.count == 100
    ListenerAdmission(registry, other).release(tokens[0])    # not b's: b stays empty
    assert other.count == 0 and not other.full
    with pytest.raises(ValueError):
        ListenerSlots("c", -1)


def test_a_vhost_connection_limit_counts_every_user_and_frees_on_release() -> None:
    limits = {"small": 2, "none": 0}
    registry = ConnectionRegistry(vhost_limit=limits.get)
    a = registry.admit("alice", vhost="small")
    registry.admit("bob", vhost="small")
    with pytest.raises(VhostLimitReached) as info:
        registry.admit("carol", vhost="small")
    assert info.value.text == ("access to vhost 'small' refused for user 'carol': connection limit (2) "
                               "is reached")
    assert isinstance(info.value, ConnectionLimitReached)   # the engines' one refusal path
    assert registry.count("carol") == 0 and registry.vhost_count("small") == 2
    registry.release(a)
    registry.admit("carol", vhost="small")
    with pytest.raises(VhostLimitReached):
        registry.admit("dave", vhost="none")   # 0: no connection at all
    registry.admit("dave", vhost="other")     # no limit there
    assert registry.vhost_count("other") == 1
