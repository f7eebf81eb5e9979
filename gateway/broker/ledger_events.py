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
  ``ledger.rows`` first (None, filled once the verdict is known), and
  ``message.ledger_key`` is the message's gateway id meanwhile: routing delivers at once
  to a consumer with credit, and such a delivery's row refers to the publish row before
  it by that id instead of making a key of its own (which cost the message path an 8-tuple
  and its marshalling). A publish that routing refuses leaves its place None, which the
  writer skips.
- ``expired`` and ``dead_lettered`` by the queue (``queues.py``); the dead-lettered copy
  gets a new ``gateway_id`` and its own ``routed``/``unroutable`` event whose ``reason``
  is the death reason (``vhost.dead_letter``).
"""
from __future__ import annotations

import operator
from typing import Any, Optional

from gateway.ledger.buffer import (KEY_GATEWAY_ID, PUBLISH_ROW_LENGTH, PUBLISH_ROW_NOW,
                                   event_pair, key_ref, ledger_context)
from gateway.ledger.records import EventKind, Outcome as LedgerOutcome, Protocol as WireProtocol

from .message import Encoding, MessageContainer
from .queued_message import QueuedMessage

__all__ = ["EventKind", "KEY_GATEWAY_ID", "LedgerOutcome", "OUTCOME_VALUE", "PROTOCOL_OF",
           "PUBLISH_ROW_LENGTH", "PUBLISH_ROW_NOW", "RECEIVED_THEN", "WireProtocol",
           "key_ref", "ledger_context", "ledger_key", "publish_row", "queue_name",
           "record_delivered", "record_settled"]

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


def ledger_key(message: MessageContainer) -> object:
    """The message's fields that its rows share (``gateway.ledger.buffer.message_key``),
    made once per message; its gateway id while a channel or link routes its publish
    (which took the publish row's place in the buffer first: see the module's notes).
    Call sites that run for every delivery test ``message.ledger_key`` first and call
    this only when it is None: a call costs more than the key's lookup."""
    key = message.ledger_key
    if key is None:
        # message_key's tuple, built here without its two calls (this runs per message)
        key = message.ledger_key = (
            _PROTOCOL_VALUE[message.origin._value_], message.exchange, message.routing_key,
            message.message_id, message.correlation_id, message.gateway_id, message.size,
            message.created_at)
    return key


def publish_row(message: MessageContainer, now: float, events: str, context: tuple,
                routed_to: Optional[tuple], reason: Optional[str], headers: Optional[dict]) -> tuple:
    """The compact publish row of ``message`` (``gateway.ledger.buffer``), which becomes
    its key too: append it to ``ledger.rows``. ``events`` from ``RECEIVED_THEN``;
    ``headers`` None when the ledger does not keep them (``ledger.keep_headers``)."""
    row = message.ledger_key = (
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
    message = entry.message
    key = key_ref(ledger, message.ledger_key or ledger_key(message))
    row = ledger.delivered(now, context, key, queue, entry.delivery_count)
    if settles_later:
        entry.ledger_row = row


def record_settled(ledger: Any, entry: QueuedMessage, now: float, context: tuple,
                   queue: Optional[str], outcome: LedgerOutcome | str,
                   reason: Optional[str] = None) -> None:
    """A ``settled`` event for ``entry``'s current delivery (its row refers to the
    delivery's row when that was recorded). Written out in place by the two busiest call
    sites (a 0-9-1 ack, a 1.0 disposition), like ``record_delivered``."""
    message = entry.message
    ledger.settled(entry.ledger_row, now, context, message.ledger_key or ledger_key(message),
                   queue, entry.delivery_count, outcome, reason)
    entry.ledger_row = None
