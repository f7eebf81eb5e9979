"""LoginThrottle: the rules of its module docstring, sans-I/O with explicit ``now``."""
import logging

import pytest

from gateway.auth.errors import LoginThrottled
from gateway.auth.throttle import THROTTLED_KIND, LoginThrottle, address_key, log_refused_login
from gateway.connection_log import RateLimitedLog

A, B = "10.0.0.1", "10.0.0.2"


def _fail(t: LoginThrottle, n: int, address: str = A, user: str | None = "u", now: float = 0.0):
    return [t.refused(address, user, now) for _ in range(n)]


def test_no_delay_below_threshold():
    t = LoginThrottle(max_failures=3, window=60, base_delay=2, max_delay=30)
    first, second = t.refused(A, "u", 0.0), t.refused(A, "u", 1.0)
    assert (first.delay, second.delay) == (0.0, 0.0)
    assert second.answer_at == 1.0 and t.pending(A, 1.0) == 0


def test_delay_after_threshold_doubles_and_caps():
    t = LoginThrottle(max_failures=3, window=60, base_delay=2, max_delay=10, max_pending=100)
    delays = [t.refused(A, None, float(i)).delay for i in range(6)]
    assert delays == [0.0, 0.0, 2.0, 4.0, 8.0, 10.0]
    assert t.refused(B, None, 6.0).delay == 0.0  # other addresses unaffected


def test_failures_expire_after_window():
    t = LoginThrottle(max_failures=2, window=10, base_delay=1, max_delay=5)
    t.refused(A, None, 0.0)
    assert t.refused(A, None, 5.0).delay == 1.0
    assert t.failures(A, 9.0) == 2
    assert t.failures(A, 10.0) == 1  # the failure at 0.0 left the window
    assert t.refused(A, None, 15.1).delay == 0.0  # 5.0 left too: this is the first again


# ------------------------------------------------------------------ rule 1: address and user

def test_failures_count_per_user_name_across_addresses():
    """A guesser spreading one name's guesses over many addresses is still slowed."""
    t = LoginThrottle(max_failures=3, window=60, base_delay=2, max_delay=30)
    delays = [t.refused(f"10.0.1.{i}", "alice", float(i)).delay for i in range(5)]
    assert delays == [0.0, 0.0, 2.0, 4.0, 8.0]
    assert t.user_failures("alice", 4.0) == 5 and t.failures("10.0.1.4", 4.0) == 1
    assert t.refused("10.0.1.9", "bob", 5.0).delay == 0.0  # another name: its own count


def test_failures_count_per_address_across_user_names():
    t = LoginThrottle(max_failures=3, window=60, base_delay=2, max_delay=30)
    delays = [t.refused(A, f"user{i}", float(i)).delay for i in range(4)]
    assert delays == [0.0, 0.0, 2.0, 4.0]


def test_the_larger_count_sets_the_delay():
    t = LoginThrottle(max_failures=2, window=60, base_delay=1, max_delay=30, max_pending=100)
    _fail(t, 4, address=B, user="alice")               # alice: 4 failures
    refusal = t.refused(A, "alice", 1.0)               # A: 1 failure, alice: 5
    assert (refusal.address_failures, refusal.user_failures) == (1, 5)
    assert refusal.delay == 8.0


# ------------------------------------------------------------------ rule 4: successes

def test_success_does_not_erase_the_address_failures():
    """The measured hole: one valid account reset the address's count at will."""
    t = LoginThrottle(max_failures=2, window=60, base_delay=3, max_delay=3)
    _fail(t, 2, user="victim")
    t.succeeded(A, "attacker", 1.0)
    assert t.failures(A, 1.0) == 2
    assert t.refused(A, "victim", 2.0).delay == 3.0


def test_success_clears_no_count():
    """Clearing a user's failures on success gave a distributed guesser fresh guesses after
    every genuine login; the trust of rule 4 takes that job."""
    t = LoginThrottle(max_failures=2, window=60, base_delay=3, max_delay=3)
    t.refused(A, "alice", 0.0)
    t.refused(B, "alice", 0.0)
    t.succeeded("10.9.9.9", "alice", 1.0)
    assert t.user_failures("alice", 1.0) == 2
    assert t.failures(A, 1.0) == 1 and t.failures(B, 1.0) == 1


# ------------------------------------------------------------------ rule 2: no NAT lock-out

