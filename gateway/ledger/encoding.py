"""Buffered rows -> JSON Lines bytes, with sampling and the header allow-list applied.

The hot path stores a *row*: a plain tuple in ``ROW_FIELDS`` order (time as the float
``now`` in seconds, the receive time as ``received_at``, headers as the caller's mapping).
All formatting happens here, at flush time: microsecond conversion, latency, header
filtering, sampling, JSON. The output is one JSON object per line, keys as in
``records.COLUMNS``, ``None`` fields left out, every line ``\\n``-terminated.
"""
from __future__ import annotations

import enum
import json
import zlib
from json.encoder import encode_basestring_ascii as _esc
from collections.abc import Mapping
from itertools import chain, compress, repeat
from operator import (add as _concat, is_ as _is, is_not as _is_not, itemgetter, lt as _lt,
                      not_ as _not, sub)
from typing import Callable, Iterable, Iterator, Optional, Sequence, Union

from .buffer import (DELIVERED_ROW_LENGTH, KEY_GATEWAY_ID, KEY_LENGTH, PAIR_SEPARATOR,
                     PUBLISH_ROW_LENGTH, PUBLISH_ROW_NOW, ROUTED_ROW_LENGTH,
                     SETTLED_MANY_ROW_LENGTH, SETTLED_ROW_LENGTH, event_pair)
from .records import LEDGER_SCHEMA_VERSION, EventKind, LedgerRecord

__all__ = ["ROW_FIELDS", "RowEncoder", "compact_rows_apart", "routed_publish_row",
           "sample_threshold"]

#: Layout of a buffered row (the writer's ``record()`` builds it in this order).
ROW_FIELDS: tuple[str, ...] = (
    "now", "event", "vhost", "user", "proto_in", "proto_out", "connection", "link",
    "exchange", "routing_key", "address", "queue", "routed_to", "message_id",
    "correlation_id", "gateway_id", "origin_id", "peer_container", "size",
    "delivery_count", "outcome", "reason", "received_at", "headers",
)
_I = {name: i for i, name in enumerate(ROW_FIELDS)}
# Fields copied as they are (strings, ints, enums with str values) when not None.
_PLAIN = tuple((name, _I[name]) for name in (
    "vhost", "user", "proto_in", "proto_out", "connection", "exchange", "routing_key",
    "address", "queue", "peer_container", "size", "delivery_count", "outcome", "reason",
))
# Fields an application or a protocol may give as non-strings (1.0 ulong/uuid/binary ids,
# 0-9-1 channel numbers, the broker's integer gateway ids): stored as text.
_TEXT_FIELDS = ("link", "message_id", "correlation_id", "gateway_id", "origin_id")
_TEXT = tuple((name, _I[name]) for name in _TEXT_FIELDS)
_NOW, _EVENT, _ROUTED, _GW, _ORIGIN, _RECV, _HEADERS, _REASON = (
    _I["now"], _I["event"], _I["routed_to"], _I["gateway_id"], _I["origin_id"],
    _I["received_at"], _I["headers"], _I["reason"],
)

_INT_FIELDS = frozenset(("size", "delivery_count"))
_DELIVERED = EventKind.DELIVERED.value
_SETTLED = EventKind.SETTLED.value
_DELIVERED_EVENT = _esc(_DELIVERED)
_SETTLED_EVENT = _esc(_SETTLED)
_SCALE = 2 ** 32
_dumps = json.JSONEncoder(separators=(",", ":"), check_circular=False).encode

Row = tuple
Buffered = Union[Row, LedgerRecord]  # rows from record(), records from append()


def sample_threshold(sample_rate: float) -> Optional[int]:
    """crc32 threshold for ``sample_rate`` in [0, 1]; None means keep everything.

    Raises ValueError outside [0, 1].
    """
    if not 0.0 <= sample_rate <= 1.0:
        raise ValueError(f"sample_rate must be within [0, 1], got {sample_rate!r}")
    return None if sample_rate >= 1.0 else int(sample_rate * _SCALE)


