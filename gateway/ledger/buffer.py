"""The hot-path half of a ledger: ``record(...)`` and ``append(record)`` append to a list.

Both ledgers the gateway can run with share it: ``LedgerWriter`` (encodes and writes in
the gateway's own process) and ``LedgerFeed`` (ships the buffered events to a separate
writer process). Call sites on the message path see one surface and pay one
``list.append`` of a tuple per event: no I/O, no formatting, no clock.
"""
from __future__ import annotations

from typing import Mapping, Optional, Sequence

from .records import EventKind, LedgerRecord, Outcome

__all__ = ["DELIVERY_ROW_LENGTH", "EventBuffer", "PAIR_SEPARATOR", "PUBLISH_ROW_LENGTH",
           "ledger_context", "message_key"]

#: joins the two event kinds of a row that holds two events (no kind contains it)
PAIR_SEPARATOR = ">"
#: length of a compact ``settled`` row of its own (``EventBuffer.settled``), a tuple
#: ``(now, event, context, key, queue, delivery_count, outcome, reason)``; a full row is longer
DELIVERY_ROW_LENGTH = 8
#: length of a compact publish row (``EventBuffer.publish_event``)
PUBLISH_ROW_LENGTH = 7
# A delivered row (``EventBuffer.delivered``) is the only row buffered as a list, so that
# its settlement can be added: [now, context, key, queue, delivery_count, generation,
# settled_at, outcome, reason]
_GENERATION, _SETTLED_AT, _OUTCOME, _REASON = 5, 6, 7, 8
_SETTLED = EventKind.SETTLED.value
_RECEIVED = EventKind.RECEIVED
#: "received>routed" etc., made once (publish_event is on every publish)
_RECEIVED_THEN = {kind.value: EventKind.RECEIVED.value + PAIR_SEPARATOR + kind.value
                  for kind in EventKind}


def ledger_context(vhost: Optional[str], user: Optional[str], proto_out: object,
                     connection: Optional[str], link: object,
                     address: Optional[str] = None) -> tuple:
    """The fields of a channel's or link's events that never change: made once and shared
    by every row it records (``proto_out`` matters for deliveries only)."""
    return (vhost, user, getattr(proto_out, "_value_", proto_out), connection, link, address)


def message_key(proto_in: object, exchange: Optional[str], routing_key: Optional[str],
                message_id: object, correlation_id: object, gateway_id: object,
                size: Optional[int], received_at: Optional[float]) -> tuple:
    """The fields of a message that every delivery event repeats: made once per message."""
    return (getattr(proto_in, "_value_", proto_in), exchange, routing_key, message_id,
            correlation_id, gateway_id, size, received_at)


