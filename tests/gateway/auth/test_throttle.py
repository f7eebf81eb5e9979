import pytest

from gateway.auth.throttle import LoginThrottle


def test_no_delay_below_threshold():
    t = LoginThrottle(max_failures=3, window=60, base_delay=2, max_delay=30)
    t.record_failure("10.0.0.1", 0.0)
    t.record_failure("10.0.0.1", 1.0)
    assert t.delay_for("10.0.0.1", 2.0) == 0.0
    assert not t.is_flagged("10.0.0.1", 2.0)


def test_delay_after_threshold_doubles_and_caps():
    t = LoginThrottle(max_failures=3, window=60, base_delay=2, max_delay=10)
    for i in range(3):
        t.record_failure("a", float(i))
    assert t.delay_for("a", 3.0) == 2.0
    t.record_failure("a", 4.0)
    assert t.delay_for("a", 4.0) == 4.0
    t.record_failure("a", 5.0)
    assert t.delay_for("a", 5.0) == 8.0
    t.record_failure("a", 6.0)
    assert t.delay_for("a", 6.0) == 10.0
    assert t.delay_for("b", 6.0) == 0.0  # other addresses unaffected


def test_failures_expire_after_window():
    t = LoginThrottle(max_failures=2, window=10, base_delay=1, max_delay=5)
    t.record_failure("a", 0.0)
    t.record_failure("a", 5.0)
    assert t.delay_for("a", 9.0) == 1.0
    assert t.delay_for("a", 10.0) == 0.0  # the failure at 0.0 left the window
    assert t.delay_for("a", 15.0) == 0.0
    assert len(t) == 0


def test_success_forgets_failures():
    t = LoginThrottle(max_failures=1, window=60, base_delay=3, max_delay=3)
    t.record_failure("a", 0.0)
    assert t.delay_for("a", 1.0) == 3.0
    t.record_success("a", 2.0)
    assert t.delay_for("a", 2.0) == 0.0


def test_memory_is_bounded():
    t = LoginThrottle(max_failures=1, window=60, base_delay=1, max_delay=1, max_addresses=3)
    for i in range(10):
        t.record_failure(f"h{i}", 0.0)
    assert len(t) == 3
    assert t.delay_for("h0", 1.0) == 0.0  # oldest forgotten
    assert t.delay_for("h9", 1.0) == 1.0
    for _ in range(1000):
        t.record_failure("h9", 0.5)
    assert len(t._failures["h9"]) <= 1 + 16


def test_prune_drops_stale_addresses():
    t = LoginThrottle(window=5)
    t.record_failure("a", 0.0)
    t.record_failure("b", 4.0)
    t.prune(6.0)
    assert len(t) == 1


@pytest.mark.parametrize("kwargs", [
    {"max_failures": 0}, {"window": 0}, {"base_delay": 5, "max_delay": 1}, {"max_addresses": 0},
])
def test_invalid_limits(kwargs):
    with pytest.raises(ValueError):
        LoginThrottle(**kwargs)