def test_an_address_full_of_failures_never_refuses_a_check():
    """One guesser behind a NAT: 200 failures from the address, then its neighbour with
    a user of its own is still checked (and a wrong guess only answered late)."""
    t = LoginThrottle(max_failures=5, window=60, base_delay=5, max_delay=30, max_pending=8)
    for n in range(200):
        t.check_attempt(A, f"user{n}", "10.0.0.1:1", 0.0)
        t.refused(A, f"user{n}", 0.0)
    t.check_attempt(A, "neighbour", "10.0.0.1:2", 1.0)        # not refused
    t.succeeded(A, "neighbour", 1.0)
    assert t.pending(A, 1.0) == 8                             # held answers are bounded
    assert t.refused(A, "other", 2.0).answer_at == 2.0        # the ninth goes at once


# ------------------------------------------------------------------ rule 3: per user, any address

def _guesses(t: LoginThrottle, user: str, addresses: list[str], now: float) -> tuple[int, int]:
    checked = unchecked = 0
    for address in addresses:
        try:
            t.check_attempt(address, user, f"{address}:1", now)
        except LoginThrottled as exc:
            assert exc.user == user and exc.retry_at > now
            unchecked += 1
            continue
        t.refused(address, user, now)
        checked += 1
    return checked, unchecked


def test_rotating_addresses_gets_max_failures_guesses_then_one_per_delay():
    t = LoginThrottle(max_failures=5, window=60, base_delay=2, max_delay=30)
    rotation = [f"127.0.0.{n}" for n in range(1, 51)]
    assert _guesses(t, "root", rotation * 4, 0.0) == (6, 194)   # 5, then the one check due
    checked = sum(_guesses(t, "root", rotation, float(second))[0] for second in range(1, 601))
    # at most max_failures + 1 per window (as failures leave it, 5 more get by): 0.11/s,
    # where one guess per address per second used to be checked
    assert checked <= (600 // 60 + 1) * 6, checked


def test_parallel_checks_count_before_their_outcome():
    """SCRAM checks its proof a round trip after the gate: 100 exchanges started
    together pass the gate ``max_failures`` times, then one."""
    t = LoginThrottle(max_failures=5, window=60, base_delay=2, max_delay=30)
    passed = 0
    for n in range(100):
        try:
            t.check_attempt(f"127.0.0.{n % 50}", "root", "x:1", 0.0)
            passed += 1
        except LoginThrottled:
            pass
    assert passed == 6


def test_the_user_is_not_locked_out_of_an_address_it_logged_in_from():
    t = LoginThrottle(max_failures=2, window=60, base_delay=2, max_delay=30, trust_window=3600)
    t.check_attempt(A, "alice", "a:1", 0.0)
    t.succeeded(A, "alice", 0.0)
    _guesses(t, "alice", [f"127.0.1.{n}" for n in range(20)], 1.0)   # someone else, elsewhere
    with pytest.raises(LoginThrottled):
        t.check_attempt(B, "alice", "b:1", 1.0)
    t.check_attempt(A, "alice", "a:2", 1.0)                            # from where it works: checked
    t.succeeded(A, "alice", 1.0)
    t.check_attempt(A, "alice", "a:3", 2.0)
    t.refused(A, "alice", 2.0)                                         # a failure there ends the trust
    with pytest.raises(LoginThrottled):
        t.check_attempt(A, "alice", "a:4", 2.5)
    t.succeeded(B, "bob", 3.0)
    assert t.user_failures("bob", 3.0) == 0


def test_trust_expires():
    t = LoginThrottle(max_failures=1, window=10_000, base_delay=2, max_delay=30, trust_window=100)
    t.succeeded(A, "alice", 0.0)
    assert _guesses(t, "alice", [B, B, B], 99.0) == (2, 1)    # the next check due at 99 + 4
    t.check_attempt(A, "alice", "a:1", 99.5)                   # 99.5 s after its login: trusted
    with pytest.raises(LoginThrottled):
        t.check_attempt(A, "alice", "a:2", 100.5)              # 100.5 s after: no longer


def test_refusals_unchecked_are_logged_through_the_rate_limit(caplog):
    limit = RateLimitedLog(interval=10.0)
    t = LoginThrottle(max_failures=1, window=60, base_delay=5, max_delay=5, log_limit=limit)
    t.check_attempt(A, "root", "10.0.0.1:4000", 0.0)
    t.refused(A, "root", 0.0)
    t.check_attempt(A, "root", "10.0.0.1:4000", 0.0)  # the one check due
    caplog.set_level(logging.WARNING, logger="gateway.auth.throttle")
    for port in (4001, 4002, 4003):
        with pytest.raises(LoginThrottled):
            t.check_attempt(B, "root", f"10.0.0.2:{port}", 1.0)
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["login throttled: login of user 'root' from 10.0.0.2:4001 refused unchecked: "
                     "2 failed logins in its name in the window; its next check in 4s"]
    assert limit.left_out(THROTTLED_KIND) == 2
    limit.flush(11.0)
    assert caplog.records[-1].getMessage() == (
        "login-throttled: 2 more in the last 10s not logged: 2 refused unchecked for user 'root'")


# ------------------------------------------------------------------ rule 5: the deadline

def test_the_answer_never_goes_out_after_answer_by():
    t = LoginThrottle(max_failures=1, window=60, base_delay=30, max_delay=30, max_pending=8)
    refusal = t.refused(A, "u", 100.0, answer_by=108.0)
    assert refusal.answer_at == 108.0 and refusal.delay == 30.0 and refusal.capped
    late = t.refused(A, "u", 200.0, answer_by=150.0)      # deadline already past: at once
    assert late.answer_at == 200.0 and late.capped
    short = LoginThrottle(max_failures=1, base_delay=2, max_delay=2).refused(A, "u", 0.0, answer_by=10.0)
    assert short.answer_at == 2.0 and not short.capped


# ------------------------------------------------------------------ keys and bounds

@pytest.mark.parametrize("host,key", [
    ("192.0.2.7", "192.0.2.7"),
    ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),
    ("2001:db8:1:2:bbbb::9", "2001:db8:1:2::/64"),
    ("::ffff:192.0.2.7", "192.0.2.7"),
    ("not-an-ip", "not-an-ip"),
])
def test_address_key(host, key):
    assert address_key(host) == key


