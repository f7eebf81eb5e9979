"""``Ledger``: the one surface the protocols and the queues record message events through.

The call sites name what happened (a channel opened, a publish was taken in and routed,
a delivery, a settlement, an expiry ...) and pass the objects they hold (a broker
``MessageContainer``, a ``QueuedMessage``, the queues routing chose); this class alone
knows the record layouts (``records.RECORDS``) and which of those objects' attributes
fill them. Recording appends one msgspec struct to a list: no formatting, no I/O, no
clock. ``take_frame`` packs what was recorded into a msgpack frame (``encoding``), a
slice at a time; the edge ships the frames to the writer process every few milliseconds,
which turns them into the JSON Lines of the segments (``take_lines`` encodes those lines
here, for a ``LedgerWriter`` in this process). No turn of the event loop encodes much at once.

Why msgspec structs, msgpack frames and JSON Lines (measured on this machine in one
process, a message's three records, 50,000 messages): the structs (``gc=False``) 0.49 us
to make, the same as tuples 1.35 (tuples are tracked by the cyclic collector, whose
collections they then set off); the frame 0.25 us to pack, JSON Lines 0.80 (formatting
the floats), marshal of tuples (what the v1 gateway shipped) 0.5; pyarrow's Arrow IPC
1.8, and Spark reads no Arrow files. Spark reads JSON Lines natively, a crash leaves at
most one torn last line, and operators can grep them.

The message path's three records (``received``, ``delivered``, ``settled``) are recorded
as rows (``encoding``): a shape id and the values that vary from message to message,
the fields that are the same for a channel's or link's messages (its context, the queue,
exchange, routing key, verdict, outcome) declared once per shape. Why (one process,
50,000 messages of one link, best of 7): a message record took 94 ns to make and 100 ns
to pack, its row 39 and 20; a delivery's 40 and 32, its row 36 and 17 (plus a dict
look-up of its shape). The writer process makes the records of the rows; ``take_lines``
here.

How a row's shape is found (by its key), made, and forgotten after its context is
``RowShapes``'s (``row_shapes``); this class builds each record's key and row.
Forwarding's records (a context per remote, one layout of events) are
``ForwardingRecords``'s (``forward_records``), bound here as this class's methods; they
append to the same ``records`` list, which is therefore never replaced.

Ids: contexts and messages are numbered from the broker's gateway-id counter
(``use_gateway_ids``), unique across restarts of a container.
"""
from __future__ import annotations

import zlib
from typing import Any, Callable, Iterable, Optional, Sequence

from . import records as r
from .encoding import as_text as _text
from .encoding import frame, json_lines
from .forward_records import ForwardingRecords
from .records import EventKind
from .row_shapes import STRUCTS, DeliveryRow, MessageRow, RowShapes

__all__ = ["DEFAULT_SLICE", "Ledger",
           "sample_threshold"]

#: records encoded at most by one ``take_lines``
DEFAULT_SLICE = 512
_SCALE = 2 ** 32
_Context, _Ended = STRUCTS[r.CONTEXT], STRUCTS[r.CONTEXT_ENDED]
_Event = STRUCTS[r.EVENT]

#: a broker ``Encoding``'s value -> the ledger's protocol label
_PROTOCOL_OF_ORIGIN = {"amqp091": r.Protocol.AMQP091.value, "amqp10": r.Protocol.AMQP10.value}
_ACCEPTED = r.Outcome.ACCEPTED.value
_DELIVERED, _SETTLED = r.DELIVERED, r.SETTLED


def sample_threshold(sample_rate: float) -> Optional[int]:
    """crc32 threshold for ``sample_rate`` in [0, 1]; None means keep everything.

    Raises ValueError outside [0, 1].
    """
    if not 0.0 <= sample_rate <= 1.0:
        raise ValueError(f"sample_rate must be within [0, 1], got {sample_rate!r}")
    return None if sample_rate >= 1.0 else int(sample_rate * _SCALE)


