"""The names the broker and both protocols use to record message events in the ledger.

``Broker.ledger`` is a ``gateway.ledger.LedgerWriter`` or None. Call sites read it once,
test it for None and make one ``record(event, now, **fields)`` call, which only appends a
tuple (formatting happens at flush time). This module holds the one table from a
message's ``Encoding`` to the ledger's ``Protocol`` label and re-exports the ledger's
enums (``Protocol`` as ``WireProtocol``, ``Outcome`` as ``LedgerOutcome``: the broker and
``typing`` have names of their own), so that every call site passes enum members.

Which event goes where (the contract the pipeline's counts rely on):

- ``received``: a publish that passed access and validation (0-9-1 channel, 1.0 incoming
  link); the message gets its ``gateway_id`` here.
- one routing verdict per received message: ``routed`` (``routed_to`` = queue names,
  empty for a service node), ``unroutable``, ``returned`` (0-9-1 mandatory) or
  ``refused`` (unknown or internal exchange, permission on a 1.0 per-message route,
  every target queue full). A publish refused before it was taken in (access, size,
  user-id, a malformed message) is a lone ``refused`` with no ``gateway_id``.
- ``delivered`` per delivery attempt and ``settled`` (outcome) per delivery, including
  releases when a channel or link goes away with unsettled deliveries (reason says so).
  These two are recorded with ``record_delivered`` and ``record_settled`` below: a
  settlement's row refers to its delivery's row (which waits on the queue entry).
  ``context`` is the consumer's ``ledger_context(...)``, made once per channel or link.
- A channel or link that routes a publish it took in takes its publish row's place in
  ``ledger.rows`` first (None, filled once the verdict is known: with a routed row when
  the message was routed and no header is kept, else with ``publish_row``), and
  ``message.ledger_key`` is the message's gateway id from then on: the rows of its
  deliveries refer to the publish row by that id (``delivery_key``) instead of holding a
  key of their own, including those routing makes at once for a consumer with credit.
  A publish that routing refuses leaves its place None, which the writer skips, and its
  ``ledger_key`` None.
- ``expired`` and ``dead_lettered`` by the queue (``queues.py``); the dead-lettered copy
  gets a new ``gateway_id`` and its own ``routed``/``unroutable`` event whose ``reason``
  is the death reason (``vhost.dead_letter``).
"""
from __future__ import annotations

import operator
from typing import Any, Optional

from gateway.ledger.buffer import event_pair, ledger_context
from gateway.ledger.records import EventKind, Outcome as LedgerOutcome, Protocol as WireProtocol

from .message import Encoding, MessageContainer
from .queued_message import QueuedMessage

__all__ = ["EventKind", "LedgerOutcome", "OUTCOME_VALUE", "PROTOCOL_OF", "RECEIVED_THEN",
           "WireProtocol", "delivery_key", "ledger_context", "message_key_of",
           "publish_row", "queue_name", "record_delivered", "record_settled"]

#: ``MessageContainer.origin`` -> the ledger's ``proto_in`` label, keyed by the origin's
#: ``_value_``: call sites look up ``PROTOCOL_OF[message.origin._value_]`` because an Enum
#: member hashes through a Python-level ``__hash__`` (and ``.value`` is a Python property
#: in 3.11), while a str key hashes in C; this lookup is on every delivery and settlement.
PROTOCOL_OF: dict[str, WireProtocol] = {
    Encoding.AMQP091.value: WireProtocol.AMQP091,
    Encoding.AMQP10.value: WireProtocol.AMQP10,
}

_PROTOCOL_VALUE: dict[str, str] = {k: v.value for k, v in PROTOCOL_OF.items()}

#: a publish row's ``events`` for each routing verdict (``publish_row``)
RECEIVED_THEN: dict[EventKind, str] = {kind: event_pair(EventKind.RECEIVED, kind)
                                       for kind in EventKind}
#: what a settled row holds for each outcome (call sites pass it, not the member)
OUTCOME_VALUE: dict[LedgerOutcome, str] = {outcome: outcome.value for outcome in LedgerOutcome}

#: ``list(map(queue_name, result.queues))``: the ``routed_to`` column, built in C.
queue_name = operator.attrgetter("name")


def message_key_of(message: MessageContainer) -> tuple:
    """``gateway.ledger.buffer.message_key`` of ``message``, kept as its ``ledger_key``
    for its next events (built here without message_key's two calls)."""
    key = message.ledger_key = (
        _PROTOCOL_VALUE[message.origin._value_], message.exchange, message.routing_key,
        message.message_id, message.correlation_id, message.gateway_id, message.size,
        message.created_at)
    return key


def delivery_key(ledger: Any, message: MessageContainer) -> object:
    """What a delivered or settled row holds for ``message``: its gateway id when its
    publish row is buffered or the writer still keeps it (``ledger.gid_from``), else its
    key. The two busiest call sites write this out in place: a call per delivery cost
    more than the test."""
    key = message.ledger_key
    if key is None or key.__class__ is int and key < ledger.gid_from:
        return message_key_of(message)
    return key


def publish_row(message: MessageContainer, now: float, events: str, context: tuple,
                routed_to: Optional[tuple], reason: Optional[str], headers: Optional[dict]) -> tuple:
    """The compact publish row of ``message`` (``gateway.ledger.buffer``): put it in the
    place the caller took in ``ledger.rows`` (``message.ledger_key`` is the gateway id
    since). ``events`` from ``RECEIVED_THEN``; ``headers`` None when the ledger does not
    keep them (``ledger.keep_headers``). Not kept on the message: see the buffer's notes."""
    row = (
        _PROTOCOL_VALUE[message.origin._value_], message.exchange, message.routing_key,
        message.message_id, message.correlation_id, message.gateway_id, message.size,
        message.created_at, now, events, context, routed_to, reason, headers)
    return row


def record_delivered(ledger: Any, entry: QueuedMessage, now: float, context: tuple,
                     queue: Optional[str], *, settles_later: bool = True) -> None:
    """A ``delivered`` event for ``entry``. Its row waits on the entry for
    ``record_settled`` unless ``settles_later`` is False (a browser's copy, which is
    never settled: an acquiring consumer's settlement must not refer to its row).
    The two busiest call sites (a 0-9-1 consumer's and a 1.0 link's delivery) append
    the row themselves: a call per event was a fifth of the ledger's cost."""
    row = ledger.delivered(now, context, delivery_key(ledger, entry.message), queue,
                           entry.delivery_count)
    if settles_later:
        entry.ledger_row = row


def record_settled(ledger: Any, entry: QueuedMessage, now: float, context: tuple,
                   queue: Optional[str], outcome: LedgerOutcome | str,
                   reason: Optional[str] = None) -> None:
    """A ``settled`` event for ``entry``'s current delivery (its row refers to the
    delivery's row when that was recorded). Written out in place by the two busiest call
    sites (a 0-9-1 ack, a 1.0 disposition), like ``record_delivered``."""
    ledger.settled(entry.ledger_row, now, context, delivery_key(ledger, entry.message),
                   queue, entry.delivery_count, outcome, reason)
    entry.ledger_row = None
