"""Feeding and draining a proton ``Transport`` in the client role (a forwarder's outbound
1.0 connection, edge mode's backend connection): one home for the push/peek/pop loops.

Input goes in pieces no larger than ``capacity()`` (a negative capacity: the transport
takes no more, the rest is dropped); output is looped with ``pending``/``peek``/``pop``,
since proton encodes the next frames of a large transfer only after a ``pop``.
"""
from __future__ import annotations

from proton import Collector, Connection, Session, Transport

__all__ = ["open_session", "push_input", "take_output"]


def open_session(transport: Transport, connection: Connection) -> tuple[Collector, Session]:
    """Bind ``connection`` (its container, hostname and user set) to ``transport``, open it
    and one session on it; returns the collector its events go to, and the session."""
    collector = Collector()
    connection.collect(collector)
    transport.bind(connection)
    connection.open()
    session = connection.session()
    session.open()
    return collector, session


def push_input(transport: Transport, data: bytes) -> None:
    """Give ``data`` to ``transport``, as much as it takes."""
    while data:
        capacity = transport.capacity()
        if capacity < 0:
            break
        chunk, data = data[:capacity or len(data)], data[capacity or len(data):]
        transport.push(chunk)


def take_output(transport: Transport) -> tuple[bytes, bool]:
    """``(the pending output, whether the transport is closed for output)``."""
    out = []
    while True:
        pending = transport.pending()
        if pending <= 0:
            return b"".join(out), pending < 0
        out.append(bytes(transport.peek(pending)))
        transport.pop(pending)
