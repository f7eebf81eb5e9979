"""The in-memory forms of the ledger's records, and ``RowShapes``: the one home of how a
row's shape is found or made.

A record is kept either in full (a struct of ``STRUCTS``: every field of
``records.RECORDS``) or as a *row*: a shape id and the values that vary from message to
message (``MessageRow``, ``DeliveryRow``, ``ForwardedRow``, ``ForwardEventRow``). The
shape holds the fields that are the same for a channel's or link's messages (its
context, queue, exchange, routing key, verdict, outcome ...); it is declared to the
writer once, ahead of its first row (``encoding``).

A shape is found by its *key*: a tuple of the record's kind tag, then the values of the
fields its shapes fix (``_FIXED``: the context first), so that the key is the shape's
declaration; or, for a forwarded arrival, ``FORWARDED``, its message row's shape and the
two containers. Finding one is a single dict subscript (``ids[key]``: no Python call and
no C call on the message path); a key not found (the ``KeyError``, once per kind of record
of a context) gets a shape made for it (``new_row``). Why one dict and no "last shape per
context of each kind" caches in front of it (which the ledger kept before): one rule
instead of five, and the key look-up was the caches' fallback anyway. Building and
hashing the key cost no CPU time that shows beside the field-by-field comparisons (one
process, 20,000 messages' received, delivered and settled records, process time, best
of 15, 10 runs alternating: 881-978 ns a message before, 890-935 after).

Lifetime: a shape lives while its context is open. When the context closes
(``context_closed``), and for a context never opened or closed already, the shapes are
retired once every row of theirs is taken (``shipped``): the writer is told with the next
frame (``unshipped``). A context with ``SHAPES_PER_CONTEXT`` shapes already (a
routing key per message, say) gets its new kinds of record in full: a declaration per
record would cost more than it saves, and would grow the writer's table without bound.
"""
from __future__ import annotations

from typing import Any, Callable, Container, Sequence

import msgspec

from . import records as r
from .encoding import SHAPE, Shapes

__all__ = ["DeliveryRow", "FORWARDED", "ForwardEventRow", "ForwardedRow", "MessageRow", "RowShapes",
           "SHAPES_PER_CONTEXT", "STRUCTS"]

#: shapes a context keeps at most; its records beyond go in full
SHAPES_PER_CONTEXT = 64


def _struct(tag: str) -> type:
    fields = [(name, Any, None) for name, _ in r.RECORDS[tag]]
    return msgspec.defstruct(f"Record_{tag}", fields, tag=tag, array_like=True, gc=False)


#: kind tag -> the msgspec struct of that record (fields as in ``records.RECORDS``)
STRUCTS: dict[str, type] = {tag: _struct(tag) for tag in r.RECORDS}


def _row(name: str, varying: tuple[str, ...]) -> type:
    fields = [("shape", int, 0)] + [(field, Any, None) for field in varying]
    return msgspec.defstruct(name, fields, array_like=True, gc=False)


#: a message record's row (``received``): what varies from message to message
MessageRow = _row("MessageRow", ("ts", "gateway_id", "message_id", "correlation_id", "size",
                                 "headers"))
#: a delivery's or a settlement's row
DeliveryRow = _row("DeliveryRow", ("ts", "gateway_id", "delivery_count", "received_at"))
#: a forwarded message's ``received`` row: its origin id varies too (the origin and the
#: peer containers are fixed in its shape, with the message row's shape)
ForwardedRow = _row("ForwardedRow", MessageRow.__struct_fields__[1:] + ("origin_id",))
#: a forwarding event's row (``forwarded``, ``forward_settled``, a dead-lettering at the
#: source): the context, event, remote, outcome and reason are fixed in its shape
ForwardEventRow = _row("ForwardEventRow", ("ts", "gateway_id", "received_at"))
_ROWS = (MessageRow, DeliveryRow, ForwardedRow, ForwardEventRow)

_MESSAGE_FIXED = ("ctx", "exchange", "routing_key", "event", "routed_to", "stored_to", "reason",
                  "address")
