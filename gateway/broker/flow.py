"""Flow control: consumer credit windows and the producer gate (memory alarm).

CreditWindow
    One answer to "how many more deliveries may this consumer take", for both protocols.

    * Prefetch mode (0-9-1 ``basic.qos``): ``limit`` unacknowledged deliveries, 0 meaning
      unlimited. The queue calls :meth:`consume_one` when it hands a message over; the
      protocol calls :meth:`settle_one` when the delivery is acked/rejected, then
      ``queue.dispatch(now)``. A window may have a ``parent`` (the channel-global window
      of ``basic.qos(global=True)``): a delivery counts against both, and credit is the
      smaller of the two.
    * Credit mode (1.0 link credit): :meth:`grant` sets the credit the receiver gave
      (1.0 flow frames carry absolute credit), then ``queue.dispatch(now)``; each delivery
      uses one; settlement does not give credit back. ``drain`` asks the sender to use up
      or drop the credit; after a dispatch the link calls :meth:`drain_all` to drop what
      is left.
    * Whoever makes a window grow (settle, grant, a new limit, a parent that changes)
      dispatches the queues it feeds: a queue whose last dispatch found no credit skips
      the dispatch on a publish until its next one (``queues``: stalled for credit).

ProducerGate
    Tracks the body bytes held by all queues. Above ``high_watermark`` bytes producers are
    blocked: registered :class:`BlockListener` objects get ``blocked(reason)`` once, and
    ``unblocked()`` once usage falls to the low mark, ``low_ratio`` of the high one (0-9-1
    sends connection.blocked/unblocked, 1.0 withholds link credit).

    Hysteresis: clearing the alarm at the high mark itself made a slow consumer flip it
    for every message (each ack made room for one publish, which set it again: about
    1,650 flips and 4,460 log lines a minute). Between the two marks the alarm keeps its
    state, so a flip needs ``(1 - low_ratio) * high_watermark`` bytes consumed or
    published. RabbitMQ gets a similar damping from sampling memory every few seconds; a
    byte count is exact, so the gap is explicit (``memory_low_watermark_ratio``, 0.9 by
    default). Only transitions are logged, one line each.

PublishFlow
    Back-pressure from one destination toward the connections that publish into it
    (RabbitMQ's credit flow, whose ``flow`` state stops reading a publishing connection
    while a process downstream is behind). The destination (a forwarder: its entries not
    yet sent while its link is up) reports its backlog with :meth:`PublishFlow.update`;
    above ``bound`` the flow is paused, and it resumes once the backlog is down to half
    the bound (hysteresis: a flip per message would cost a pause and a resume each). A
    publish that reaches a paused flow leaves it in ``Broker.paused_flow``; the protocol
    that made the publish takes it from there (``Broker.take_paused_flow``) and stops taking publishes from
    that client (0-9-1: stops reading the connection after this publish; 1.0: withholds
    link credit) until the flow calls it back (:meth:`PublishFlow.wait`). Unlike the
    memory alarm it blocks only the publishers of that one destination, and says nothing
    on the wire (RabbitMQ sends no connection.blocked for flow either).

    Other resource alarms (free disk space below the limit, a store that cannot write)
    block producers the same way through :meth:`ProducerGate.set_alarm`; producers are
    released once no alarm is raised and memory is at or below the low mark.
"""
from __future__ import annotations

import enum
import logging
from typing import Callable, Optional, Protocol

__all__ = ["CreditMode", "CreditWindow", "BlockListener", "ProducerGate", "PublishFlow"]

log = logging.getLogger(__name__)

_UNLIMITED = 1 << 62


class CreditMode(enum.Enum):
    PREFETCH = "prefetch"  # count of outstanding (unsettled) deliveries, 0 = unlimited
    CREDIT = "credit"  # 1.0 link credit, granted explicitly


