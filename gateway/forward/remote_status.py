"""What management and the metrics show of one remote: its ``Forwarder``'s state, outbox
and counts, read from its public attributes (the forwarder owns them; this only reads).
"""
from __future__ import annotations

from typing import Any, Optional

__all__ = ["oldest_created_at", "remote_status"]


def oldest_created_at(forwarder: Any) -> Optional[float]:
    """When the oldest message of the outbox was published (None: it is empty): a walk of
    every part of it, so for a scrape, never for a message."""
    times = [e.created_at for e in forwarder.in_flight.values()]
    if forwarder.ready:
        times.append(min(e.created_at for e in forwarder.ready))
    if forwarder.bodies.paged:
        times.append(forwarder.bodies.paged[0].created_at)
    times.extend(e.created_at for _, _, e in forwarder.retrying)
    return min(times) if times else None


def remote_status(forwarder: Any, now: float) -> dict:
    """``name`` is the container again: every object the management API lists has a
    ``name`` (the dashboard and ``ctl`` key their rows on it)."""
    f = forwarder
    settings = f.settings
    oldest = oldest_created_at(f)
    return {
        "name": f.container, "container": f.container, "kind": settings.kind,
        "host": settings.host, "port": settings.port,
        "state": f.state, "last_error": f.last_error,
        "outbox_depth": f.depth, "outbox_bytes": f.bytes,
        "outbox_oldest_age": None if oldest is None else max(0.0, now - oldest),
        "in_flight": len(f.in_flight), "credit": f.available,
        "unsent": f.unsent, "publishers_paused": f.flow.waiting,
        "forwarded": f.forwarded, "acked": f.acked, "retried": f.retried,
        "dead_lettered": f.dead_lettered,
    }
