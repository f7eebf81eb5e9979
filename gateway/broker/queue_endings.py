"""How an entry leaves its queue without being consumed: it expired, it fell off a length
limit (``drop-head``), it passed the delivery limit (``x-delivery-limit``), or the filter of
its queue's only consumer refused it. Each takes the entry out of the queue's
``QueueEntries`` (with the store's record that follows) and hands its message to the
queue's ``DeadLettering``, which records the end and publishes the dead-letter copy. The
queue decides when (``queues.Queue``); these are the one place each end is carried out.

So are the ends of every entry at once: a purge (the AVAILABLE ones, recorded ``purged``),
the queue's deletion (all of them, ``deleted``), and the gateway's stop (those the store
does not keep, ``dropped``). The ledger has every end: an expiry is recorded as
``expired`` and a dead-lettering (any reason) as ``dead_lettered`` under the message's
own ``gateway_id`` (the copy published to the dead-letter exchange gets a new one:
``vhost.dead_letter``), the rest through ``DeadLettering.ended``."""
from __future__ import annotations

from typing import Optional

from gateway.ledger import EventKind

from .dead_lettering import DeadLettering
from .message import DeathReason, MessageContainer
from .queue_arguments import Overflow, QueueArguments
from .queue_entries import QueueEntries
from .queued_message import QueuedMessage

__all__ = ["drop_filtered", "drop_over_limit", "expire_entry", "past_delivery_limit", "purge_available",
           "record_unkept", "end_all", "refuse_publish", "expire_heads"]


def expire_entry(entries: QueueEntries, dead_lettering: DeadLettering, entry: QueuedMessage,
                 now: float) -> None:
    """``entry``, out of the ready list, expired: GONE, recorded and dead-lettered."""
    message = entries.leaving(entry)
    entries.finish(entry)
    if message is not None:
        dead_lettering.expired(message, entry.delivery_count, now)


def expire_heads(entries: QueueEntries, dead_lettering: DeadLettering, now: float) -> int:
    """Every expired entry at the head of a priority level: GONE, recorded and
    dead-lettered (``expire_entry``); returns how many."""
    expired = entries.expire_heads(now)
    for entry in expired:
        expire_entry(entries, dead_lettering, entry, now)
    return len(expired)


def refuse_publish(args: QueueArguments, dead_lettering: DeadLettering, message: MessageContainer,
                   now: float) -> None:
    """A full ``reject-publish`` queue refused ``message``: dead-lettered (reason
    ``maxlen``) with ``reject-publish-dlx``, else recorded ``dropped``."""
    if args.overflow is Overflow.REJECT_PUBLISH_DLX:
        dead_lettering.dead_letter(message, DeathReason.MAXLEN, now)
    else:
        dead_lettering.ended((message,), EventKind.DROPPED, now, "reject-publish")


def drop_over_limit(args: QueueArguments, entries: QueueEntries, dead_lettering: DeadLettering,
                    now: float) -> None:
    """Drop from the head (lowest priority first) until the queue is within ``x-max-length``
    and ``x-max-length-bytes``: dead-lettered (reason ``maxlen``), or recorded ``dropped``
    without a dead-letter exchange."""
    max_len, max_bytes = args.max_length, args.max_length_bytes
    ready = entries.ready
    while ready.count and (
        (max_len is not None and ready.count > max_len)
        or (max_bytes is not None and ready.nbytes > max_bytes)
    ):
        entry = entries.pop_lowest()  # lowest priority first
        if args.dead_letter_exchange is None:  # (the stand-in's gateway id will do)
            dead_lettering.ended((entry.message,), EventKind.DROPPED, now, DeathReason.MAXLEN.value)
            entries.finish(entry)
            continue
        message = entries.leaving(entry)
        entries.finish(entry)
        if message is not None:
            dead_lettering.dead_letter(message, DeathReason.MAXLEN, now)


def past_delivery_limit(args: QueueArguments, entries: QueueEntries, dead_lettering: DeadLettering,
                        entry: QueuedMessage, now: float) -> bool:
    """The one place ``x-delivery-limit`` is applied: a returned message whose failed
    deliveries would pass the limit leaves the queue (dead-lettered, reason
    ``delivery_limit``, or dropped) instead of going back (poison-message handling, as
    RabbitMQ's quorum queues). False (nothing done) for any other."""
    limit: Optional[int] = args.delivery_limit
    if limit is None or entry.delivery_count + 1 <= limit or not entries.take_acquired(entry):
        return False
    entries.finish(entry)
    dead_lettering.dead_letter(entry.message, DeathReason.DELIVERY_LIMIT, now)
    return True


def drop_filtered(entries: QueueEntries, dead_lettering: DeadLettering, entry: QueuedMessage,
                  now: float) -> None:
    """A message the filter of a queue's only consumer refuses (a filtered ``/exchange``
    source's temporary queue): it ends here, recorded ``dropped``."""
    entries.remove_available(entry)
    message = entries.leaving(entry)
    entries.finish(entry)
    if message is not None:
        dead_lettering.ended((message,), EventKind.DROPPED, now, "filtered")


def purge_available(entries: QueueEntries, dead_lettering: DeadLettering, now: float) -> int:
    """Every AVAILABLE entry GONE, recorded ``purged`` (acquired ones stay); returns how
    many."""
    dead_lettering.ended(_held(entries, ready=True), EventKind.PURGED, now)
    return entries.purge()


def record_unkept(entries: QueueEntries, dead_lettering: DeadLettering, stored_queue: bool,
                    now: float) -> int:
    """The gateway stops: the entries the store does not keep are recorded as dropped
    (reason ``transient queue``: a queue without storage, which is every queue of a
    gateway without a store; ``transient message``: a stored queue's entry of a transient
    message); returns how many."""
    lost = [m for m, stored in _held(entries, ready=True, acquired=True, stored=True)
            if not stored_queue or not stored]
    dead_lettering.ended(lost, EventKind.DROPPED, now,
                         "transient message" if stored_queue else "transient queue")
    return len(lost)


def end_all(entries: QueueEntries, dead_lettering: DeadLettering, now: float) -> None:
    """The queue is deleted: every entry GONE, recorded ``deleted``."""
    dead_lettering.ended(_held(entries, ready=True, acquired=True), EventKind.DELETED, now)
    entries.clear()


def _held(entries: QueueEntries, ready: bool = False, acquired: bool = False, stored: bool = False) -> list:
    """The messages of the AVAILABLE and/or ACQUIRED entries (with whether the store
    keeps each, if ``stored``)."""
    found = [e for level in entries.ready.levels for e in level] if ready else []
    if acquired:
        found += entries.acquired.values()
    return [(e.message, e.stored is not None) if stored else e.message for e in found]
