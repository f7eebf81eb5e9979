"""Login throttling: the one home of the rules both protocols apply to failed logins.

REQUIREMENTS 9.1 asks that failed authentication be treated as a likely hostile
attempt: pause, then close, and flag clients that fail repeatedly. ``LoginThrottle`` is
the bookkeeping for that, shared by every listener and both protocols (0-9-1
``ServerConnection``, 1.0 ``Amqp10Engine``) and the edge. It never sleeps: it says *when*
an answer may go out, and the engines hold it back with their ``tick`` deadline.

The rules
---------
1. **Failures are counted per address and per claimed user name**, each over the last
   ``window`` seconds. The delay of a refusal is ``base_delay`` once either count reaches
   ``max_failures``, doubling with every further failure, capped at ``max_delay``: an
   address guessing many names and many addresses guessing one name are both slowed.
2. **A successful login does not erase the address's failures**: they expire only with
   the window. (Forgetting them on success let anyone holding one valid account reset
   the count at will between guesses.) A success clears the failures of *that user
   name*: only someone who knows the password can do that, and then there is nothing
   left to guess; the cost is that each genuine login of a user gives a distributed
   guesser ``max_failures`` undelayed guesses at that name again, still delayed per
   address.
3. **The delay is a rate, not just a wait.** A refusal that is delayed holds one of its
   address's ``max_pending`` slots for the full delay, whether or not the peer waits for
   the answer or hangs up. While every slot is held, new connections from the address
   are closed at accept (``admit_connection``, no protocol work) and logins already
   under way are refused *without checking the password* (``check_attempt``, the gate
   the SASL mechanisms call before the deliberately slow password check). So one
   address checks at most ``max_failures`` guesses fast and then at most ``max_pending``
   guesses per delay: with the defaults (5, 8 slots, 30 s) about 0.27 guesses/s, where
   200 parallel guesses used to be checked at once.
4. **User names never refuse without a check.** Anyone can fail logins in someone
   else's name, so a per-user cap would let anyone lock that user out; a user's
   failures only lengthen the delay of refusals (and so how long each holds its
   address's slot). A correct password is always let in unless its *address* is over
   its limit.
5. **Answers never outlive the handshake.** The refusal goes out at
   ``min(now + delay, answer_by)``, where the engine passes its handshake deadline as
   ``answer_by``: a delayed refusal is sent (and the connection closed) at the latest
   when the handshake would have timed out, so a held socket never lives longer than an
   idle one. The slot stays held for the full delay: the rate limit does not depend on
   the socket.

Addresses shared by many clients (NAT, a proxy) share one budget: a guesser behind
the same address slows its neighbours' *refusals*, and while its slots are all held
their new connections are refused too. IPv6 peers are counted by their /64 prefix (one
host is usually given a whole /64, so per-address counts would be trivial to dodge);
IPv4-mapped IPv6 addresses count as the IPv4 address.

Logs: ``log_refused_login`` writes the one line of a checked refusal (user, peer,
reason, delay). Refusals by rule 3 happen as fast as an attacker opens sockets, so they
go through a ``RateLimitedLog`` (one line per interval, the rest counted by address).

Memory is bounded: at most ``max_tracked`` addresses and as many user names (the least
recently failing forgotten first), ``max_failures + 16`` timestamps per entry and
``max_pending`` held slots per address. Time is a parameter (``now``, seconds, any
monotonic origin); this module never reads a clock.
"""

from __future__ import annotations

import ipaddress
import logging
from collections import OrderedDict, deque
from dataclasses import dataclass, field

from gateway.auth.errors import AuthenticationFailed, LoginThrottled
from gateway.connection_log import RateLimitedLog, about_connection

__all__ = ["LoginThrottle", "LoginRefusal", "address_key", "log_refused_login", "refuse_login",
           "THROTTLED_KIND"]

log = logging.getLogger(__name__)

# Failures remembered beyond the threshold; enough for the doubling to
# reach any sensible ``max_delay`` (2**16 times ``base_delay``).
_EXTRA_FAILURES = 16
#: characters of a claimed user name kept as a key (longer names are cut)
_MAX_NAME = 256
#: the ``RateLimitedLog`` kind of refusals by rule 3 (at accept, or unchecked)
THROTTLED_KIND = "login-throttled"


def address_key(host: str) -> str:
    """What failures are counted by: the IPv4 address, or an IPv6 /64 prefix."""
    if ":" not in host:
        return host
    try:
        address = ipaddress.IPv6Address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return host
    if address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(ipaddress.IPv6Network((address, 64), strict=False))


