"""Counts of what conversions carried because the other protocol has no place for it.

The translators never drop a field: what one protocol cannot represent natively travels
under a reserved name (``x-amqp-1.0-*`` headers for 0-9-1 receivers, ``x-amqp-0-9-1-*``
message annotations for 1.0 receivers; ``mapping.py``). An operator wants to know how
often that happens, and for which fields: those are the messages a plain client of the
other protocol sees differently. ``CARRIED`` counts converted messages by (direction,
reserved name), a plain dict of ints the metrics read at scrape
(``amqp_gateway_lossy_conversions_total``); the callers count once per converted message
from the names their translation caches keep beside the result, so a cache hit costs a
truth test when nothing was carried.
"""
from __future__ import annotations

from typing import Iterable, Optional

from translators.mapping import RESERVED_NAMES

__all__ = ["CARRIED", "TO_AMQP091", "TO_AMQP10", "count_carried", "headers_carried"]

#: direction labels
TO_AMQP091 = "1.0->0-9-1"
TO_AMQP10 = "0-9-1->1.0"

#: (direction, reserved name) -> messages converted that carried it
CARRIED: dict[tuple[str, str], int] = {}


def count_carried(direction: str, names: Iterable[str]) -> None:
    for name in names:
        key = (direction, name)
        CARRIED[key] = CARRIED.get(key, 0) + 1


def headers_carried(headers: Optional[dict]) -> tuple[str, ...]:
    """The reserved ``x-amqp-1.0-*`` names among a translated message's 0-9-1 headers."""
    if not headers:
        return ()
    return tuple(name for name in headers if name in RESERVED_NAMES)
