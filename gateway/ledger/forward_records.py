"""The ledger's records of forwarding: what is sent on to another gateway or broker, its
settlement by the remote, a dead-lettering at the source, and where a forwarded message
that arrived here entered forwarding.

Their context is one per remote (its connection column names the remote; no vhost or
user: the outbox is the gateway's), made on first use and kept while the gateway runs.
Their events are rows of one layout (``_forward_events``), found by the shapes of the
ledger's ``RowShapes``, in the ledger's record list: the ``Ledger`` binds these methods as
its own, so a forwarded message costs no Python call more than when they were its methods.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from . import records as r
from .records import EventKind
from .row_shapes import FORWARDED, STRUCTS, ForwardedRow, ForwardEventRow, MessageRow, RowShapes

__all__ = ["ForwardingRecords"]

_Event = STRUCTS[r.EVENT]
_EVENT = r.EVENT


class ForwardingRecords:
    """See the module docstring. ``records`` and ``row_shapes``: the ledger's;
    ``context(now, vhost, user, proto, connection, link)`` makes a context."""

    def __init__(self, records: list, row_shapes: RowShapes, context: Callable[..., int]) -> None:
        self.records = records
        self._append = records.append
        self._shape_ids = row_shapes.ids
        self._row_shapes = row_shapes
        self._context = context
        #: remote container -> the context of what is forwarded to it
        self._forward_contexts: dict[str, int] = {}
        #: called when a record should be shipped at once, not at the next interval (the
        #: other gateway settles on them); ``Ledger.wake`` sets it
        self.wake: Optional[Callable[[], None]] = None

    def forward_context(self, now: float, remote: str) -> int:
        """The context of what is forwarded to ``remote`` (its connection column names
        the remote; no vhost or user: the outbox is the gateway's)."""
        ctx = self._forward_contexts.get(remote)
        if ctx is None:
            ctx = self._forward_contexts[remote] = self._context(
                now, None, None, r.Protocol.AMQP10.value, f"forward:{remote}", None)
        return ctx

    def forwarded(self, now: float, message: Any, remote: str) -> None:
        """``message`` was sent on to the gateway or broker ``remote`` (again on a retry:
        the report counts the message once). Wakes the shipping: the remote may settle
        it, and the outbox forget it, before the next interval."""
        self.forwarded_many(now, (message,), remote)

    def forwarded_many(self, now: float, messages: Sequence[Any], remote: str) -> None:
        """``forwarded`` for each of ``messages``, sent in one turn (one context look-up
        and one wake for the lot: a forwarder sends a slice of its outbox at a time)."""
        self._forward_events(now, messages, remote, EventKind.FORWARDED)
        if self.wake is not None:
            self.wake()

    def forward_settled(self, now: float, message: Any, remote: str, outcome: str,
                        reason: Optional[str] = None) -> None:
        """``remote`` settled the forwarded ``message`` (``outcome``: an ``Outcome``
        value; ``reason``: the remote's error)."""
        self.forward_settled_many(now, (message,), remote, outcome, reason)

    def forward_settled_many(self, now: float, messages: Sequence[Any], remote: str, outcome: str,
                             reason: Optional[str] = None) -> None:
        """``forward_settled`` for each of ``messages``, settled alike in one read."""
        self._forward_events(now, messages, remote, EventKind.FORWARD_SETTLED, reason, outcome)

    def forward_dead_lettered(self, now: float, message: Any, remote: str, reason: str) -> None:
        """The message to be forwarded to ``remote`` was dead-lettered here, at the source
        (rejected by the remote, released too often, the remote no longer configured)."""
        self._forward_events(now, (message,), remote, EventKind.DEAD_LETTERED, reason)

    def _forward_events(self, now: float, messages: Sequence[Any], remote: str, kind: EventKind,
                        reason: Optional[str] = None, outcome: Optional[str] = None) -> None:
        """An event of ``kind`` for each of ``messages``, in the context of what goes to
        ``remote``: the one layout of forwarding's events."""
        ctx = self.forward_context(now, remote)
        value = kind._value_
        key = (_EVENT, ctx, value, reason, outcome, remote)
        try:
            sid = self._shape_ids[key]
        except KeyError:  # declared with the first row (or none: the context has too many)
            if not messages:
                return
            first, *messages = messages
            record = self._row_shapes.new_row(key, ForwardEventRow,
                                              (now, first.gateway_id, first.created_at))
            self._append(record)
            if record.__class__ is not ForwardEventRow:
                append = self._append
                for message in messages:
                    append(_Event(now, ctx, value, message.gateway_id, None, None,
                                  message.created_at, None, None, None, reason, outcome, remote))
                return
            sid = record.shape
        self.records.extend([ForwardEventRow(sid, now, message.gateway_id, message.created_at)
                             for message in messages])

    def arrived_forwarded(self, message: Any, origin_id: Any, origin_container: str,
                          peer: str) -> None:
        """The message just recorded as received came from the gateway ``peer``; the
        gateway where it entered forwarding, ``origin_container``, gave it ``origin_id``
        (what that gateway's ``forwarded`` events carry, and a hub's ``forwarded``
        events through their message): set on its record, so the report's
        reconciliation matches the two by origin container and id, leg by leg."""
        records = self.records
        row = records[-1] if records else None
        if row.__class__ is MessageRow:
            if row.gateway_id == message.gateway_id:
                # a row of its own shape (the message row's, with the two containers
                # fixed, and its origin id), not the record in full: one struct per message
                key = (FORWARDED, row.shape, origin_container, peer)
                try:
                    records[-1] = ForwardedRow(self._shape_ids[key], row.ts, row.gateway_id,
                                               row.message_id, row.correlation_id, row.size,
                                               row.headers, origin_id)
                except KeyError:
                    records[-1] = self._row_shapes.new_row(
                        key, ForwardedRow, (row.ts, row.gateway_id, row.message_id,
                                            row.correlation_id, row.size, row.headers, origin_id))
        elif records and getattr(row, "gateway_id", None) == message.gateway_id:
            # the record itself (a context with too many shapes), to set fields on
            row.origin_id = origin_id
            row.origin_container = origin_container
            row.peer_container = peer
        if self.wake is not None:
            self.wake()
