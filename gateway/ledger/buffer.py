"""The hot-path half of a ledger: ``record(...)`` and ``append(record)`` append to a list.

Both ledgers the gateway can run with share it: ``LedgerWriter`` (encodes and writes in
the gateway's own process) and ``LedgerFeed`` (ships the buffered events to a separate
writer process). Call sites on the message path see one surface and pay one
``list.append`` of a tuple per event: no I/O, no formatting, no clock.
"""
from __future__ import annotations

from collections import deque
from typing import Callable, Mapping, Optional, Sequence

from .records import EventKind, LedgerRecord, Outcome

__all__ = ["DELIVERED_ROW_LENGTH", "EventBuffer", "KEY_GATEWAY_ID", "KEY_LENGTH",
           "PAIR_SEPARATOR", "PUBLISH_ROW_LENGTH", "PUBLISH_ROW_NOW", "ROUTED_ROW_LENGTH",
           "SETTLED_MANY_ROW_LENGTH", "SETTLED_ROW_LENGTH", "event_pair", "ledger_context",
           "message_key"]

# The compact rows (what the message path buffers; ``encoding`` expands them). Each form
# has its own length, which is how the writer tells them apart (a full row from
# ``record`` has ``len(encoding.ROW_FIELDS)``):
#
# - a *key* (``message_key``): the fields of a message that every event of it repeats,
#   ``(proto_in, exchange, routing_key, message_id, correlation_id, gateway_id, size,
#   received_at)``. Never a row by itself: rows refer to it.
# - a publish row: a key followed by ``(now, events, context, routed_to, reason,
#   headers)``, where ``events`` is ``event_pair(received, outcome)``. The row is also the
#   message's key (its first fields are one): the deliveries of the message refer to it
#   by the message's gateway id, and a batch holds the message's fields once.
# - a routed row: the publish row of a message routed to queues, with no headers kept,
#   received in the same call as ``now``: ``(context, exchange, routing_key, message_id,
#   correlation_id, gateway_id, size, now, routed_to)``. ``proto_in`` is the context's
#   protocol (the publisher's), ``events`` is received then routed, ``received_at`` is
#   ``now``, ``reason`` and ``headers`` are None; the writer expands it to the publish row
#   it stands for (``encoding.compact_rows_apart``). Why: a publish row's fields cost the
#   message path about 35 ns each (read, marshalled, freed), and these five are the same
#   for every routed message of a channel or link (real gateway, 100 B, 6 rounds: its
#   CPU 15.6 -> 14.6 us a message 0-9-1 -> 0-9-1, 17.0 -> 16.2 1.0 -> 1.0).
# - a delivered row: ``(now, context, key, queue, delivery_count)``. ``key`` is the
#   message's gateway id (an int) when its publish row is earlier in the stream and the
#   writer still keeps it: the gateway id is at least ``EventBuffer.gid_from``. That is
#   the usual case, and it keeps the message path off the publish row: the row is not
#   kept for the deliveries (with a backlog a queued message's row was cold by its
#   delivery, and reading it there, marshalling it again as the key, and holding it
#   meanwhile cost the event loop 0.4 to 1 us a message, measured). A publish reserves its row's
#   place (None until routing is done) before routing, which delivers at once to a
#   waiting consumer, so the row is always earlier than its deliveries (a place left
#   None, when routing refuses the publish, is skipped by the writer). Else ``key`` is
#   the message's key, made from the message.
# - a settled row: ``(now, delivered_row, outcome, reason)``, ``outcome`` an ``Outcome``
#   value. The delivered row (perhaps from an earlier batch) gives the settlement its
#   context, key, queue and count; its ``now`` is None when the delivery was not recorded.
#   A delivered row whose gateway id is below ``gid_from`` by the settlement is copied
#   with the message's key in its place: the writer may have forgotten the publish row.
#   Why not the settlement written into its delivered row's place while that is still in
#   the buffer (one row for both, as a publish row holds two events): tried, and the
#   place to remember, the check and the longer tuple cost the message path what the
#   smaller batch saved (in-process publish+deliver+ack, 100 B: on/off 0.91 against 0.94).
# - a settled-many row: ``(now, delivered_rows, outcome)``, the settlements without a
#   reason of several deliveries at once (a 0-9-1 multiple ack): one settled row for each
#   of ``delivered_rows`` (a tuple), for a tuple and a list append each instead of a row.
#
# Rows are tuples of plain values, tuples and None: marshal writes them (a tuple shared by
# several rows once), and CPython's GC stops tracking them at its first collection.