# The methods below run for every delivery and settlement (twice with a parent window):
# a member read through its enum class is an extra lookup, so they compare with these.
_PREFETCH, _CREDIT = CreditMode.PREFETCH, CreditMode.CREDIT


class CreditWindow:
    """A delivery window; see the module docstring for the two modes."""

    __slots__ = ("mode", "_limit", "outstanding", "_credit", "drain", "parent")

    def __init__(
        self,
        limit: int = 0,
        *,
        parent: Optional["CreditWindow"] = None,
        mode: CreditMode = CreditMode.PREFETCH,
    ) -> None:
        if limit < 0:
            raise ValueError("limit must be >= 0")
        self.mode = mode
        self._limit = limit
        #: prefetch mode: deliveries handed over and not yet settled
        self.outstanding = 0
        #: credit mode: deliveries still allowed
        self._credit = limit if mode is CreditMode.CREDIT else 0
        #: credit mode: the receiver asked us to drain
        self.drain = False
        self.parent = parent

    @classmethod
    def prefetch(cls, count: int = 0, *, parent: Optional["CreditWindow"] = None) -> "CreditWindow":
        """A 0-9-1 prefetch window of ``count`` messages (0 = unlimited)."""
        return cls(count, parent=parent, mode=CreditMode.PREFETCH)

    @classmethod
    def link_credit(cls, credit: int = 0) -> "CreditWindow":
        """A 1.0 link-credit window starting at ``credit``."""
        return cls(credit, mode=CreditMode.CREDIT)

    @property
    def limit(self) -> int:
        """Prefetch limit (0 = unlimited); in credit mode, the last granted credit."""
        return self._limit

    @limit.setter
    def limit(self, value: int) -> None:
        """Change the prefetch limit; outstanding deliveries stay counted (like
        RabbitMQ, lowering it below ``outstanding`` just stops new deliveries)."""
        if value < 0:
            raise ValueError("limit must be >= 0")
        self._limit = value

    def available(self) -> int:
        """How many more deliveries may go out now (a large int when unlimited)."""
        if self.mode is _CREDIT:
            own = self._credit
        elif self._limit == 0:
            own = _UNLIMITED
        else:
            own = self._limit - self.outstanding
            if own < 0:
                own = 0
        parent = self.parent
        if parent is not None:
            p = parent.available()
            if p < own:
                return p
        return own

    def has_credit(self) -> bool:
        """``available() > 0``, on the hot path: the chain of windows walked in one call."""
        window: Optional[CreditWindow] = self
        while window is not None:
            if window.mode is _CREDIT:
                if window._credit <= 0:
                    return False
            elif window._limit and window.outstanding >= window._limit:
                return False
            window = window.parent
        return True

    def consume_one(self) -> None:
        """Record one delivery handed over (called by the queue), in this window and the
        ones above it."""
        window: Optional[CreditWindow] = self
        while window is not None:
            if window.mode is _CREDIT:
                window._credit -= 1
            else:
                window.outstanding += 1
            window = window.parent

    def settle_one(self, count: int = 1) -> None:
        """Record ``count`` deliveries settled (called by the protocol).

        Frees prefetch room in this window and the ones above it; credit mode only passes
        it on (1.0 credit is not returned by settlement).
        """
        window: Optional[CreditWindow] = self
        while window is not None:
            if window.mode is _PREFETCH:
                outstanding = window.outstanding - count
                window.outstanding = outstanding if outstanding > 0 else 0
            window = window.parent

    def grant(self, credit: int, *, drain: bool = False) -> None:
        """Credit mode: set the link credit to ``credit`` (absolute, as 1.0 flow does)."""
        if credit < 0:
            raise ValueError("credit must be >= 0")
        self._credit = credit
        self._limit = credit
        self.drain = drain

    @property
    def credit(self) -> int:
        """Credit mode: the remaining link credit."""
        return self._credit

    def drain_all(self) -> int:
        """Credit mode: drop the remaining credit (end of a drain); returns how much was
        dropped so the link can advance its delivery-count. Clears ``drain``."""
        dropped = self._credit
        self._credit = 0
        self.drain = False
        return dropped

    def __repr__(self) -> str:
        if self.mode is _CREDIT:
            return f"CreditWindow(credit={self._credit}, drain={self.drain})"
        return f"CreditWindow(prefetch={self._limit}, outstanding={self.outstanding})"