def _text(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


class RowEncoder:
    """Encodes buffered rows or records for one writer (its container, allow-list, sampling)."""

    def __init__(self, container_id: str, header_allowlist: Iterable[str] = (),
                 threshold: Optional[int] = None) -> None:
        self.container_id = container_id
        self.allowlist = frozenset(header_allowlist)
        self.threshold = threshold
        self._head = f'{{"v":{LEDGER_SCHEMA_VERSION},"container":{_dumps(container_id)},'
        #: row shape (the type of every field) -> its compiled line encoder, or None
        #: for shapes only the general path handles
        self._shapes: dict[tuple[type, ...], Optional[Callable[[Row], str]]] = {}
        #: recent publish rows, by gateway id: what a delivered row's key refers to
        self.published = PublishedRows()

    def keep(self, gateway_id: Optional[str], origin_id: Optional[str]) -> bool:
        """Sampling: one decision per message, from its first gateway's id when known,
        so every event of a message (on every gateway with the same rate) is kept or
        dropped together. Events without an id are always kept."""
        if self.threshold is None:
            return True
        key = origin_id or gateway_id
        if key is None:
            return True
        return zlib.crc32(_text(key).encode("utf-8", "replace")) < self.threshold

    def batch(self) -> "CompactLines":
        """Fragments for one batch: pass to every ``encode`` of the batch's slices, and
        keep the batch's rows alive until the last (the fragments are found by ``id``)."""
        return CompactLines(self._head, self.allowlist, self.published)

    def encode(self, items: Sequence[Buffered],
               batch: Optional["CompactLines"] = None) -> tuple[bytes, int]:
        """Return (JSON Lines bytes, number of records kept); sampled-out ones are skipped.

        The compact rows the message path buffers (``buffer``'s publish, delivered and
        settled rows) are written from fragments made once per batch (``batch()``; a new
        one when None) for each channel's or link's context and each message's key,
        which the rows share (``CompactLines``); every other row, and every row when
        sampling, takes the general path (``encode_full``). Both write the same bytes.
        With a ``batch`` of the caller's, ``items`` must be apart already
        (``compact_rows_apart``, not repeated here) and kept alive until the batch's last
        ``encode``: the fragments are found by the rows' ``id``.
        """
        if self.threshold is not None:
            return self.encode_full(items)
        if batch is None:  # (the general path takes them apart itself)
            items = compact_rows_apart(items)
            compact = self.batch()
        else:
            compact = batch
        add = compact.add

        def one(item: Buffered, lines: list[str]) -> None:  # the fast path, else the general
            try:
                if add(item, lines):
                    return
            except TypeError:
                pass
            self._encode_items(_full_rows((item,), self.published), lines)

        parts, count = compact.parts(items, one)
        if not count:
            return b"", 0
        return "".join(parts).encode("utf-8"), count

    def encode_full(self, items: Sequence[Buffered]) -> tuple[bytes, int]:
        """``encode`` with every row expanded to a full row first (the general path)."""
        lines: list[str] = []
        self._encode_items(_full_rows(items, self.published), lines)
        if not lines:
            return b"", 0
        lines.append("")
        return "\n".join(lines).encode("utf-8"), len(lines) - 1

    def _encode_items(self, items: Iterable[Buffered], lines: list[str]) -> None:
        append = lines.append
        head = self._head
        shapes = self._shapes
        for item in items:
            if type(item) is tuple:
                if self.threshold is not None and not self.keep(item[_GW], item[_ORIGIN]):
                    continue
                # Rows from one call site share a shape (which fields are set, and their
                # types): one compiled %-template per shape, see _compile_shape.
                shape = tuple(map(type, item))
                try:
                    line = shapes[shape]
                except KeyError:
                    line = self._learn(shape)
                if line is not None:
                    try:
                        append(line(item))
                        continue
                    except (TypeError, AttributeError, ValueError):
                        pass
                obj = self._object(item)  # unusual value types: the general path
            else:  # a LedgerRecord
                if self.threshold is not None and not self.keep(item.gateway_id, item.origin_id):
                    continue
                obj = self._record_object(item)
            append(head + _dumps(obj)[1:])

    def _learn(self, shape: tuple[type, ...]) -> Optional[Callable[[Row], str]]:
        if len(self._shapes) >= _MAX_SHAPES:  # never in practice: a handful of call sites
            self._shapes.clear()
        line = self._shapes[shape] = _compile_shape(shape, self._head, self.allowlist)
        return line

    def _object(self, row: Row) -> dict[str, object]:
        now = row[_NOW]
        event = row[_EVENT]
        obj: dict[str, object] = {
            "ts_us": round(now * 1_000_000),
            "event": event.value if isinstance(event, enum.Enum) else _text(event),
        }
        for name, i in _PLAIN:
            value = row[i]
            if value is not None:
                if isinstance(value, enum.Enum):
                    value = value.value
                obj[name] = int(value) if name in _INT_FIELDS else _text(value)
        for name, i in _TEXT:
            value = row[i]
            if value is not None:
                obj[name] = _text(value)
        routed = row[_ROUTED]
        if routed is not None:
            obj["routed_to"] = list(routed)
        received_at = row[_RECV]
        if received_at is not None:
            obj["latency_us"] = round((now - received_at) * 1_000_000)
        headers = row[_HEADERS]
        if headers and self.allowlist:
            kept = _allowed(headers, self.allowlist)
            if kept:
                obj["headers"] = kept
        return obj

    def _record_object(self, record: LedgerRecord) -> dict[str, object]:
        obj = record.to_json_dict()
        del obj["v"]
        obj.pop("container", None)  # the writer's container id is authoritative
        headers = obj.pop("headers", None)
        if headers and self.allowlist:
            kept = _allowed(headers, self.allowlist)
            if kept:
                obj["headers"] = kept
        return obj


def _full_rows(items: Sequence[Buffered],
               published: Optional["PublishedRows"] = None) -> Iterator[Buffered]:
    """Full rows, whatever form they were buffered in: a row holding two events
    (``record(..., then=...)``) is the first without ``routed_to``/``reason``, then the
    second without headers; the compact rows (``buffer``'s publish, delivered and settled
    rows) are expanded, a key given by gateway id found in ``published``."""
    if published is None:
        published = PublishedRows()
    for item in items:
        if type(item) is not tuple:
            if item is not None:  # None: a publish row's place left empty (``buffer``)
                yield item
            continue
        n = len(item)
        if n == DELIVERED_ROW_LENGTH:
            now, context, key, queue, delivery_count = item
            yield _delivery_row(now, _DELIVERED, context, published.key(key), queue,
                                delivery_count, None, None)
        elif n == SETTLED_ROW_LENGTH:
            now, delivered, outcome, reason = item
            _at, context, key, queue, delivery_count = delivered
            yield _delivery_row(now, _SETTLED, context, published.key(key), queue,
                                delivery_count, outcome, reason)
        elif n == PUBLISH_ROW_LENGTH:
            published.add(item)
            yield from _publish_rows(item)
        elif n == SETTLED_MANY_ROW_LENGTH or n == ROUTED_ROW_LENGTH:
            yield from _full_rows(compact_rows_apart((item,)), published)
        elif PAIR_SEPARATOR in item[_EVENT]:
            first, second = item[_EVENT].split(PAIR_SEPARATOR)
            yield (item[:_EVENT] + (first,) + item[_EVENT + 1:_ROUTED] + (None,)
                   + item[_ROUTED + 1:_REASON] + (None,) + item[_REASON + 1:])
            yield item[:_EVENT] + (second,) + item[_EVENT + 1:_HEADERS] + (None,)
        else:
            yield item


def compact_rows_apart(items: Sequence[Buffered]) -> Sequence[Buffered]:
    """``items`` with each settled-many row (``buffer``) replaced by the settled rows it
    stands for, and each routed row by its publish row; ``items`` itself when there is
    neither (found without a loop in Python unless the batch holds something without a
    length). The message path buffers these forms because they cost it less; here they
    become the forms the rest of the encoder writes."""
    try:
        lengths = set(map(len, items))  # type: ignore[arg-type]
        if SETTLED_MANY_ROW_LENGTH not in lengths and ROUTED_ROW_LENGTH not in lengths:
            return items
    except TypeError:  # a publish row's empty place, a LedgerRecord
        pass
    apart: list = []
    append = apart.append
    for item in items:
        if type(item) is tuple:
            n = len(item)
            if n == ROUTED_ROW_LENGTH:
                append(routed_publish_row(item))
                continue
            if n == SETTLED_MANY_ROW_LENGTH:
                now, delivered_rows, outcome = item
                apart.extend([(now, delivered, outcome, None) for delivered in delivered_rows])
                continue
        append(item)
    return apart


_RECEIVED_ROUTED = event_pair(EventKind.RECEIVED, EventKind.ROUTED)


def routed_publish_row(item: tuple) -> tuple:
    """The publish row (``buffer``) a routed row stands for."""
    context, exchange, routing_key, message_id, correlation_id, gateway_id, size, now, \
        routed_to = item
    return (context[2], exchange, routing_key, message_id, correlation_id, gateway_id, size,
            now, now, _RECEIVED_ROUTED, context, routed_to, None, None)


def _publish_rows(item: tuple) -> tuple[tuple, tuple]:
    (proto_in, exchange, routing_key, message_id, correlation_id, gateway_id, size, _at,
     now, events, context, routed_to, reason, headers) = item
    first, second = events.split(PAIR_SEPARATOR)
    vhost, user, _proto, connection, link, address = context
    head = (vhost, user, proto_in, None, connection, link, exchange, routing_key, address, None)
    ids = (message_id, correlation_id, gateway_id, None, None, size, None, None)
    return ((now, first) + head + (None,) + ids + (None, None, headers),
            (now, second) + head + (routed_to,) + ids + (reason, None, None))


def _delivery_row(now: float, event: str, context: tuple, key: tuple, queue: object,
                  delivery_count: object, outcome: object, reason: object) -> tuple:
    vhost, user, proto_out, connection, link, address = context
    proto_in, exchange, routing_key, message_id, correlation_id, gateway_id, size, received_at = \
        key[:KEY_LENGTH]
    if event != _DELIVERED:  # a settlement names the queue, not the publish's exchange
        exchange = routing_key = None
    return (now, event, vhost, user, proto_in, proto_out, connection, link, exchange,
            routing_key, address, queue, None, message_id, correlation_id, gateway_id, None,
            None, size, delivery_count, outcome, reason, received_at, None)


_UNSEEN = object()
#: a key is a ``message_key`` or a publish row (which begins with one)
_KEY_LENGTHS = (KEY_LENGTH, PUBLISH_ROW_LENGTH)
# column by column (``CompactLines.parts``): a row's slot by its length, type sets
_PUBLISH, _DELIVERED_SLOT, _SETTLED_SLOT, _OTHER = range(4)
_SLOTS = 4
_SLOT_OF_LENGTH = {PUBLISH_ROW_LENGTH: _PUBLISH, DELIVERED_ROW_LENGTH: _DELIVERED_SLOT,
                   SETTLED_ROW_LENGTH: _SETTLED_SLOT}
_JUST_TUPLES = {tuple}
_JUST_INTS = {int}
_JUST_STR = {str}
_JUST_NONE = {type(None)}
_NUMBERS = {int, float}
_NUMBERS_OR_NONE = {int, float, type(None)}
_INT_OR_NONE = {int, type(None)}
_STR_OR_NONE_SET = {str, type(None)}
_THIRD = itemgetter(2)
_GATEWAY_ID_OF = itemgetter(KEY_GATEWAY_ID)
_IDS = '%s%s,"gateway_id":"%d"'
_IDS_AND_SIZE = _IDS + ',"size":%d'


#: publish rows are kept at least this long (by their own times) for the delivered rows
#: that refer to them by gateway id; the gateway refers to younger ones only
#: (``feed.KEY_REF_SECONDS``, which says what the length costs and saves)
PUBLISHED_KEEP_SECONDS = 4.5


class PublishedRows:
    """The publish rows of the last ``PUBLISHED_KEEP_SECONDS`` to twice that (by the rows'
    own times), by gateway id: a delivered row refers to its key by gateway id when the
    gateway shipped the publish row in an earlier frame (``EventBuffer.gid_from``)."""

    __slots__ = ("current", "previous", "fragments", "previous_fragments", "rotate_at",
                 "unknown")

    def __init__(self) -> None:
        self.current: dict[int, tuple] = {}
        self.previous: dict[int, tuple] = {}
        #: the lines' fragments of the rows in ``current`` and ``previous`` (``KeyParts``,
        #: or None where the fast path does not write the row), by the same gateway ids
        self.fragments: dict[int, Optional[KeyParts]] = {}
        self.previous_fragments: dict[int, Optional[KeyParts]] = {}
        self.rotate_at: Optional[float] = None
        #: references to a publish row not kept (a writer restarted, a frame dropped)
        self.unknown = 0

    def add(self, row: tuple, fragments: Optional["KeyParts"] = None) -> None:
        gateway_id, now = row[KEY_GATEWAY_ID], row[PUBLISH_ROW_NOW]
        if type(gateway_id) is not int:
            return
        if type(now) in _NUMBER:
            if self.rotate_at is None:
                self.rotate_at = now + PUBLISHED_KEEP_SECONDS
            elif now >= self.rotate_at:
                self._rotate(now)
        self.current[gateway_id] = row
        self.fragments[gateway_id] = fragments

    def _rotate(self, now: float) -> None:
        self.previous, self.previous_fragments = self.current, self.fragments
        self.current, self.fragments = {}, {}
        self.rotate_at = now + PUBLISHED_KEEP_SECONDS

    def add_all(self, rows: Sequence[tuple], gateway_ids: Sequence[int],
                fragments: Sequence["KeyParts"], latest: float) -> bool:
        """``add`` for each of ``rows`` (with integer ``gateway_ids``, and times up to
        ``latest``), at once; False (nothing added) when one of them would rotate."""
        if self.rotate_at is None or latest >= self.rotate_at:
            return False
        self.current.update(zip(gateway_ids, rows))
        self.fragments.update(zip(gateway_ids, fragments))
        return True

    def get(self, gateway_id: int) -> Optional[tuple]:
        return self.current.get(gateway_id) or self.previous.get(gateway_id)

    def key(self, key: object) -> object:
        """``key`` itself, or the publish row it refers to, or for one not kept a key
        with the gateway id alone (the event is written without the publish's fields)."""
        if type(key) is not int:
            return key
        row = self.get(key)
        if row is None:
            self.unknown += 1
            return (None, None, None, None, None, key, None, None)
        return row


class KeyParts(tuple):
    """A key's fragments: (proto_in, exchange + routing_key, ids + size, received_at).

    A tuple hashed by identity: looking a column of keys up among gateway ids
    (``map(dict.get, column, column)``) passes the ones already made through unchanged,
    and cheaply."""

    __slots__ = ()
    __hash__ = object.__hash__  # type: ignore[assignment]


_JUST_KEY_PARTS = {KeyParts}
_TUPLES_AND_INTS = {tuple, int}
_TUPLES_AND_NONE = {tuple, type(None)}
_KEY_LENGTHS_SET = {KEY_LENGTH, PUBLISH_ROW_LENGTH}


class CompactLines:
    """JSON lines of compact rows, from fragments shared within one batch.

    A context (``ledger_context``: vhost, user, proto_out, connection, link, address) is
    shared by every row of a channel or link, and a key (``message_key``, or the publish
    row that begins with one) by the rows of one message; their fields are escaped once
    per batch here (keyed by ``id``: the batch keeps the tuples alive while it is
    written) instead of once per line. The fields
    come out in ``ROW_FIELDS`` order, exactly as ``_compile_shape``'s templates write
    them. ``add`` returns False for a row it does not take (another form, a value of an
    unusual type, headers to filter) or raises TypeError (an unhashable value): the caller
    writes that one the general way.
    """

    __slots__ = ("_head", "_filter_headers", "_contexts", "_unwritable", "_copies", "_keys",
                 "_published",
                 "_routes", "_queues", "_outcomes", "_reasons", "_counts", "_pairs", "_routed",
                 "_starts", "_ends", "_protos", "_exchanges", "_routing_keys")

    def __init__(self, head: str, allowlist: frozenset[str],
                 published: Optional[PublishedRows] = None) -> None:
        self._head = head
        #: publish rows by gateway id, for delivered rows that refer to theirs so
        self._published = PublishedRows() if published is None else published
        #: headers are written (filtered): a publish row that carries some goes the general way
        self._filter_headers = bool(allowlist)
        #: id(context) -> (vhost+user, proto_out+connection+link, connection+link, address)
        self._contexts: dict[int, Optional[tuple[str, str, str, str]]] = {}
        #: id(key given whole in a delivered row) -> its parts (``_copied_key_parts``)
        self._copies: dict[int, tuple] = {}
        #: the ids of the contexts above that the fast path does not write (None there)
        self._unwritable: set[int] = set()
        #: id(key) -> (proto_in, exchange+routing_key, ids+size, received_at) or None
        self._keys: dict[int, Optional[tuple[str, str, str, object]]] = {}
        #: (proto_in, exchange, routing_key) -> (proto_in, exchange+routing_key), or ()
        self._routes: dict[tuple, Union[tuple[str, str], tuple[()]]] = {}
        #: value -> ',"column":value' for the queue, outcome, reason and delivery_count
        #: columns ('' for None; only strings, and ints for the count, are stored)
        self._queues: dict[object, str] = {None: ""}
        self._outcomes: dict[object, str] = {None: ""}
        self._reasons: dict[object, str] = {None: ""}
        self._counts: dict[object, str] = {None: ""}
        #: a row's time -> the line's start, up to the event kind
        self._starts: dict[object, str] = {}
        #: (now - received_at) -> the line's end, from its latency column
        self._ends: dict[object, str] = {}
        #: a publish's proto_in, exchange and routing_key -> their columns ('' for None;
        #: strings only)
        self._protos: dict[object, str] = {None: ""}
        self._exchanges: dict[object, str] = {None: ""}
        self._routing_keys: dict[object, str] = {None: ""}
        #: a publish row's events -> its two kinds escaped, or () for the general path
        self._pairs: dict[object, Union[tuple[str, str], tuple[()]]] = {}
        #: a publish row's routed_to -> its column ('' for None)
        self._routed: dict[object, str] = {None: ""}

    # -- a slice at a time, column by column ------------------------------------------

    def parts(self, items: Sequence[object],
              general: Callable[[object, list[str]], None]) -> tuple[Iterable[str], int]:
        """The lines of ``items`` in order as strings to concatenate (each line
        ``\\n``-terminated), and how many lines there are.

        Why column by column: the compact rows of a slice are taken apart into columns
        (``zip(*rows)``), each column becomes its fragments by ``map`` over the caches
        above, and the lines are the fragments zipped back together: no Python code runs
        per row, which more than halved the writer's work for a message. A kind of row
        with anything unusual in the slice (a type the fast path does not write, a
        publish row that rotates ``PublishedRows``, a gateway id used twice) is written
        row by row (``add``, else ``general``) instead, which writes the same bytes.
        """
        try:
            made = self._columns(items, general)
        except (TypeError, KeyError):  # an unhashable value, an unorderable time
            made = None
        if made is None:
            return self._row_by_row(items, general)
        return made

    def _row_by_row(self, items: Sequence[object],
                    general: Callable[[object, list[str]], None]) -> tuple[list[str], int]:
        lines: list[str] = []
        for item in items:
            general(item, lines)
        return [line + "\n" for line in lines], len(lines)

    def _rows_parts(self, items: Sequence[object],
                    general: Callable[[object, list[str]], None]) -> tuple[list[tuple], int]:
        """One tuple of ``\\n``-terminated lines per item, written row by row."""
        per_row: list[tuple] = []
        count = 0
        for item in items:
            lines: list[str] = []
            general(item, lines)
            count += len(lines)
            per_row.append(tuple(line + "\n" for line in lines))
        return per_row, count

    def _columns(self, items: Sequence[object], general: Callable[[object, list[str]], None]
                 ) -> Optional[tuple[Iterable[str], int]]:
        if not items:
            return None
        types = set(map(type, items))
        if types != _JUST_TUPLES:
            if types != _TUPLES_AND_NONE:
                return None
            # a publish row's place left empty (``buffer``): nothing to write
            items = list(compress(items, map(_is_not, items, repeat(None))))
        slots = list(map(_SLOT_OF_LENGTH.get, map(len, items), repeat(_OTHER)))  # type: ignore[arg-type]
        present = set(slots)
        rows = {slot: (items if len(present) == 1 else
                       list(compress(items, map(slot.__eq__, slots))))
                for slot in present}
        publish = rows.get(_PUBLISH)
        delivered = rows.get(_DELIVERED_SLOT)
        settled = rows.get(_SETTLED_SLOT)
        if settled is not None:
            settled_columns = tuple(zip(*settled))
            inner = settled_columns[1]
            if set(map(type, inner)) != _JUST_TUPLES or \
                    set(map(len, inner)) != {DELIVERED_ROW_LENGTH}:  # type: ignore[arg-type]
                return None
        if publish is not None and (delivered is not None or settled is not None):
            keys: tuple = ()
            if delivered is not None:
                keys = tuple(map(_THIRD, delivered))
            if settled is not None:
                keys += tuple(map(_THIRD, settled_columns[1]))
            if not self._references_resolve_alike(slots, publish, keys):
                return None
        per_kind: dict[int, list[tuple]] = {}
        count = 0
        if publish is not None:  # first: the deliveries of its messages may follow it
            made = self._publish_parts(publish)
            if made is None:
                return None
            per_kind[_PUBLISH], count = made, 2 * len(publish)
        if delivered is not None:
            made = self._delivery_parts(tuple(zip(*delivered)), None, None)
            if made is None:
                return None
            per_kind[_DELIVERED_SLOT] = made
            count += len(delivered)
        if settled is not None:
            now, inner, outcomes, reasons = settled_columns
            _at, contexts, keys, queues, counts = zip(*inner)
            made = self._delivery_parts((now, contexts, keys, queues, counts), outcomes, reasons)
            if made is None:
                return None
            per_kind[_SETTLED_SLOT] = made
            count += len(settled)
        if _OTHER in present:
            per_kind[_OTHER], others = self._rows_parts(rows[_OTHER], general)
            count += others
        if len(present) == 1:
            return chain.from_iterable(per_kind[slots[0]]), count
        iterators = [iter(per_kind.get(slot, ())) for slot in range(_SLOTS)]
        return chain.from_iterable(map(next, map(iterators.__getitem__, slots))), count

    def _references_resolve_alike(self, slots: list, publish: list,
                                  keys: Sequence[object]) -> bool:
        """Whether references by gateway id resolve column by column as they would row by
        row, publish rows of the slice going first: none of them refers to a publish row
        of the slice, or each such row's gateway id is new and unique and the row comes
        before the references to it (always so for what the gateway ships: a publish
        reserves its row's place before routing delivers). ``slots``: each item's kind;
        ``keys``: the delivered rows' keys, then the settled rows'."""
        ids = list(map(_GATEWAY_ID_OF, publish))
        by_id = list(map(_is, map(type, keys), repeat(int)))
        referred_keys = list(compress(keys, by_id))
        referred = set(ids).intersection(referred_keys)
        if not referred:
            return True
        published = self._published
        # keys().isdisjoint walks the small set; set.isdisjoint(dict) walked every key
        # the writer keeps (27% of the writer's CPU in a 300k-message harness)
        if len(set(ids)) != len(publish) or not published.current.keys().isdisjoint(referred) \
                or not published.previous.keys().isdisjoint(referred):
            return False
        positions = range(len(slots))
        publish_at = dict(zip(ids, compress(positions, map(_PUBLISH.__eq__, slots))))
        key_at = chain(compress(positions, map(_DELIVERED_SLOT.__eq__, slots)),
                       compress(positions, map(_SETTLED_SLOT.__eq__, slots)))
        # a reference to no publish row of the slice compares -1: always after
        return all(map(_lt, map(publish_at.get, referred_keys, repeat(-1)),
                       compress(key_at, by_id)))

    def _publish_parts(self, rows: list) -> Optional[list[tuple]]:
        n = len(rows)
        (protos, exchanges, routing_keys, message_ids, correlation_ids, gateway_ids, sizes,
         received, nows, events, contexts, routed, reasons, headers) = zip(*rows)
        if (self._filter_headers and headers.count(None) != n) \
                or set(map(type, gateway_ids)) != _JUST_INTS \
                or not set(map(type, nows)) <= _NUMBERS:
            return None
        parts = self._key_parts((protos, exchanges, routing_keys, message_ids, correlation_ids,
                                 gateway_ids, sizes, received))
        if parts is None:
            return None
        k0, k1, k2, _received = parts
        made = list(map(KeyParts, zip(k0, k1, k2, received)))
        context = self._context_column(contexts)
        pairs = self._pair_column(events)
        routed_to = self._routed_column_of(routed)
        why = self._text_column(self._reasons, "reason", reasons)
        if context is None or pairs is None or routed_to is None or why is None:
            return None
        starts = self._start_column(nows)
        # the last check, and the first change to what outlives the slice
        if not self._published.add_all(rows, gateway_ids, made, max(nows)):
            return None
        c0, _c1, c2, c3 = zip(*context)
        first, second = zip(*pairs)
        return list(zip(starts, first, c0, k0, c2, k1, c3, k2, repeat("}\n", n),
                        starts, second, c0, k0, c2, k1, c3, routed_to, k2, why,
                        repeat("}\n", n)))

    def _delivery_parts(self, columns: tuple, outcomes: Optional[tuple],
                        reasons: Optional[tuple]) -> Optional[list[tuple]]:
        """Delivered rows' parts (``outcomes`` None), or settled rows' from the columns
        of the rows they settle, their outcomes and reasons."""
        nows, contexts, keys, queues, counts = columns
        if not set(map(type, nows)) <= _NUMBERS or not set(map(type, counts)) <= _INT_OR_NONE:
            return None
        context = self._context_column(contexts)
        key = self._key_columns(keys)
        queue = self._text_column(self._queues, "queue", queues)
        count = self._count_column(counts)
        if context is None or key is None or queue is None:
            return None
        k0, k1, k2, received = key
        if None in received:
            ends = [self._end(now - at) if at is not None else "}\n"
                    for now, at in zip(nows, received)]
        else:
            ends = self._end_column(list(map(sub, nows, received)))
        starts = self._start_column(nows)
        c0, c1, _c2, c3 = zip(*context)
        if outcomes is None:
            return list(zip(starts, repeat(_DELIVERED_EVENT), c0, k0, c1, k1, c3, queue, k2,
                            count, ends))
        outcome = self._text_column(self._outcomes, "outcome", outcomes)
        why = self._text_column(self._reasons, "reason", reasons)  # type: ignore[arg-type]
        if outcome is None or why is None:
            return None
        return list(zip(starts, repeat(_SETTLED_EVENT), c0, k0, c1, c3, queue, k2, count,
                        outcome, why, ends))

    def _context_column(self, contexts: Sequence[object]) -> Optional[list]:
        ids = list(map(id, contexts))
        try:
            made = list(map(self._contexts.__getitem__, ids))
        except KeyError:
            for key, context in dict(zip(ids, contexts)).items():
                if key not in self._contexts:
                    self._context(context)
            made = list(map(self._contexts.__getitem__, ids))
        if self._unwritable and not self._unwritable.isdisjoint(ids):
            return None
        return made

    def _key_columns(self, keys: Sequence[object]) -> Optional[tuple[Sequence, ...]]:
        """The keys' fragments as four columns (``KeyParts``' fields): a key given whole
        (a publish row's copy, or a ``message_key``) is made from its fields here, one
        given by gateway id is the publish row's (``PublishedRows``)."""
        kinds = set(map(type, keys))
        if kinds == _JUST_TUPLES:
            return self._copied_key_parts(keys)
        if kinds == _JUST_INTS:
            made = self._referred_key_parts(keys)
            return None if made is None else tuple(zip(*made))
        if kinds != _TUPLES_AND_INTS:
            return None
        referred = list(map(_is, map(type, keys), repeat(int)))
        copied = self._copied_key_parts(list(compress(keys, map(_not, referred))))
        by_id = self._referred_key_parts(list(compress(keys, referred)))
        if copied is None or by_id is None:
            return None
        made = [iter(list(map(KeyParts, zip(*copied)))), iter(by_id)]
        return tuple(zip(*map(next, map(made.__getitem__, referred))))

    def _copied_key_parts(self, keys: Sequence[tuple]) -> Optional[tuple[Sequence, ...]]:
        """Keys given whole: a settlement's is its delivery's (one tuple in a frame), so
        the parts made for one column are kept by ``id`` for the next."""
        ids = list(map(id, keys))
        try:
            return tuple(zip(*map(self._copies.__getitem__, ids)))
        except KeyError:
            pass
        if not set(map(len, keys)) <= _KEY_LENGTHS_SET:
            return None
        parts = self._key_parts(tuple(zip(*keys))[:KEY_LENGTH])
        if parts is not None:
            self._copies.update(zip(ids, zip(*parts)))
        return parts

    def _referred_key_parts(self, keys: Sequence[int]) -> Optional[list]:
        published = self._published
        made = list(map(published.fragments.get, keys, keys))  # made, or the id itself
        made = list(map(published.previous_fragments.get, made, made))
        if set(map(type, made)) != _JUST_KEY_PARTS:
            for i in compress(range(len(made)), map(_is_not, map(type, made),
                                                    repeat(KeyParts))):
                made[i] = self._key(keys[i])  # None: not kept, the general path writes it
            if None in made:
                return None
        return made

    def _key_parts(self, columns: tuple[Sequence, ...]) -> Optional[tuple[Sequence, ...]]:
        """A column of keys' fragments, (proto_in, exchange + routing_key, ids + size,
        received_at) columns from the keys' eight, as ``_make_key`` makes them one by one;
        None when a value is of a type left to it."""
        protos, exchanges, routing_keys, message_ids, correlation_ids, gateway_ids, sizes, \
            received = columns
        if not set(map(type, received)) <= _NUMBERS_OR_NONE:
            return None
        k0 = self._text_column(self._protos, "proto_in", protos)
        exchange = self._text_column(self._exchanges, "exchange", exchanges)
        routing_key = self._text_column(self._routing_keys, "routing_key", routing_keys)
        mids = _id_column("message_id", message_ids)
        cids = _id_column("correlation_id", correlation_ids)
        if k0 is None or exchange is None or routing_key is None or mids is None \
                or cids is None or set(map(type, gateway_ids)) != _JUST_INTS:
            return None
        size_types = set(map(type, sizes))
        if size_types == _JUST_INTS:
            k2 = list(map(_IDS_AND_SIZE.__mod__, zip(mids, cids, gateway_ids, sizes)))
        elif size_types == _JUST_NONE:
            k2 = list(map(_IDS.__mod__, zip(mids, cids, gateway_ids)))
        else:
            return None
        return k0, list(map(_concat, exchange, routing_key)), k2, received

    @staticmethod
    def _cached_column(cache: dict, column: Sequence[object],
                       make: Callable[[object], Optional[str]]) -> Optional[list]:
        try:
            return list(map(cache.__getitem__, column))
        except KeyError:
            pass
        for value in set(column).difference(cache):
            text = make(value)
            if text is None:
                return None
            cache[value] = text
        return list(map(cache.__getitem__, column))

    def _text_column(self, cache: dict[object, str], name: str,
                     column: Sequence[object]) -> Optional[list]:
        """A string column's fragments ('' for None); None when it holds another type."""
        if not set(map(type, column)) <= _STR_OR_NONE_SET:
            return None
        return self._cached_column(cache, column, lambda value: self._column(cache, name, value))

    def _count_column(self, counts: Sequence[object]) -> Optional[list]:
        return self._cached_column(self._counts, counts,
                                   lambda count: f',"delivery_count":{count}')

    def _start_column(self, nows: Sequence[object]) -> list:
        head = self._head
        return self._cached_column(  # type: ignore[return-value]
            self._starts, nows,
            lambda now: f'{head}"ts_us":{round(now * 1000000)},"event":')  # type: ignore[operator]

    def _end(self, latency: object) -> str:
        text = self._ends.get(latency)
        if text is None:
            text = self._ends[latency] = (
                f',"latency_us":{round(latency * 1000000)}}}\n')  # type: ignore[operator]
        return text

    def _end_column(self, latencies: list) -> list:
        return self._cached_column(self._ends, latencies, self._end)  # type: ignore[return-value]

    def _pair_column(self, events: Sequence[object]) -> Optional[list]:
        if set(map(type, events)) != _JUST_STR:
            return None
        made = self._cached_column(self._pairs, events, _event_pair_parts)
        return None if made is None or () in made else made

    def _routed_column_of(self, routed: Sequence[object]) -> Optional[list]:
        made = list(map(self._routed.get, routed))  # TypeError for a list: row by row
        if None in made:
            for i in compress(range(len(made)), map(_is, made, repeat(None))):
                made[i] = self._routed_column(routed[i])
            if None in made:
                return None
        return made

    def add(self, item: object, lines: list[str]) -> bool:
        """Append ``item``'s lines and return True, or return False (or raise TypeError,
        for an unhashable value where a string belongs) for the general path."""
        if type(item) is not tuple:
            return False
        n = len(item)  # type: ignore[arg-type]
        if n == PUBLISH_ROW_LENGTH:
            now, events, context, routed_to, reason, headers = item[KEY_LENGTH:]  # type: ignore[index]
            if (headers is not None and self._filter_headers) or type(now) not in _NUMBER \
                    or type(events) is not str:
                return False
            ctx = self._contexts.get(id(context), _UNSEEN)
            if ctx is _UNSEEN:
                ctx = self._context(context)
            k = self._key(item)  # new: a publish row is its message's key
            self._published.add(item, k)
            pair = self._pairs.get(events)
            if pair is None:
                pair = self._pairs[events] = _event_pair_parts(events)
            if ctx is None or k is None or not pair:
                return False
            try:
                routed = self._routed[routed_to]
            except (KeyError, TypeError):  # new, or unhashable
                routed = self._routed_column(routed_to)
                if routed is None:
                    return False
            why = self._reasons.get(reason)
            if why is None:
                why = self._column(self._reasons, "reason", reason)
                if why is None:
                    return False
            start = f'{self._head}"ts_us":{round(now * 1000000)},"event":'
            common = f"{ctx[0]}{k[0]}{ctx[2]}{k[1]}{ctx[3]}"
            lines.append(f"{start}{pair[0]}{common}{k[2]}}}")
            lines.append(f"{start}{pair[1]}{common}{routed}{k[2]}{why}}}")
            return True

        # A delivery and a settlement are written the same way: one f-string, the caches
        # read inline (this runs twice per message). A settlement's fields are its
        # delivery's, without the publish's exchange and routing key.
        if n == DELIVERED_ROW_LENGTH:
            now, context, key, queue, count = item  # type: ignore[misc]
            event = _DELIVERED_EVENT
            out = why = ""
        elif n == SETTLED_ROW_LENGTH:
            now, delivered, outcome, reason = item  # type: ignore[misc]
            if type(delivered) is not tuple or len(delivered) != DELIVERED_ROW_LENGTH:
                return False
            _at, context, key, queue, count = delivered
            event = _SETTLED_EVENT
            out = self._outcomes.get(outcome)
            if out is None:
                out = self._column(self._outcomes, "outcome", outcome)
            why = self._reasons.get(reason)
            if why is None:
                why = self._column(self._reasons, "reason", reason)
        else:
            return False
        ctx = self._contexts.get(id(context), _UNSEEN)
        if ctx is _UNSEEN:
            ctx = self._context(context)
        k = self._keys.get(id(key), _UNSEEN)
        if k is _UNSEEN:
            k = self._key(key)
        q = self._queues.get(queue)
        if q is None:
            q = self._column(self._queues, "queue", queue)
        if count is None:
            dc = ""
        elif type(count) is int:  # not a bool, which equals an int and is written otherwise
            dc = self._counts.get(count)
            if dc is None:
                dc = self._counts[count] = f',"delivery_count":{count}'
        else:
            dc = None
        if ctx is None or k is None or type(now) not in _NUMBER or q is None or dc is None \
                or out is None or why is None:
            return False
        received_at = k[3]
        latency = "" if received_at is None else (  # a number: _key checked it
            f',"latency_us":{round((now - received_at) * 1000000)}')
        route = k[1] if event is _DELIVERED_EVENT else ""
        lines.append(f'{self._head}"ts_us":{round(now * 1000000)},"event":{event}{ctx[0]}{k[0]}'
                     f"{ctx[1]}{route}{ctx[3]}{q}{k[2]}{dc}{out}{why}{latency}}}")
        return True

    @staticmethod
    def _column(cache: dict[object, str], name: str, value: object) -> Optional[str]:
        """',"name":value' for a string ``value`` (stored in ``cache``), None for another
        type (the general path writes it)."""
        if type(value) is not str:
            return None
        text = cache[value] = f',"{name}":{_esc(value)}'
        return text

    def _routed_column(self, routed_to: object) -> Optional[str]:
        try:
            names = ",".join(map(_esc, routed_to))  # type: ignore[call-overload]
            text = f',"routed_to":[{names}]'
        except TypeError:
            return None
        try:
            self._routed[routed_to] = text
        except TypeError:  # unhashable: written, not stored
            pass
        return text

    def _context(self, context: object) -> Optional[tuple[str, str, str, str]]:
        try:
            return self._contexts[id(context)]
        except KeyError:
            pass
        made = None
        if type(context) is tuple and len(context) == 6:  # type: ignore[arg-type]
            vhost, user, proto_out, connection, link, address = context  # type: ignore[misc]
            parts = (_plain("vhost", vhost), _plain("user", user), _plain("proto_out", proto_out),
                     _plain("connection", connection), _as_text("link", link),
                     _plain("address", address))
            if None not in parts:
                made = (parts[0] + parts[1], parts[2] + parts[3] + parts[4], parts[3] + parts[4],
                        parts[5])
        self._contexts[id(context)] = made
        if made is None:
            self._unwritable.add(id(context))
        return made

    def _key(self, key: object) -> Optional[tuple[str, str, str, object]]:
        if type(key) is int:  # a publish row's gateway id (``EventBuffer.gid_from``): by value,
            # an int's identity says nothing (one object may stand for two rows' ids)
            row = self._published.get(key)  # None if not kept: the general path writes it
            return None if row is None else self._key(row)
        made = self._keys.get(id(key), _UNSEEN)
        if made is not _UNSEEN:
            return made  # type: ignore[return-value]
        made = None
        if type(key) is tuple and len(key) in _KEY_LENGTHS:  # type: ignore[arg-type]
            made = self._make_key(key)  # type: ignore[arg-type]
        self._keys[id(key)] = made
        return made

    def _make_key(self, key: tuple) -> Optional[tuple[str, str, str, object]]:
        """The fragments of a key (or publish row), or None for one only the general
        path writes."""
        made = None
        proto_in, exchange, routing_key, message_id, correlation_id, gateway_id, size, at = \
            key[:KEY_LENGTH]  # type: ignore[index]
        # the publish's columns repeat from message to message: made once per batch
        try:
            route = self._routes.get((proto_in, exchange, routing_key))
        except TypeError:  # unhashable: not a type the fast path writes
            route = ()
        if route is None:
            route = self._routes[(proto_in, exchange, routing_key)] = _route_parts(
                proto_in, exchange, routing_key)
        # the ids are the message's own (the usual types first, without a call)
        mid = "" if message_id is None else (
            f',"message_id":{_esc(message_id)}' if type(message_id) is str
            else _as_text("message_id", message_id))
        cid = "" if correlation_id is None else _as_text("correlation_id", correlation_id)
        gid = (f',"gateway_id":"{gateway_id}"' if type(gateway_id) is int
               else _as_text("gateway_id", gateway_id))
        sized = "" if size is None else (f',"size":{size}' if type(size) is int else None)
        if (route and mid is not None and cid is not None and gid is not None
                and sized is not None and (at is None or type(at) in _NUMBER)):
            made = KeyParts((route[0], route[1], f"{mid}{cid}{gid}{sized}", at))
        return made


def _id_column(name: str, column: Sequence[object]) -> Optional[list]:
    """A message's or correlation id's fragments ('' for None), as ``_make_key`` writes
    them; None when one is of a type only the general path writes."""
    kinds = set(map(type, column))
    if kinds == _JUST_NONE:
        return [""] * len(column)
    if kinds == _JUST_STR:
        return list(map(_concat, repeat(f',"{name}":'), map(_esc, column)))
    made = ["" if value is None else _as_text(name, value) for value in column]
    return None if None in made else made


def _event_pair_parts(events: object) -> Union[tuple[str, str], tuple[()]]:
    """A publish row's ``events`` as its two kinds, escaped; () for the general path."""
    if type(events) is not str:
        return ()
    first, sep, second = events.partition(PAIR_SEPARATOR)
    if not sep or PAIR_SEPARATOR in second:
        return ()
    return _esc(first), _esc(second)


def _route_parts(proto_in: object, exchange: object,
                 routing_key: object) -> Union[tuple[str, str], tuple[()]]:
    """(proto_in, exchange+routing_key) fragments, or () for a type only the general
    path writes."""
    parts = (_plain("proto_in", proto_in), _plain("exchange", exchange),
             _plain("routing_key", routing_key))
    if None in parts:
        return ()
    return parts[0], parts[1] + parts[2]  # type: ignore[operator]


def _plain(name: str, value: object) -> Optional[str]:
    """A string column's fragment ('' for None), None for any other type."""
    if value is None:
        return ""
    if type(value) is str:
        return f',"{name}":{_esc(value)}'
    return None


def _as_text(name: str, value: object) -> Optional[str]:
    """A column stored as text (``_TEXT_FIELDS``): strings, and integers written as text."""
    if type(value) is int:
        return f',"{name}":"{value}"'
    return _plain(name, value)


def _allowed(headers: Mapping[str, object], allowlist: frozenset[str]) -> dict[str, str]:
    out = {}
    for name in allowlist:
        value = headers.get(name)
        if value is not None:
            out[name] = _text(value)
    return out


_MAX_SHAPES = 4096
_NUMBER = (int, float)


def _compile_shape(shape: tuple[type, ...], head: str,
                   allowlist: frozenset[str]) -> Optional[Callable[[Row], str]]:
    """A function turning a row of exactly ``shape`` into its JSON line (without ``\\n``),
    or None when a field's type needs the general path.

    The line is one ``%`` format of a template fixed for the shape: absent fields cost
    nothing, strings (str enums included) go through the C string escaper, integers
    through ``%d``. This is about 3x faster than testing every field of every row, and
    encoding is most of the ledger's cost. Values the template cannot take (a list of
    non-strings in ``routed_to``, say) raise and the caller falls back to the general path.
    """
    if len(shape) != len(ROW_FIELDS):
        return None
    parts = [head.replace("%", "%%")]
    args: list[str] = []
    first = True

    def key(name: str) -> str:
        nonlocal first
        text = ("" if first else ",") + f'"{name}":'
        first = False
        return text

    for i, (name, kind) in enumerate(zip(ROW_FIELDS, shape)):
        if kind is type(None):
            if i in (_NOW, _EVENT):
                return None
            continue
        if name == "now":
            if kind not in _NUMBER:
                return None
            parts.append(key("ts_us") + "%d")
            args.append("round(r[0] * 1000000)")
        elif name == "received_at":
            if kind not in _NUMBER:
                return None
            parts.append(key("latency_us") + "%d")
            args.append(f"round((r[0] - r[{i}]) * 1000000)")
        elif name in _INT_FIELDS:
            if kind is not int:
                return None
            parts.append(key(name) + "%d")
            args.append(f"r[{i}]")
        elif name == "routed_to":
            if kind not in (list, tuple):
                return None
            parts.append(key(name) + "[%s]")
            args.append(f"','.join(map(esc, r[{i}]))")
        elif name == "headers":
            if not issubclass(kind, Mapping) or not allowlist:
                continue
            parts.append("%s")  # "" or ',"headers":{...}'
            args.append(f"headers(r[{i}])")
        elif issubclass(kind, str):
            parts.append(key(name) + "%s")
            args.append(f"esc(r[{i}])")
        elif kind is int and name in _TEXT_FIELDS:
            parts.append(key(name) + '"%d"')
            args.append(f"r[{i}]")
        elif name in _TEXT_FIELDS or kind in (bytes, bytearray, memoryview) or not (
                issubclass(kind, enum.Enum) or kind in (list, tuple, dict, float, bool)):
            parts.append(key(name) + "%s")
            args.append(f"esc(text(r[{i}]))")
        else:
            return None
    parts.append("}")
    template = "".join(parts)
    source = f"def line(r):\n    return {template!r} % ({', '.join(args)},)\n"

    def headers(value: Mapping[str, object]) -> str:
        kept = _allowed(value, allowlist)
        return ',"headers":' + _dumps(kept) if kept else ""

    namespace = {"esc": _esc, "text": _text, "headers": headers}
    exec(source, namespace)  # noqa: S102 - source built above from constants and indexes
    return namespace["line"]
