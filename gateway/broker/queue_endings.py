"""How an entry leaves its queue without being consumed: it expired, it fell off a length
limit (``drop-head``), it passed the delivery limit (``x-delivery-limit``), or the filter of
its queue's only consumer refused it. Each takes the entry out of the queue's
``QueueEntries`` (with the store's record that follows) and hands its message to the
queue's ``DeadLettering``, which records the end and publishes the dead-letter copy. The
queue decides when (``queues.Queue``); these are the one place each end is carried out."""
from __future__ import annotations

from typing import Optional

from gateway.ledger import EventKind

from .dead_lettering import DeadLettering
from .message import DeathReason
from .queue_arguments import QueueArguments
from .queue_entries import QueueEntries
from .queued_message import QueuedMessage

__all__ = ["drop_filtered", "drop_over_limit", "expire_entry", "past_delivery_limit"]


def expire_entry(entries: QueueEntries, dead_lettering: DeadLettering, entry: QueuedMessage,
                 now: float) -> None:
    """``entry``, out of the ready list, expired: GONE, recorded and dead-lettered."""
    message = entries.leaving(entry)
    entries.finish(entry)
    if message is not None:
        dead_lettering.expired(message, entry.delivery_count, now)


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