def _names(queues: Sequence[Any]) -> tuple:
    """``routed_to``: the names of the queues routing chose (each queue keeps its own
    one-name tuple, the usual case)."""
    if len(queues) == 1:
        return queues[0].routed_to
    return tuple(q.name for q in queues)


def _allowed(headers: Any, allowlist: tuple) -> Optional[dict]:
    """The allow-listed of ``headers`` with a value, as text; None for none. (A function of
    its own: its comprehension in ``Ledger._record`` made ``headers`` a cell there, for
    every message.)"""
    if not headers:
        return None
    return {k: _text(headers[k]) for k in allowlist if headers.get(k) is not None} or None


def _stored(message: Any, queues: Optional[Sequence[Any]]) -> Optional[tuple]:
    """``stored_to``: of the queues routing chose, those that keep a persistent
    ``message`` in the store (a queue with ``storage``); None for none. What the report
    expects back after a restart: a copy there that is not ``restored`` was lost."""
    if not queues or not message.durable:
        return None
    if len(queues) == 1:
        return queues[0].routed_to if queues[0].storage is not None else None
    return tuple(q.name for q in queues if q.storage is not None) or None


class Ledger:
    """The ledger of one gateway container. ``sample_rate`` in [0, 1] keeps that fraction
    of messages (every record of a kept message), ``header_allowlist`` names the
    application headers recorded (values as text). Raises ValueError for a sample rate
    outside [0, 1].

    Counters: ``records_taken`` (encoded), ``records_sampled_out``.
    """

    def __init__(self, *, container_id: str, sample_rate: float = 1.0,
                 header_allowlist: Iterable[str] = (), enabled: bool = True) -> None:
        self.container_id = container_id
        self.enabled = enabled
        self.threshold = sample_threshold(sample_rate)
        self.allowlist = tuple(dict.fromkeys(header_allowlist))
        #: what was recorded and not yet taken, oldest first
        self.records: list = []
        self._append = self.records.append
        #: the contexts still open (ctx id -> record): replayed to a new writer
        self.contexts: dict[int, Any] = {}
        self._row_shapes = RowShapes(self.contexts)
        #: every shape still needed (id -> its declaration): replayed to a new writer
        self.shapes: dict[int, list] = self._row_shapes.declarations
        # each recording method looks its shape up here itself, and calls
        # ``RowShapes.new_row`` only for a key not found: a shared "find or make" method
        # would be one more Python call a record, 1-3 a message (2-7 % of the W3 and W4
        # budgets of ``bench/hotpath.py``). The message path subscripts ``ids`` and makes
        # a shape on its KeyError (rare: once per kind of record of a context): no C call
        # and no None test a record
        self._shape_ids = self._row_shapes.ids
        #: (vhost, protocol, exchange or None) -> the context of what the broker records there
        self._queue_contexts: dict[tuple[str, str, Optional[str]], int] = {}
        #: the context of the gateway's own events (started, gap)
        self._gateway_context: Optional[int] = None
        self._next_id: Callable[[], int] = iter(range(1, 1 << 62)).__next__
        self.records_taken = self.records_sampled_out = 0
        #: forwarding's records (``forward_records``); its methods are bound here as this
        #: ledger's own (no Python call more a forwarded message)
        self._forwarding = forwarding = ForwardingRecords(self.records, self._row_shapes, self.context)
        self.forward_context, self.forwarded = forwarding.forward_context, forwarding.forwarded
        self.forwarded_many, self.forward_settled = forwarding.forwarded_many, forwarding.forward_settled
        self.forward_settled_many = forwarding.forward_settled_many
        self.forward_dead_lettered = forwarding.forward_dead_lettered
        self.arrived_forwarded = forwarding.arrived_forwarded

    @property
    def wake(self) -> Optional[Callable[[], None]]:
        """Set by the edge: called when a record should be shipped at once, not at the
        next interval (forwarding's: the other gateway settles on them)."""
        return self._forwarding.wake

    @wake.setter
    def wake(self, wake: Optional[Callable[[], None]]) -> None:
        self._forwarding.wake = wake

    def use_gateway_ids(self, next_id: Callable[[], int]) -> None:
        """Number contexts from ``next_id`` (the broker's ``next_gateway_id``)."""
        self._next_id = next_id

    # -- contexts ----------------------------------------------------------------------

    def context(self, now: float, vhost: Optional[str], user: Optional[str], proto: str,
                connection: Any, link: Any, address: Optional[str] = None) -> int:
        """A new channel's or link's context (``proto``: its ``Protocol`` value); returns
        its id, which it passes to every record it makes. ``close_context`` when it goes."""
        ctx = self._next_id()
        record = self.contexts[ctx] = _Context(now, ctx, self.container_id, vhost, user, proto,
                                               connection, link, address)
        self._append(record)
        return ctx

    def close_context(self, now: float, ctx: Optional[int]) -> None:
        """The channel or link is gone (after its last record)."""
        if self.contexts.pop(ctx, None) is not None:  # type: ignore[arg-type]
            self._append(_Ended(now, ctx))
            # a record made after this (a late settlement) gets a shape of its own
            self._row_shapes.context_closed(ctx)

    def queue_context(self, now: float, vhost: str, message: Any) -> int:
        """The context of what a queue of ``vhost`` records about ``message`` (expiry,
        dead-lettering): the vhost and the message's protocol, nobody's connection."""
        return self._broker_context(now, vhost, message, None)

    def _broker_context(self, now: float, vhost: str, message: Any, address: Optional[str]) -> int:
        """The context of the broker acting in ``vhost`` on ``message`` (nobody's
        connection): a queue's (``address`` None) or the broker's own publishes to the
        exchange ``address`` (events)."""
        proto = _PROTOCOL_OF_ORIGIN[message.origin._value_]
        key = (vhost, proto, address)
        ctx = self._queue_contexts.get(key)
        if ctx is None:
            ctx = self._queue_contexts[key] = self.context(now, vhost, None, proto, None, None,
                                                           address)
        return ctx

    def context_lines(self) -> bytes:
        """The open contexts' records as JSON Lines: what a writer that missed them needs
        first."""
        return json_lines(list(self.contexts.values()))

    def context_frame(self) -> bytes:
        """``context_lines`` as a frame, for the writer process, after every shape still
        needed."""
        return frame(list(self.contexts.values()), list(self.shapes.values()))

    # -- publishes ---------------------------------------------------------------------

    # ``received(now, ctx, message, event=None, queues=None, reason=None, address=None,
    # routed=True)``: ``message`` was taken in on ``ctx``; ``event`` its routing verdict
    # when known (None in a transaction: ``verdict`` then), ``queues`` those routing
    # chose. ``address``: the message's own 1.0 address when not its link's. ``routed``
    # False: the message's exchange and routing key are not set yet (a 1.0 message refused
    # or dropped before routing) and are recorded as none. It is ``_record`` bound to the
    # message record (the class's alias below): one Python call per publish, not two.

    def refused(self, now: float, ctx: int, reason: str, message: Any = None,
                exchange: Optional[str] = None, routing_key: Optional[str] = None,
                address: Optional[str] = None) -> None:
        """A publish refused before it was taken in (no gateway id): its ``exchange`` and
        ``routing_key`` as the publish named them, or ``message`` when it was decoded."""
        if message is not None:
            record = self._record(now, ctx, message, EventKind.REFUSED, None, reason, address,
                                  False, r.VERDICT)
            record.gateway_id = None  # not taken in: none given yet
        else:
            self._append(_Event(now, ctx, EventKind.REFUSED._value_, None, None, None, None,
                                exchange, routing_key, None, reason))

    def verdict(self, now: float, ctx: int, message: Any, event: EventKind,
                queues: Optional[Sequence[Any]] = None, reason: Optional[str] = None) -> None:
        """The routing verdict of a message taken in earlier (a 0-9-1 transaction's, at
        commit or refused at publish)."""
        self._append(_Event(now, ctx, event._value_, message.gateway_id, None, None, None,
                            None, None, None if queues is None else _names(queues), reason, None,
                            None, _stored(message, queues)))

    def dead_letter_copy(self, now: float, vhost: str, message: Any, event: EventKind,
                         queues: Sequence[Any], reason: Optional[str], copied: bool = True) -> None:
        """A dead-lettered copy and its routing verdict; ``reason`` the death's. Not
        ``copied`` (the dead-letter exchange is missing): the copy was never made, and the
        verdict is the original message's (by its gateway id)."""
        ctx = self.queue_context(now, vhost, message)
        if copied:  # a message of its own, with its own gateway id
            self._record(now, ctx, message, event, queues, reason, None, True, r.VERDICT)
        else:
            self._append(_Event(now, ctx, event._value_, message.gateway_id, None, None, None,
                                message.exchange, message.routing_key, _names(queues), reason))

    def broker_message(self, now: float, vhost: str, message: Any, event: EventKind,
                       queues: Sequence[Any]) -> None:
        """A message the broker published of its own (a broadcast event, not a dead-letter
        copy: no death reason) and its routing verdict, in the context of the broker's
        publishes to its exchange (the context's ``address``)."""
        ctx = self._broker_context(now, vhost, message, message.exchange)
        self._record(now, ctx, message, event, queues, None, None, True, r.VERDICT)

    def _record(self, now: float, ctx: int, message: Any, event: Any = None,
                queues: Optional[Sequence[Any]] = None, reason: Optional[str] = None,
                address: Optional[str] = None, routed: bool = True,
                tag: str = r.MESSAGE) -> Any:
        """Record a message's (``tag`` ``MESSAGE``) or a verdict's record about ``message``
        as a row; returns the row (appended already). The one home of which message fields
        fill it."""
        mid, cid = message.message_id, message.correlation_id
        if mid is not None and mid.__class__ is not str:
            mid = _text(mid)
        if cid is not None and cid.__class__ is not str:
            cid = _text(cid)
        headers = None
        if self.allowlist:  # (first: no header is recorded by default)
            headers = _allowed(message.headers, self.allowlist)
        exchange, routing_key = message.exchange, message.routing_key
        if not routed:
            exchange, routing_key = exchange or None, routing_key or None
        stored = None
        if queues is None:
            names = None
        elif len(queues) == 1:  # (per message: _names's and _stored's usual case, no call)
            queue = queues[0]
            names = queue.routed_to
            if message.durable and queue.storage is not None:
                stored = names
        elif not queues:  # (per message too: a publish to a service node, a forwarder's)
            names = ()
        else:
            names = _names(queues)
            stored = _stored(message, queues)
        verdict = None if event is None else event._value_
        key = (tag, ctx, exchange, routing_key, verdict, names, stored, reason, address)
        try:
            row = MessageRow(self._shape_ids[key], now, message.gateway_id, mid, cid, message.size,
                             headers)
        except KeyError:
            row = self._row_shapes.new_row(
                key, MessageRow, (now, message.gateway_id, mid, cid, message.size, headers))
        self._append(row)
        return row

    received = _record

    # -- deliveries --------------------------------------------------------------------

    def delivered(self, now: float, ctx: int, entry: Any, queue: str) -> None:
        """``entry`` (a ``QueuedMessage``) left ``queue`` for the consumer of ``ctx``."""
        message = entry.message
        key = (_DELIVERED, ctx, queue)
        try:
            self._append(DeliveryRow(self._shape_ids[key], now, message.gateway_id,
                                     entry.delivery_count, message.created_at))
        except KeyError:
            self._append(self._row_shapes.new_row(
                key, DeliveryRow, (now, message.gateway_id, entry.delivery_count,
                                   message.created_at)))

    def delivered_settled(self, now: float, ctx: int, entry: Any, queue: str) -> None:
        """``entry`` left ``queue`` for the consumer of ``ctx`` settled as it was sent (0-9-1
        no-ack, a 1.0 pre-settled link): delivered, then settled ``accepted`` at once.
        ``delivered`` and ``settled`` written out here, not called: two Python calls a
        pre-settled delivery less (``bench/hotpath.py``: the budget allows 2%, two calls
        are 4-6% of W3/W4); ``test_rows_read_back_as_the_lines_of_the_records_they_stand_for``
        holds the three to the same lines."""
        message = entry.message
        gateway_id, count, created_at = message.gateway_id, entry.delivery_count, message.created_at
        append, ids = self._append, self._shape_ids
        key = (_DELIVERED, ctx, queue)
        try:
            append(DeliveryRow(ids[key], now, gateway_id, count, created_at))
        except KeyError:
            append(self._row_shapes.new_row(key, DeliveryRow, (now, gateway_id, count, created_at)))
        key = (_SETTLED, ctx, queue, _ACCEPTED, None)
        try:
            append(DeliveryRow(ids[key], now, gateway_id, count, created_at))
        except KeyError:
            append(self._row_shapes.new_row(key, DeliveryRow, (now, gateway_id, count, created_at)))

    def settled(self, now: float, ctx: int, entry: Any, queue: Optional[str], outcome: str,
                reason: Optional[str] = None) -> None:
        """The consumer of ``ctx`` settled ``entry``'s delivery (``outcome``: an
        ``Outcome`` value); recorded before the queue acts on it."""
        # the look-up written out as in ``delivered``, not shared: see ``__init__``
        message = entry.message
        key = (_SETTLED, ctx, queue, outcome, reason)
        try:
            self._append(DeliveryRow(self._shape_ids[key], now, message.gateway_id,
                                     entry.delivery_count, message.created_at))
        except KeyError:
            self._append(self._row_shapes.new_row(
                key, DeliveryRow, (now, message.gateway_id, entry.delivery_count,
                                   message.created_at)))

    def settled_many(self, now: float, ctx: int, entries: Iterable[Any], outcome: str) -> None:
        """``settled`` (no reason) for each of ``entries``, in order, in its own queue
        (``entry.queue``; an entry without one is skipped: it went with its queue): a 0-9-1
        ack with ``multiple``. One Python call, and one key and look-up for each run of a
        queue's entries, instead of a call, a key and a look-up for every entry."""
        append, ids = self._append, self._shape_ids
        last = sid = key = None
        for entry in entries:
            queue = entry.queue
            if queue is None:
                continue
            if queue is not last:
                last = queue
                key = (_SETTLED, ctx, queue.name, outcome, None)
                sid = ids.get(key)
            message = entry.message
            if sid is None:
                append(self._row_shapes.new_row(
                    key, DeliveryRow, (now, message.gateway_id, entry.delivery_count,
                                       message.created_at)))
                sid = ids.get(key)  # (None when not kept: as ``settled``, a new one each)
            else:
                append(DeliveryRow(sid, now, message.gateway_id, entry.delivery_count,
                                   message.created_at))

    # -- queues ------------------------------------------------------------------------

    def expired(self, now: float, vhost: str, message: Any, delivery_count: int,
                queue: str) -> None:
        """``message`` expired in ``queue`` after ``delivery_count`` failed deliveries (the
        message, not the queue entry: a durable queue's entry may hold a stand-in)."""
        self._append(_Event(now, self.queue_context(now, vhost, message),
                            EventKind.EXPIRED._value_, message.gateway_id, queue,
                            delivery_count, message.created_at))

    def dead_lettered(self, now: float, vhost: str, message: Any, queue: str, exchange: str,
                      routing_key: str, reason: str) -> None:
        """``message`` left ``queue`` for the dead-letter ``exchange`` with ``routing_key``."""
        self._append(_Event(now, self.queue_context(now, vhost, message),
                            EventKind.DEAD_LETTERED._value_, message.gateway_id, queue, None,
                            message.created_at, exchange, routing_key, None, reason))

    def queue_event(self, now: float, vhost: str, message: Any, queue: str, event: EventKind,
                    reason: Optional[str] = None) -> None:
        """``message`` (its gateway id: a stand-in does) ended in ``queue`` as ``event``
        says (``PURGED``, ``DELETED``, ``DROPPED`` with its ``reason``), or is back in it
        from the store (``RESTORED``)."""
        self._append(_Event(now, self.queue_context(now, vhost, message), event._value_,
                            message.gateway_id, queue, None, message.created_at or None, None,
                            None, None, reason))

    def moved(self, now: float, vhost: str, message: Any, queue: str, to: Any) -> None:
        """Management moved ``message`` from ``queue`` to the queue ``to`` (same gateway
        id: the copy there carries on)."""
        self._append(_Event(now, self.queue_context(now, vhost, message), EventKind.MOVED._value_,
                            message.gateway_id, queue, None, message.created_at or None, None,
                            None, to.routed_to, None, None, None, _stored(message, (to,))))

    # -- the gateway -------------------------------------------------------------------

    def started(self, now: float) -> None:
        """The gateway started: before it restores anything."""
        self._append(_Event(now, self.gateway_context(now), EventKind.STARTED._value_))

    def gap(self, now: float, count: int, since: float) -> None:
        """``count`` records made since ``since`` (seconds) could not be written."""
        self._append(_Event(now, self.gateway_context(now), EventKind.GAP._value_, None, None,
                            None, None, None, None, None, None, None, None, None, count,
                            round(since * 1_000_000)))

    def gateway_context(self, now: float) -> int:
        """The context of the gateway's own events: no vhost, user or protocol."""
        if self._gateway_context is None:
            self._gateway_context = self.context(now, None, None, None, None, None)  # type: ignore[arg-type]
        return self._gateway_context

    # -- the writer's side -------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Records recorded and not yet taken."""
        return len(self.records)

    def take_lines(self, limit: int = DEFAULT_SLICE) -> bytes:
        """The oldest ``limit`` records as JSON Lines (sampling applied), removed from
        ``records``; empty bytes when there are none (or all were sampled out)."""
        chunk = self._take(limit)
        data = json_lines(self.expand(chunk)) if chunk else b""
        self._row_shapes.shipped(not self.records)
        return data

    def take_frame(self, limit: int = DEFAULT_SLICE) -> bytes:
        """``take_lines`` as a frame (``encoding``): what the writer process is sent, and
        turns into the same lines, off the gateway's event loop."""
        chunk = self._take(limit)
        shapes = self._row_shapes.unshipped
        if not chunk and not shapes:
            return b""
        data = frame(chunk, shapes, self.expand)
        self._row_shapes.shipped(not self.records)
        return data

    def expand(self, records: Sequence[Any]) -> list:
        """``records`` (rows among them, of shapes not forgotten yet) as the records they
        stand for: tuples of the tag and the fields of ``records.RECORDS``."""
        return self._row_shapes.expand(records)

    def _take(self, limit: int) -> list:
        records = self.records
        if len(records) <= limit:
            chunk = records[:]
            records.clear()
        else:
            chunk = records[:limit]
            del records[:limit]
        self.records_taken += len(chunk)
        if self.threshold is not None:
            kept = [x for x in chunk if self._keep(x)]
            self.records_sampled_out += len(chunk) - len(kept)
            chunk = kept
        return chunk

    def _keep(self, record: Any) -> bool:
        """Sampling: one decision per message, from its gateway id, so that every record
        of a message is kept or dropped together; records without one are kept."""
        gid = getattr(record, "gateway_id", None)
        return gid is None or zlib.crc32(str(gid).encode()) < self.threshold  # type: ignore[operator]