def test_ipv6_hosts_of_one_64_share_a_count():
    t = LoginThrottle(max_failures=2, window=60, base_delay=1, max_delay=1)
    t.refused("2001:db8::1", None, 0.0)
    assert t.refused("2001:db8::2", None, 0.0).delay == 1.0
    assert t.refused("2001:db8:0:1::1", None, 0.0).delay == 0.0  # another /64


def test_memory_is_bounded():
    t = LoginThrottle(max_failures=1, window=60, base_delay=1, max_delay=1, max_tracked=3,
                      max_pending=4)
    for i in range(10):
        t.refused(f"h{i}", f"user{i}", 0.0)
    assert len(t) == 3 and len(t.users) == 3
    assert t.failures("h0", 1.0) == 0  # oldest forgotten
    assert t.failures("h9", 1.0) == 1
    for _ in range(1000):
        t.refused("h9", "x" * 10_000, 0.5)
    assert t.kept("h9")[0] <= 1 + 16
    assert t.kept("h9")[1] <= 4
    assert max(len(name) for name in t.users) <= 256


def test_prune_drops_stale_entries():
    t = LoginThrottle(window=5, max_failures=1, base_delay=1, max_delay=1)
    t.refused(A, "a", 0.0)
    t.refused(B, "b", 4.0)
    t.prune(6.0)
    assert len(t) == 1 and t.users == ["b"]


@pytest.mark.parametrize("kwargs", [
    {"max_failures": 0}, {"window": 0}, {"base_delay": 5, "max_delay": 1}, {"max_tracked": 0},
    {"max_pending": 0},
])
def test_invalid_limits(kwargs):
    with pytest.raises(ValueError):
        LoginThrottle(**kwargs)


def test_the_refusal_line_names_user_peer_and_the_answer(caplog):
    caplog.set_level(logging.WARNING, logger="gateway.auth.throttle")
    t = LoginThrottle(max_failures=1, window=60, base_delay=30, max_delay=30)
    refusal = t.refused(A, "alice", 0.0, answer_by=10.0)
    log_refused_login(protocol="AMQP 1.0", mechanism="PLAIN", user="alice", peer="10.0.0.1:5000",
                      reason="invalid credentials", refusal=refusal, now=0.0)
    log_refused_login(protocol="AMQP 0-9-1", mechanism="", user=None, peer="10.0.0.2:5000",
                      reason="mechanism 'X' is not offered", refusal=None, now=0.0)
    assert [r.getMessage() for r in caplog.records] == [
        "login refused: user 'alice' from 10.0.0.1:5000 (AMQP 1.0, PLAIN): invalid credentials; "
        "answer held 10.0s (delay 30.0s cut to the handshake deadline); failures in the window: "
        "1 from the address, 1 for the user",
        "login refused: user None from 10.0.0.2:5000 (AMQP 0-9-1, no mechanism): mechanism 'X' "
        "is not offered; answered at once",
    ]


def test_a_refusal_repeats_at_most_64_characters_of_the_name():
    t = LoginThrottle(max_failures=1, window=60, base_delay=5, max_delay=5)
    name = "n" * 300
    _guesses(t, name, [A, A], 0.0)
    with pytest.raises(LoginThrottled) as info:
        t.check_attempt(B, name, "b:1", 1.0)
    assert f"user '{'n' * 64}...'" in info.value.reason and info.value.user == name