class BlockListener(Protocol):
    """Told when producers must stop and may resume (registered by each connection)."""

    def blocked(self, reason: str) -> None: ...

    def unblocked(self) -> None: ...


class ProducerGate:
    """Memory accounting: body bytes held by queues against ``high_watermark``.

    ``high_watermark`` is in bytes; ``None`` disables blocking (bytes are still counted).
    ``low_ratio`` (0 < r <= 1) sets the low mark at which a raised alarm clears.
    ``add``/``sub`` are called by queues on the hot path: an int update and a compare.
    Raises ``ValueError`` on a ``low_ratio`` outside (0, 1].

    Producers are blocked while the memory alarm (``memory_alarm``) or any named alarm
    (``alarms``: ``disk``, ``store``) is raised; every alarm logs its own name when it is
    set and cleared, and says whether producers are unblocked or stay blocked by others.
    """

    __slots__ = ("used", "high_watermark", "low_watermark", "low_ratio", "blocked", "transitions",
                 "_listeners", "alarms", "memory_alarm")

    def __init__(self, high_watermark: Optional[int] = None, low_ratio: float = 0.9) -> None:
        if not 0.0 < low_ratio <= 1.0:
            raise ValueError("low_ratio must be above 0.0 and at most 1.0")
        self.used = 0
        self.low_ratio = low_ratio
        self.high_watermark = high_watermark
        #: bytes at or below which a raised alarm clears (None: never raised)
        self.low_watermark = self._low_mark(high_watermark)
        #: producers are blocked (by memory or by a named alarm)
        self.blocked = False
        #: the memory alarm is raised (memory above the high mark, not yet at the low one)
        self.memory_alarm = False
        #: producer transitions so far (each block and each unblock counts one)
        self.transitions = 0
        self._listeners: list[BlockListener] = []
        #: raised alarms other than memory: name -> reason
        self.alarms: dict[str, str] = {}

    def add_listener(self, listener: BlockListener) -> None:
        """Register ``listener``; if producers are blocked right now it is told at once."""
        self._listeners.append(listener)
        if self.blocked:
            listener.blocked(next(iter(self.alarms.values())) if self.alarms else self.reason())

    @property
    def listener_count(self) -> int:
        """Listeners registered: one per 0-9-1 connection while it lives (a closed
        connection's left behind would be told of blocks, and kept alive, for ever)."""
        return len(self._listeners)

    def remove_listener(self, listener: BlockListener) -> None:
        """Forget ``listener``; unknown listeners are ignored."""
        try:
            self._listeners.remove(listener)
        except ValueError:
            pass

    def reason(self) -> str:
        if self.alarms:
            return "; ".join(self.alarms.values())
        return self._memory_reason()

    def _memory_reason(self) -> str:
        return (f"memory high watermark reached ({self.used} of {self.high_watermark} bytes; "
                f"clears at {self.low_watermark})")

    def add(self, nbytes: int) -> None:
        self.used += nbytes
        hw = self.high_watermark
        if hw is not None and not self.memory_alarm and self.used > hw:
            self._set_memory(True)

    def sub(self, nbytes: int) -> None:
        self.used -= nbytes
        lw = self.low_watermark
        if self.memory_alarm and (lw is None or self.used <= lw):
            self._set_memory(False)

    def set_high_watermark(self, high_watermark: Optional[int]) -> None:
        """Change the mark (e.g. on config reload) and notify if the state changes."""
        self.high_watermark = high_watermark
        self.low_watermark = self._low_mark(high_watermark)
        if high_watermark is None:
            should = False
        elif self.memory_alarm:
            should = self.used > self.low_watermark  # type: ignore[operator]
        else:
            should = self.used > high_watermark
        if should != self.memory_alarm:
            self._set_memory(should)

    def _low_mark(self, high_watermark: Optional[int]) -> Optional[int]:
        return None if high_watermark is None else int(high_watermark * self.low_ratio)

    def set_alarm(self, name: str, reason: Optional[str]) -> None:
        """Raise alarm ``name`` (``reason`` says why, for the listeners and the log) or,
        with ``None``, clear it. Producers stay blocked while any alarm is raised, the
        memory alarm included."""
        if reason is None:
            if self.alarms.pop(name, None) is None:
                return
            self._changed(f"{name} alarm cleared", None)
            return
        if self.alarms.get(name) == reason:
            return
        self.alarms[name] = reason
        self._changed(f"{name} alarm set", reason)

    def _set_memory(self, raised: bool) -> None:
        self.memory_alarm = raised
        if raised:
            self._changed("memory alarm set", self._memory_reason())
        else:
            self._changed("memory alarm cleared", None,
                          f"{self.used} bytes queued, at or below the low mark {self.low_watermark}")

    def _changed(self, what: str, reason: Optional[str], detail: str = "") -> None:
        """An alarm was set (``reason``) or cleared (None): log it in its own words, and
        block or unblock producers if that changes."""
        blocked = self.memory_alarm or bool(self.alarms)
        if blocked == self.blocked:
            others = [name for name in self.alarms] + (["memory"] if self.memory_alarm else [])
            if reason is not None:
                log.warning("%s: %s (producers were blocked already)", what, reason)
            elif blocked:
                log.warning("%s; producers stay blocked by: %s", what, ", ".join(others))
            return
        self.blocked = blocked
        self.transitions += 1
        if blocked:
            log.warning("%s, blocking producers: %s", what, reason)
            for listener in list(self._listeners):
                listener.blocked(reason or self.reason())
        else:
            log.warning("%s, unblocking producers%s", what, f": {detail}" if detail else "")
            for listener in list(self._listeners):
                listener.unblocked()