@dataclass(frozen=True, slots=True)
class LoginRefusal:
    """What the rules decided for one checked, refused login.

    ``answer_at``: when to send the refusal (never after the ``answer_by`` given);
    ``delay``: the delay the rules asked for (the address's slot is held that long);
    ``address_failures`` / ``user_failures``: the counts in the window, this one included;
    ``capped``: the handshake deadline cut the delay short.
    """

    answer_at: float
    delay: float
    address_failures: int
    user_failures: int
    capped: bool = False


@dataclass(slots=True)
class _Address:
    failures: deque = field(default_factory=deque)
    #: release times of the slots held by delayed refusals
    holds: deque = field(default_factory=deque)


class LoginThrottle:
    """The rules of the module docstring over per-address and per-user state.

    ``address`` arguments are peer hosts (no port), ``peer`` arguments the ``host:port``
    text logs use. Raises ``ValueError`` at construction on non-positive limits.
    """

    def __init__(self, *, max_failures: int = 5, window: float = 60.0,
                 base_delay: float = 2.0, max_delay: float = 30.0, max_pending: int = 8,
                 max_tracked: int = 10_000, log_limit: RateLimitedLog | None = None) -> None:
        if max_failures < 1:
            raise ValueError("max_failures must be at least 1")
        if window <= 0 or base_delay < 0 or max_delay < base_delay:
            raise ValueError("window must be > 0 and 0 <= base_delay <= max_delay")
        if max_pending < 1:
            raise ValueError("max_pending must be at least 1")
        if max_tracked < 1:
            raise ValueError("max_tracked must be at least 1")
        self.max_failures = max_failures
        self.window = window
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.max_pending = max_pending
        self.max_tracked = max_tracked
        self.log_limit = log_limit if log_limit is not None else RateLimitedLog()
        self._addresses: OrderedDict[str, _Address] = OrderedDict()
        self._users: OrderedDict[str, deque] = OrderedDict()

    # ------------------------------------------------------------------ decisions
    def admits(self, address: str, now: float) -> bool:
        """True while ``address`` holds fewer than ``max_pending`` slots (rule 3)."""
        return not self._addresses or self.pending(address, now) < self.max_pending

    def admit_connection(self, address: str, peer: str, now: float) -> bool:
        """At accept: ``admits``, logging a refusal (rate-limited) when it does not."""
        if self.admits(address, now):
            return True
        self.log_limit.warning(
            log, THROTTLED_KIND, now,
            "login throttled: connection from %s closed at accept: %d refused logins from "
            "this address are pending (limit %d)", peer, self.pending(address, now),
            self.max_pending, tally=f"closed at accept from {address_key(address)}")
        return False

    def check_attempt(self, address: str, user: str | None, peer: str, now: float) -> None:
        """Before a password is checked: raise ``LoginThrottled`` (logged, rate-limited)
        when every slot of ``address`` is held (rule 3)."""
        if self.admits(address, now):
            return
        pending = self.pending(address, now)
        self.log_limit.warning(
            log, THROTTLED_KIND, now,
            "login throttled: login of user %r from %s refused unchecked: %d refused logins "
            "from this address are pending (limit %d)", user, peer, pending, self.max_pending,
            tally=f"refused unchecked from {address_key(address)}")
        raise LoginThrottled(user, pending, self.max_pending)

    def refused(self, address: str, user: str | None, now: float, *,
                answer_by: float | None = None) -> LoginRefusal:
        """Record a checked login of ``user`` from ``address`` that failed; return when to
        answer it (rules 1, 3 and 5)."""
        record = self._address(address)
        record.failures.append(now)
        address_failures = self._count(record.failures, now)
        user_failures = 0
        if user is not None:
            times = self._user(user)
            times.append(now)
            user_failures = self._count(times, now)
        delay = self._delay(max(address_failures, user_failures))
        if delay > 0.0:
            self._count(record.holds, now, horizon=now)
            record.holds.append(now + delay)
        answer_at = now + delay
        capped = answer_by is not None and answer_by < answer_at
        if capped:
            answer_at = max(now, answer_by)  # type: ignore[arg-type]
        return LoginRefusal(answer_at, delay, address_failures, user_failures, capped)

    def succeeded(self, address: str, user: str | None, now: float) -> None:
        """A login succeeded: forget ``user``'s failures, never the address's (rule 2)."""
        if user is not None:
            self._users.pop(user[:_MAX_NAME], None)

    # ------------------------------------------------------------------ state
    def failures(self, address: str, now: float) -> int:
        """Failures of ``address`` in ``(now - window, now]``."""
        record = self._addresses.get(address_key(address))
        return 0 if record is None else self._count(record.failures, now)

    def user_failures(self, user: str, now: float) -> int:
        """Failures in the name of ``user`` in ``(now - window, now]``."""
        times = self._users.get(user[:_MAX_NAME])
        return 0 if times is None else self._count(times, now)

    def pending(self, address: str, now: float) -> int:
        """Slots of ``address`` held by delayed refusals at ``now``."""
        record = self._addresses.get(address_key(address))
        return 0 if record is None else self._count(record.holds, now, horizon=now)

    def slot_free_at(self, address: str, now: float) -> float:
        """When ``address`` next has a free slot: ``now`` if it has one (what an answer
        that cannot be held, HTTP's 429, gives as ``Retry-After``)."""
        if self.pending(address, now) < self.max_pending:
            return now
        return self._addresses[address_key(address)].holds[0]

    def prune(self, now: float) -> None:
        """Drop every entry with nothing left inside the window (call from a timer)."""
        horizon = now - self.window
        for key in list(self._addresses):
            record = self._addresses[key]
            self._count(record.failures, now)
            self._count(record.holds, now, horizon=now)
            if not record.failures and not record.holds:
                del self._addresses[key]
        for name in list(self._users):
            times = self._users[name]
            while times and times[0] <= horizon:
                times.popleft()
            if not times:
                del self._users[name]

    def __len__(self) -> int:
        return len(self._addresses)

    # ------------------------------------------------------------------ internals
    def _delay(self, count: int) -> float:
        if count < self.max_failures:
            return 0.0
        return min(self.max_delay, self.base_delay * 2.0 ** min(count - self.max_failures, 64))

    def _count(self, times: deque, now: float, *, horizon: float | None = None) -> int:
        """Drop the times at or before ``horizon`` (default: the window's start); count
        those at or before ``now`` (failures) or all that are left (holds)."""
        if horizon is None:
            limit = now - self.window
            while times and times[0] <= limit:
                times.popleft()
            return sum(1 for t in times if t <= now)
        while times and times[0] <= horizon:
            times.popleft()
        return len(times)

    def _address(self, address: str) -> _Address:
        key = address_key(address)
        record = self._addresses.get(key)
        if record is None:
            record = _Address(deque(maxlen=self.max_failures + _EXTRA_FAILURES),
                              deque(maxlen=self.max_pending))
            self._addresses[key] = record
            while len(self._addresses) > self.max_tracked:
                self._addresses.popitem(last=False)
        else:
            self._addresses.move_to_end(key)
        return record

    def _user(self, user: str) -> deque:
        key = user[:_MAX_NAME]
        times = self._users.get(key)
        if times is None:
            times = self._users[key] = deque(maxlen=self.max_failures + _EXTRA_FAILURES)
            while len(self._users) > self.max_tracked:
                self._users.popitem(last=False)
        else:
            self._users.move_to_end(key)
        return times