#: kind tag -> the fields its shapes fix, in the order a shape's key holds their values
#: (after the tag): a key is the shape's declaration
_FIXED: dict[str, tuple[str, ...]] = {
    r.MESSAGE: _MESSAGE_FIXED,
    r.VERDICT: _MESSAGE_FIXED,
    r.DELIVERED: ("ctx", "queue"),
    r.SETTLED: ("ctx", "queue", "outcome", "reason"),
    r.EVENT: ("ctx", "event", "reason", "outcome", "peer_container"),  # forwarding's events
}
#: the head of a forwarded arrival's key: (FORWARDED, its message row's shape id, origin
#: container, peer container); its shape is the message row's with the two containers
FORWARDED = "forwarded"
_astuple = msgspec.structs.astuple


def _items(records: Sequence[Any]) -> list[list]:
    """Records and rows as lists: a record's tag first, a row's shape id."""
    return [list(_astuple(x)) if x.__class__ in _ROWS else [x.__struct_config__.tag, *_astuple(x)]
            for x in records]


class RowShapes:
    """The shapes of one ledger's rows: found by key (``ids[key]``), made for a new key
    (``new_row``), declared to the writer (``unshipped``, ``declarations``) and retired
    after their context (``context_closed``, ``shipped``).

    ``open_contexts``: the ledger's open contexts (read only: whether a new shape may
    be kept for later rows of its context).
    """

    def __init__(self, open_contexts: Container[Any]) -> None:
        self._open = open_contexts
        #: every shape still needed (id -> its declaration): replayed to a new writer
        self.declarations: dict[int, list] = {}
        #: key -> shape id, for the shapes of open contexts (read only: ``ids[key]`` is
        #: how the message path finds its shape, a KeyError saying it has none yet)
        self.ids: dict[tuple, int] = {}
        #: context -> the keys of its shapes
        self._keys_of_context: dict[Any, list[tuple]] = {}
        #: declarations and ends of shapes made since the last ``shipped``, oldest first:
        #: what the writer must read before the rows that follow them (read only)
        self.unshipped: list[list] = []
        #: shapes of contexts closed: retired once every row made before is taken
        self._closed: list[int] = []
        #: the rows' records, for ``expand``
        self._expansion = Shapes()
        self._next_shape: Callable[[], int] = iter(range(1, 1 << 62)).__next__

    def new_row(self, key: tuple, row: type, values: tuple) -> Any:
        """The record of ``values`` (``row``'s fields after its shape id) whose shape
        ``key`` ``ids`` does not hold: a row of a shape declared now, or the record in
        full when its context has ``SHAPES_PER_CONTEXT`` shapes already."""
        head = key[0]
        if head == FORWARDED:
            base = self.declarations[key[1]]
            tag = base[2]
            fixed = {**base[4], "origin_container": key[2], "peer_container": key[3]}
        else:
            tag = head
            fixed = dict(zip(_FIXED[tag], key[1:]))
        ctx = fixed["ctx"]
        varying = row.__struct_fields__[1:]
        keys = self._keys_of_context.get(ctx)
        if keys is not None and len(keys) >= SHAPES_PER_CONTEXT:
            return STRUCTS[tag](**fixed, **dict(zip(varying, values)))
        sid = self._next_shape()
        declaration = [SHAPE, sid, tag, varying, fixed]
        self.declarations[sid] = declaration
        self.unshipped.append(declaration)
        self._expansion.declare(sid, tag, varying, fixed)
        if ctx in self._open:
            self.ids[key] = sid
            if keys is None:
                self._keys_of_context[ctx] = [key]
            else:
                keys.append(key)
        else:  # a record after its context closed (a late settlement): a shape of its own
            self._closed.append(sid)
        return row(sid, *values)

    def context_closed(self, ctx: Any) -> None:
        """``ctx`` is gone: its shapes are found no more, and retired by ``shipped``."""
        for key in self._keys_of_context.pop(ctx, ()):
            self._closed.append(self.ids.pop(key))

    def shipped(self, idle: bool) -> None:
        """``unshipped`` went to the writer (or it needs none: ``expand`` knows them).
        ``idle``: every row made so far was taken, so the shapes of the contexts closed
        are retired; their ends go with the next ``unshipped``."""
        if self.unshipped:
            self.unshipped = []
        if idle and self._closed:
            for sid in self._closed:
                del self.declarations[sid]
                self._expansion.forget(sid)
                self.unshipped.append([SHAPE, sid])
            self._closed.clear()

    def expand(self, records: Sequence[Any]) -> list:
        """``records`` (rows among them, of shapes not retired yet) as the records they
        stand for: tuples of the tag and the fields of ``records.RECORDS``."""
        return self._expansion.expand(_items(records))