class PublishFlow:
    """See "PublishFlow" in the module docstring. ``bound``: the backlog above which
    publishers pause (0: never); ``name``: what the log calls the destination."""

    __slots__ = ("bound", "name", "paused", "pauses", "_waiters")

    def __init__(self, bound: int, name: str = "") -> None:
        if bound < 0:
            raise ValueError("bound must be >= 0")
        self.bound = bound
        self.name = name
        #: publishers into this destination are to stop
        self.paused = False
        #: times the flow paused so far (for operators and tests)
        self.pauses = 0
        self._waiters: list[Callable[[], None]] = []

    def update(self, backlog: int) -> None:
        """The destination's backlog is ``backlog``: pause above the bound, resume the
        waiting publishers at half of it or below."""
        if self.paused:
            if backlog <= self.bound // 2:
                self.release()
        elif self.bound and backlog > self.bound:
            self.paused = True
            self.pauses += 1
            log.debug("publishers to %s paused: %d waiting to be sent", self.name, backlog)

    def release(self) -> None:
        """Resume every waiting publisher (the backlog drained, or the destination can no
        longer drain it: a remote that is down never holds its publishers back)."""
        self.paused = False
        waiters, self._waiters = self._waiters, []
        for resume in waiters:
            resume()

    def wait(self, resume: Callable[[], None]) -> None:
        """Call ``resume()`` once the flow is no longer paused (at once if it is not)."""
        if self.paused:
            self._waiters.append(resume)
        else:
            resume()

    def cancel(self, resume: Callable[[], None]) -> None:
        """Forget ``resume`` (its publisher went before the flow resumed)."""
        try:
            self._waiters.remove(resume)
        except ValueError:
            pass

    @property
    def waiting(self) -> int:
        """Publishers waiting for this flow to resume."""
        return len(self._waiters)
