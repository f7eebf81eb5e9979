"""Dispatch to a queue's browsers and filtered consumers (``ConsumerSet.browsers``).

Unlike the queue's acquiring consumers, which take the head in turn, each of these reads
from a cursor of its own (the ``seq`` it saw last: ``ConsumerSet.browsers``), so it sees
every AVAILABLE message in order. A browser takes a copy (``entries.browsed``); a filtered
consumer acquires what its filter accepts and skips the rest, or, on a queue of its own
(``MessageFilter.drops``: a filtered ``/exchange`` source's temporary queue), drops it
(``queue_endings.drop_filtered``). The queue calls this from ``dispatch`` while
any such consumer is attached (never on the common path)."""
from __future__ import annotations

from .consumers import ConsumerSet
from .dead_lettering import DeadLettering
from .queue_endings import drop_filtered
from .queue_entries import QueueEntries

__all__ = ["dispatch_browsers"]


def dispatch_browsers(consumers: ConsumerSet, entries: QueueEntries, dead_lettering: DeadLettering,
                      now: float) -> int:
    """Hand each browser or filtered consumer with credit what follows its cursor;
    returns how many went out."""
    sent = 0
    browsers = consumers.browsers
    ready = entries.ready
    for browser in list(browsers):
        cursor = browsers.get(browser)
        accepts = browser.message_filter.accepts if getattr(browser, "message_filter", None) else None
        while cursor is not None and browser.credit.has_credit():
            entry = ready.next_after(cursor, now)
            if entry is None:
                break
            if entry.stored is not None and not entries.with_body(entry):
                continue
            cursor = browsers[browser] = entry.seq
            if accepts is not None and not accepts(entry.message):
                if browser.message_filter.drops:
                    drop_filtered(entries, dead_lettering, entry, now)
                continue
            browser.credit.consume_one()
            if browser.acquires:
                entries.acquire(entry, browser, now)
            else:
                entries.browsed()
            browser.deliver(entry, now)
            sent += 1
            cursor = browsers.get(browser)
    return sent