class EventBuffer:
    """Events waiting for the next flush. ``enabled=False`` makes recording a no-op."""

    def __init__(self, *, enabled: bool = True, keep_headers: bool = True) -> None:
        self.enabled = enabled
        #: False when no header is recorded anyway: rows then do not hold the headers
        self.keep_headers = keep_headers
        self._buffer: list = []
        #: counts ``take()`` calls: a delivered row from an earlier generation is gone
        self._generation = 0
        if not enabled:
            # Disabled: the hot-path calls become no-ops bound on the instance.
            self.record = self._discard  # type: ignore[method-assign]
            self.delivered = self._discard  # type: ignore[method-assign]
            self.settled = self._discard  # type: ignore[method-assign]
            self.publish_event = self._discard  # type: ignore[method-assign]
            self.append = self._discard  # type: ignore[method-assign]

    def record(
        self,
        event: EventKind,
        now: float,
        *,
        vhost: Optional[str] = None,
        user: Optional[str] = None,
        proto_in: Optional[str] = None,
        proto_out: Optional[str] = None,
        connection: Optional[str] = None,
        link: object = None,
        exchange: Optional[str] = None,
        routing_key: Optional[str] = None,
        address: Optional[str] = None,
        queue: Optional[str] = None,
        routed_to: Optional[Sequence[str]] = None,
        message_id: object = None,
        correlation_id: object = None,
        gateway_id: Optional[str] = None,
        origin_id: Optional[str] = None,
        peer_container: Optional[str] = None,
        size: Optional[int] = None,
        delivery_count: Optional[int] = None,
        outcome: Optional[Outcome] = None,
        reason: Optional[str] = None,
        received_at: Optional[float] = None,
        headers: Optional[Mapping[str, object]] = None,
        then: Optional[EventKind] = None,
    ) -> None:
        """Buffer one event. ``now`` and ``received_at`` are seconds (the latency column is
        their difference); ``headers`` may be the message's own mapping (only allow-listed
        names are copied, at flush time, so it must not be mutated after the call). Ids
        that are not strings (1.0 ulong/uuid/binary, channel numbers) are stored as text.
        The tuple's layout is ``encoding.ROW_FIELDS``.

        ``then``: a second event of the same message at the same instant (``received``
        then ``routed``, say), kept in the same row and written as two records: ``headers``
        belong to the first, ``routed_to`` and ``reason`` to the second. Why: each row
        costs the message path more than its fields do. ``routed_to`` is best a tuple:
        a row of plain values and tuples is left alone by the GC.
        """
        # Enum members become their plain string values: a row of plain values is what
        # marshal can write (and fastest), and CPython's GC stops tracking such a tuple at
        # its first collection instead of walking it until the flush.
        if event.__class__ is not str:
            event = event._value_  # type: ignore[assignment]
        if then is not None:  # "first>then": a str (no tuple for the GC to track)
            event = event + PAIR_SEPARATOR + (then if then.__class__ is str else then._value_)
        if proto_in is not None and proto_in.__class__ is not str:
            proto_in = proto_in._value_  # type: ignore[attr-defined]
        if proto_out is not None and proto_out.__class__ is not str:
            proto_out = proto_out._value_  # type: ignore[attr-defined]
        if outcome is not None and outcome.__class__ is not str:
            outcome = outcome._value_
        self._buffer.append((
            now, event, vhost, user, proto_in, proto_out, connection, link, exchange,
            routing_key, address, queue, routed_to, message_id, correlation_id, gateway_id,
            origin_id, peer_container, size, delivery_count, outcome, reason, received_at,
            headers if self.keep_headers else None,
        ))

    def delivered(self, now: float, context: tuple, key: tuple, queue: Optional[str],
                  delivery_count: Optional[int]) -> Optional[list]:
        """A ``delivered`` event in a compact row its settlement can still be added to:
        pass the returned row to ``settled``. ``context`` from ``ledger_context``, ``key``
        from ``message_key``, both shared, not copied; written exactly as ``record`` would
        write the event with those fields (including the publish's exchange and routing key).

        Why: most deliveries are settled within milliseconds, long before the next flush,
        and one row per delivery instead of two is a sixth of the ledger's cost to the
        event loop. (None when the ledger is disabled.)
        """
        row = [now, context, key, queue, delivery_count, self._generation, None, None, None]
        self._buffer.append(row)
        return row

    def settled(self, row: Optional[list], now: float, context: tuple, key: tuple,
                queue: Optional[str], delivery_count: Optional[int], outcome: Outcome,
                reason: Optional[str] = None) -> None:
        """A ``settled`` event (written as ``record`` would, without the exchange and
        routing key): into ``row`` (from ``delivered``) when that row is still buffered and
        unsettled, else in a compact row of its own. Both events keep their own times."""
        if outcome.__class__ is not str:
            outcome = outcome._value_
        if row is not None and row[_GENERATION] == self._generation and row[_SETTLED_AT] is None:
            row[_SETTLED_AT] = now
            row[_OUTCOME] = outcome
            row[_REASON] = reason
            return
        self._buffer.append((now, _SETTLED, context, key, queue, delivery_count, outcome, reason))

    def publish_event(self, event: EventKind, then: EventKind, now: float, context: tuple,
                      key: tuple, routed_to: Optional[Sequence[str]] = None,
                      reason: Optional[str] = None,
                      headers: Optional[Mapping[str, object]] = None) -> None:
        """A publish's ``received`` event and its routing outcome ``then`` in one compact
        row: ``context`` from ``ledger_context`` (the publisher's channel or link),
        ``key`` from ``message_key``. Written exactly as ``record(event, ..., then=then)``
        with those fields would be (``received_at`` is not written for either)."""
        then = then if then.__class__ is str else then._value_
        pair = _RECEIVED_THEN.get(then) if event is _RECEIVED else None
        if pair is None:  # not one of the usual pairs: made here
            pair = (event if event.__class__ is str else event._value_) + PAIR_SEPARATOR + then
        self._buffer.append((now, pair, context, key, routed_to, reason,
                             headers if self.keep_headers else None))

    def append(self, record: LedgerRecord) -> None:
        """Buffer a ready-made record (its ``container`` is replaced by the writer's)."""
        self._buffer.append(record)

    def _discard(self, *args: object, **kwargs: object) -> None:
        return None

    @property
    def buffered(self) -> int:
        """Events waiting for the next flush."""
        return len(self._buffer)

    def take(self) -> list:
        """Every buffered event, oldest first; the buffer starts afresh."""
        items, self._buffer = self._buffer, []
        self._generation += 1
        return items