#: joins the two event kinds of a row that holds two events (no kind contains it)
PAIR_SEPARATOR = ">"
KEY_LENGTH = 8
PUBLISH_ROW_LENGTH = KEY_LENGTH + 6
DELIVERED_ROW_LENGTH = 5
SETTLED_ROW_LENGTH = 4
SETTLED_MANY_ROW_LENGTH = 3
ROUTED_ROW_LENGTH = 9
#: in a key: the gateway id; in a publish row: its time
KEY_GATEWAY_ID = 5
PUBLISH_ROW_NOW = KEY_LENGTH


def event_pair(event: object, then: object) -> str:
    """``events`` of a publish row: ``event`` and then ``then`` (kinds or their values).
    Call sites make the pairs they use once, at import."""
    first = event if type(event) is str else event._value_  # type: ignore[attr-defined]
    second = then if type(then) is str else then._value_  # type: ignore[attr-defined]
    return first + PAIR_SEPARATOR + second



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


class _Discard:
    """``rows`` of a disabled buffer."""

    __slots__ = ()

    def append(self, row: object) -> None:
        return None

    def __len__(self) -> int:
        return 0


class EventBuffer:
    """Events waiting for the next flush. ``enabled=False`` makes recording a no-op.

    ``rows`` is the buffer itself: the busiest call sites (a 0-9-1 channel's and a 1.0
    link's publish, delivery and settlement) append their compact rows to it directly,
    because a method call per event was a fifth of the ledger's cost to the event loop.
    Read it afresh for every append: ``take`` replaces it.
    """

    def __init__(self, *, enabled: bool = True, keep_headers: bool = True) -> None:
        self.enabled = enabled
        #: a delivered or settled row may refer to the publish row of a message with a
        #: gateway id at least this by that id (see the rows above): the writer has the
        #: row or gets it earlier in the same batch. Moved on by ``mark_taken``.
        self.gid_from = 0
        #: ``Broker.next_gateway_id``'s source (``use_gateway_ids``): without it no
        #: reference reaches past a ``take``
        self._gateway_ids: Optional[Callable[[], int]] = None
        #: (time, first gateway id after it) of each ``mark_taken`` still in the window
        self._marks: deque[tuple[float, int]] = deque()
        #: False when no header is recorded anyway: rows then do not hold the headers
        self.keep_headers = keep_headers
        self.rows: list = []
        if not enabled:
            # Disabled: the hot-path calls become no-ops bound on the instance.
            self.rows = _Discard()  # type: ignore[assignment]
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
        if type(event) is not str:
            event = event._value_  # type: ignore[assignment]
        if then is not None:  # "first>then": a str (no tuple for the GC to track)
            event = event + PAIR_SEPARATOR + (then if type(then) is str else then._value_)
        if proto_in is not None and type(proto_in) is not str:
            proto_in = proto_in._value_  # type: ignore[attr-defined]
        if proto_out is not None and type(proto_out) is not str:
            proto_out = proto_out._value_  # type: ignore[attr-defined]
        if outcome is not None and type(outcome) is not str:
            outcome = outcome._value_
        self.rows.append((
            now, event, vhost, user, proto_in, proto_out, connection, link, exchange,
            routing_key, address, queue, routed_to, message_id, correlation_id, gateway_id,
            origin_id, peer_container, size, delivery_count, outcome, reason, received_at,
            headers if self.keep_headers else None,
        ))

    def delivered(self, now: float, context: tuple, key: tuple, queue: Optional[str],
                  delivery_count: Optional[int]) -> Optional[tuple]:
        """A ``delivered`` event as a compact row; pass the row to ``settled`` when the
        delivery is settled. ``context`` from ``ledger_context``, ``key`` from
        ``message_key`` (or a publish row), both shared, not copied; written exactly as
        ``record`` would write the event with those fields (including the publish's
        exchange and routing key). (None when the ledger is disabled.)"""
        row = (now, context, key, queue, delivery_count)
        self.rows.append(row)
        return row

    def settled(self, delivered: Optional[tuple], now: float, context: tuple, key: tuple,
                queue: Optional[str], delivery_count: Optional[int], outcome: Outcome,
                reason: Optional[str] = None) -> None:
        """A ``settled`` event (written as ``record`` would, without the exchange and
        routing key) of the delivery ``delivered`` (from ``delivered``), or, when that
        delivery was not recorded (None), of one with the other fields given here.

        ``key`` is also what the row holds for the message when the delivered row refers
        to its publish row by a gateway id below ``gid_from``: the writer may no longer
        have that row (a settlement seconds after its delivery), so the settled row would
        lose the message's fields (the busiest call sites test this in place)."""
        if type(outcome) is not str:
            outcome = outcome._value_
        if delivered is None:
            delivered = (None, context, key, queue, delivery_count)
        elif delivered[2].__class__ is int and delivered[2] < self.gid_from:
            delivered = delivered[:2] + (key,) + delivered[3:]
        self.rows.append((now, delivered, outcome, reason))

    def publish_event(self, event: EventKind, then: EventKind, now: float, context: tuple,
                      key: tuple, routed_to: Optional[Sequence[str]] = None,
                      reason: Optional[str] = None,
                      headers: Optional[Mapping[str, object]] = None) -> tuple:
        """A publish's ``received`` event and its routing outcome ``then`` in one compact
        publish row, returned: ``context`` from ``ledger_context`` (the publisher's channel
        or link), ``key`` from ``message_key``. Written exactly as ``record(event, ...,
        then=then)`` with those fields would be (``received_at`` is not written for
        either). The message path builds the same row from the message itself
        (``ledger_events.publish_row``, with the pairs made once at import), or for a
        routed message without headers kept the shorter routed row."""
        row = key[:KEY_LENGTH] + (now, event_pair(event, then), context, routed_to, reason,
                                  headers if self.keep_headers else None)
        self.rows.append(row)
        return row

    def append(self, record: LedgerRecord) -> None:
        """Buffer a ready-made record (its ``container`` is replaced by the writer's)."""
        self.rows.append(record)

    def _discard(self, *args: object, **kwargs: object) -> None:
        return None

    def use_gateway_ids(self, next_id: Callable[[], int]) -> None:
        """``next_id``: the broker's ``next_gateway_id`` (a callable reading it afresh).
        Each ``mark_taken`` takes an id from it, which tells the publishes of the rows
        taken from those after them without a test on the message path."""
        self._gateway_ids = next_id

    def mark_taken(self, now: float, keep_seconds: float) -> None:
        """The rows up to here were taken for the writer at ``now``; it keeps publish rows
        ``keep_seconds`` at least (0: not past this batch). ``gid_from`` moves to the
        first gateway id taken after the oldest mark that young: a message with an id from
        there on was published after that mark (ids increase), so its publish row is at
        most ``keep_seconds`` old or still to come in the stream."""
        if self._gateway_ids is None:  # ids unknown: no reference past a take
            self.gid_from = 1 << 63
            return
        marks = self._marks
        marks.append((now, self._gateway_ids()))
        while len(marks) > 1 and marks[0][0] < now - keep_seconds:
            marks.popleft()
        self.gid_from = max(self.gid_from, marks[0][1])

    def forget_taken(self) -> None:
        """The writer lacks what was taken so far (it was restarted, or a batch was
        dropped): refer by gateway id only to what is taken from now on."""
        marks = self._marks
        if marks:  # the newest mark stays: what was published after it is still to go
            newest = marks[-1]
            marks.clear()
            marks.append(newest)
            self.gid_from = max(self.gid_from, newest[1])

    @property
    def buffered(self) -> int:
        """Events waiting for the next flush."""
        return len(self.rows)

    def take(self) -> list:
        """Every buffered event, oldest first; the buffer starts afresh."""
        if not self.enabled:
            return []
        items, self.rows = self.rows, []
        return items
