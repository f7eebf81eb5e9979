"""Login throttling: the one home of the rules both protocols and the HTTP API apply to
failed logins.

REQUIREMENTS 9.1 asks that failed authentication be treated as a likely hostile
attempt: pause, then close, and flag clients that fail repeatedly. ``LoginThrottle`` is
the bookkeeping for that, shared by every listener, both protocols (0-9-1
``ServerConnection``, 1.0 ``Amqp10Engine``) and the management API. It never sleeps: it
says *when* an answer may go out, and the engines hold it back with their ``tick``
deadline.

The rules
---------
1. **Failures are counted per address and per claimed user name**, each over the last
   ``window`` seconds. A refusal is answered ``base_delay`` late once either count
   reaches ``max_failures``, doubling with every further failure, capped at
   ``max_delay``.
2. **A correct password is never refused because of its address.** An address's
   failures only hold back the refusals of that address: nothing is closed at accept or
   refused unchecked on the address's account, so one guesser behind a NAT or a proxy
   slows its own refusals and locks out nobody behind the same address. (Issue 41: the
   old per-address cap closed every new connection from the address at accept.)
3. **Guesses at one user are limited across addresses.** A delay alone does not limit
   guesses sent in parallel from many addresses (the guesser needs only the one answer
   that lets it in). So once a user name has ``max_failures`` failed or unfinished
   checks in the window, its password is checked at most once per delay (doubling with
   each check, up to ``max_delay``), from whatever address: ``check_attempt``, the gate
   the SASL mechanisms and the HTTP API call just before the deliberately slow password
   check, refuses the others unchecked (``LoginThrottled``). Rotating over 50 addresses
   then gives ``max_failures`` guesses per window and one per ``max_delay`` after them,
   where it used to give one guess per address per window. A check counts from the
   gate on (SCRAM checks its proof a round trip later), so parallel exchanges cannot all
   pass the gate before the first failure is counted.
4. **A user is not locked out of where it works from.** Rule 3 would let anyone who
   knows a user name keep that user out, so an address the user logged in from within
   ``trust_window`` is exempt: its attempts in that name are always checked. A failure in
   that name from such an address ends the exemption (a guesser behind the user's own
   NAT gets no free guesses). A success clears no count: the failures expire with the
   window (clearing them let anyone holding one valid login reset the count at will).
5. **Answers never outlive the handshake.** The refusal goes out at
   ``min(now + delay, answer_by)``, where the engine passes its handshake deadline as
   ``answer_by``; an address holds at most ``max_pending`` delayed answers (sockets) at
   once, and answers the rest at once. The HTTP API cannot hold an answer: it answers 429
   with ``Retry-After``.

IPv6 peers are counted by their /64 prefix (one host is usually given a whole /64, so
per-address counts would be trivial to dodge); IPv4-mapped IPv6 addresses count as the
IPv4 address.

Logs: ``log_refused_login`` writes the one line of a checked refusal (user, peer,
reason, delay). Refusals by rule 3 come as fast as a guesser sends them, so they go
through a ``RateLimitedLog`` (one line per interval, the rest counted by user name).

Memory is bounded: at most ``max_tracked`` addresses and as many user names (the least
recently failing forgotten first), ``max_failures + 16`` timestamps per entry,
``max_pending`` held answers per address and ``_MAX_TRUSTED`` trusted addresses per user.
Time is a parameter (``now``, seconds, any monotonic origin); this module never reads a
clock.
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
#: characters of a claimed user name a refusal's text repeats
_SHOWN_NAME = 64
#: addresses remembered per user as ones it logged in from (rule 4)
_MAX_TRUSTED = 32
#: the ``RateLimitedLog`` kind of logins refused unchecked (rule 3)
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
    ``delay``: the delay the rules asked for;
    ``address_failures`` / ``user_failures``: the counts in the window, this one included;
    ``capped``: the handshake deadline cut it short.
    """

    answer_at: float
    delay: float
    address_failures: int
    user_failures: int
    capped: bool = False