def log_refused_login(*, protocol: str, mechanism: str, user: str | None, peer: str,
                      reason: str, refusal: LoginRefusal | None, now: float,
                      connection_id: int | None = None) -> None:
    """The one line each checked, refused login gets (both protocols)."""
    if refusal is None or refusal.answer_at <= now:
        answer = "answered at once"
    else:
        answer = f"answer held {refusal.answer_at - now:.1f}s"
        if refusal.capped:
            answer += f" (delay {refusal.delay:.1f}s cut to the handshake deadline)"
    counts = ""
    if refusal is not None:
        counts = (f"; failures in the window: {refusal.address_failures} from the address, "
                  f"{refusal.user_failures} for the user")
    log.warning("login refused: user %r from %s (%s, %s): %s; %s%s",
                user, peer, protocol, mechanism or "no mechanism", reason, answer, counts,
                extra=about_connection(connection_id))


def refuse_login(throttle: LoginThrottle | None, exc: AuthenticationFailed, *, address: str,
                 peer: str, user: str | None, protocol: str, mechanism: str, now: float,
                 answer_by: float | None, connection_id: int | None = None) -> float:
    """What both engines do with a refused login: record it (unless the throttle refused
    it unchecked, which it logged itself), log it once, and return when to answer it
    (``now`` for at once). ``answer_by`` is the engine's handshake deadline."""
    if isinstance(exc, LoginThrottled):
        return now
    refusal = None
    if throttle is not None:
        refusal = throttle.refused(address, user, now, answer_by=answer_by)
    log_refused_login(protocol=protocol, mechanism=mechanism, user=user, peer=peer,
                      reason=exc.reason, refusal=refusal, now=now, connection_id=connection_id)
    return refusal.answer_at if refusal is not None else now