@dataclass(slots=True)
class _Address:
    failures: deque = field(default_factory=deque)
    #: release times of the answers held back
    holds: deque = field(default_factory=deque)


@dataclass(slots=True)
class _User:
    failures: deque = field(default_factory=deque)
    #: checks the gate let through whose outcome is not known yet (rule 3)
    checking: deque = field(default_factory=deque)
    #: no check before this, from an address that is not trusted (rule 3)
    next_check: float = 0.0
    #: address key -> when the user last logged in from it (rule 4)
    trusted: OrderedDict = field(default_factory=OrderedDict)


class LoginThrottle:
    """The rules of the module docstring over per-address and per-user state.

    ``address`` arguments are peer hosts (no port), ``peer`` arguments the ``host:port``
    text logs use. Raises ``ValueError`` at construction on non-positive limits.
    """

    def __init__(self, *, max_failures: int = 5, window: float = 60.0,
                 base_delay: float = 2.0, max_delay: float = 30.0, max_pending: int = 8,
                 trust_window: float = 86400.0, max_tracked: int = 10_000,
                 log_limit: RateLimitedLog | None = None) -> None:
        if max_failures < 1:
            raise ValueError("max_failures must be at least 1")
        if window <= 0 or base_delay < 0 or max_delay < base_delay:
            raise ValueError("window must be > 0 and 0 <= base_delay <= max_delay")
        if max_pending < 1:
            raise ValueError("max_pending must be at least 1")
        if max_tracked < 1:
            raise ValueError("max_tracked must be at least 1")
        if trust_window < 0:
            raise ValueError("trust_window must be >= 0")
        self.max_failures = max_failures
        self.window = window
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.max_pending = max_pending
        self.trust_window = trust_window
        self.max_tracked = max_tracked
        self.log_limit = log_limit if log_limit is not None else RateLimitedLog()
        self._addresses: OrderedDict[str, _Address] = OrderedDict()
        self._users: OrderedDict[str, _User] = OrderedDict()

    # ------------------------------------------------------------------ decisions
    def check_attempt(self, address: str, user: str | None, peer: str, now: float) -> None:
        """Just before the password of ``user`` is checked: raise ``LoginThrottled``
        (logged, rate-limited) when rule 3 refuses the check; else count the check as
        under way until ``refused`` or ``succeeded`` says how it ended."""
        if user is None:
            return
        record = self._user(user)
        self._count(record.checking, now)
        if not self._trusts(record, address, now):
            attempts = self._count(record.failures, now) + len(record.checking)
            if attempts >= self.max_failures:
                if now < record.next_check:
                    wait = record.next_check - now
                    self.log_limit.warning(
                        log, THROTTLED_KIND, now,
                        "login throttled: login of user %r from %s refused unchecked: %d failed "
                        "logins in its name in the window; its next check in %.0fs", user, peer,
                        attempts, wait, tally=f"refused unchecked for user {user[:_MAX_NAME]!r}")
                    shown = user if len(user) <= _SHOWN_NAME else user[:_SHOWN_NAME] + "..."
                    raise LoginThrottled(user, f"too many failed logins for user '{shown}'; "
                                               f"try again in {wait:.0f}s", record.next_check)
                record.next_check = now + self._delay(attempts + 1)
        record.checking.append(now)

    def refused(self, address: str, user: str | None, now: float, *,
                answer_by: float | None = None) -> LoginRefusal:
        """Record a checked login of ``user`` from ``address`` that failed; return when to
        answer it (rules 1, 4 and 5)."""
        record = self._address(address)
        record.failures.append(now)
        address_failures = self._count(record.failures, now)
        user_failures = 0
        if user is not None:
            times = self._user(user)
            if times.checking:
                times.checking.popleft()
            times.failures.append(now)
            times.trusted.pop(address_key(address), None)
            user_failures = self._count(times.failures, now)
        delay = self._delay(max(address_failures, user_failures))
        answer_at = now + delay
        capped = False
        if delay > 0.0:
            if self._count(record.holds, now, horizon=now) < self.max_pending:
                record.holds.append(now + delay)
            else:  # every socket the address may have held is held: this one goes now
                answer_at = now
        if answer_by is not None and answer_by < answer_at:
            answer_at, capped = max(now, answer_by), True
        return LoginRefusal(answer_at, delay, address_failures, user_failures, capped)

    def succeeded(self, address: str, user: str | None, now: float) -> None:
        """A login succeeded: trust ``address`` for ``user`` (rule 4); no count is cleared."""
        if user is None:
            return
        record = self._user(user)
        if record.checking:
            record.checking.popleft()
        key = address_key(address)
        record.trusted[key] = now
        record.trusted.move_to_end(key)
        while len(record.trusted) > _MAX_TRUSTED:
            record.trusted.popitem(last=False)

    # ------------------------------------------------------------------ state
    def failures(self, address: str, now: float) -> int:
        """Failures of ``address`` in ``(now - window, now]``."""
        record = self._addresses.get(address_key(address))
        return 0 if record is None else self._count(record.failures, now)

    def user_failures(self, user: str, now: float) -> int:
        """Failures in the name of ``user`` in ``(now - window, now]``."""
        record = self._users.get(user[:_MAX_NAME])
        return 0 if record is None else self._count(record.failures, now)

    def pending(self, address: str, now: float) -> int:
        """Answers of ``address`` held back at ``now``."""
        record = self._addresses.get(address_key(address))
        return 0 if record is None else self._count(record.holds, now, horizon=now)

    def prune(self, now: float) -> None:
        """Drop every entry with nothing left inside its window (call from a timer)."""
        for key in list(self._addresses):
            record = self._addresses[key]
            self._count(record.failures, now)
            self._count(record.holds, now, horizon=now)
            if not record.failures and not record.holds:
                del self._addresses[key]
        for name in list(self._users):
            user = self._users[name]
            self._count(user.failures, now)
            self._count(user.checking, now)
            for key in [k for k, t in user.trusted.items() if now - t >= self.trust_window]:
                del user.trusted[key]
            if not user.failures and not user.checking and not user.trusted:
                del self._users[name]

    def __len__(self) -> int:
        """Addresses tracked: at most ``max_tracked``."""
        return len(self._addresses)

    @property
    def users(self) -> list[str]:
        """The user names tracked, least recently failing first: at most ``max_tracked``,
        each cut to its first 256 characters (memory is bounded whatever names come)."""
        return list(self._users)

    def kept(self, address: str) -> tuple[int, int]:
        """Timestamps held for ``address``'s key: (failures, delayed answers), those expired
        but not dropped yet included; what memory holds, bounded by ``max_failures + 16``
        and ``max_pending``."""
        record = self._addresses.get(address_key(address))
        return (0, 0) if record is None else (len(record.failures), len(record.holds))

    # ------------------------------------------------------------------ internals
    def _delay(self, count: int) -> float:
        if count < self.max_failures:
            return 0.0
        return min(self.max_delay, self.base_delay * 2.0 ** min(count - self.max_failures, 64))

    def _trusts(self, record: _User, address: str, now: float) -> bool:
        since = record.trusted.get(address_key(address))
        return since is not None and now - since < self.trust_window

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

    def _user(self, user: str) -> _User:
        key = user[:_MAX_NAME]
        record = self._users.get(key)
        if record is None:
            size = self.max_failures + _EXTRA_FAILURES
            record = self._users[key] = _User(deque(maxlen=size), deque(maxlen=size))
            while len(self._users) > self.max_tracked:
                self._users.popitem(last=False)
        else:
            self._users.move_to_end(key)
        return record


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
