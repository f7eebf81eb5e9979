"""A small forwarder for tests of outbound connections: it implements ``OutboundEvents``.

It holds a queue of ``OutboundMessage``s, sends while the connection grants credit, puts
back what was released (a settlement RELEASED, or every unsettled entry when the
connection went down) and records every settlement, up and down, in order. It has no
outbox and no dead-letter queue: those are the real forwarder's; this one only shows what
the connection reports.
"""
from __future__ import annotations

from collections import deque
from typing import Any, Optional

from gateway.amqp091.content import decode_properties
from gateway.broker.message import Encoding, MessageContainer
from gateway.forward.outbound import ForwardOutcome, OutboundMessage, Settlement

__all__ = ["MinimalForwarder", "container_091", "container_10"]


class MinimalForwarder:
    def __init__(self) -> None:
        self.connection: Any = None
        self.ups = 0
        self.downs: list[str] = []
        self.available = 0
        self.pending: deque[OutboundMessage] = deque()
        self.in_flight: dict[int, OutboundMessage] = {}
        self.settlements: list[Settlement] = []
        self.final: dict[int, Settlement] = {}   # ACCEPTED or REJECTED, by entry id
        self.is_up = False

    # ---- OutboundEvents (and the edge's ``connecting``) ----------------------------------
    def connecting(self) -> None:
        pass

    def connection_up(self) -> None:
        self.ups += 1
        self.is_up = True

    def connection_down(self, error: str) -> None:
        self.downs.append(error)
        self.is_up = False
        self.available = 0
        released = sorted(self.in_flight.values(), key=lambda m: m.entry_id, reverse=True)
        self.in_flight.clear()
        self.pending.extendleft(released)

    def credit(self, available: int, window: int = 0) -> None:
        self.available = available
        self.pump()

    def settled(self, settlement: Settlement) -> None:
        self.settlements.append(settlement)
        message = self.in_flight.pop(settlement.entry_id, None)
        if settlement.outcome is ForwardOutcome.RELEASED:
            if message is not None:
                self.pending.appendleft(message)
        else:
            self.final[settlement.entry_id] = settlement
        self.pump()

    def settled_many(self, settlements: list[Settlement]) -> None:
        for settlement in settlements:
            self.settled(settlement)

    # ---- the test's side -----------------------------------------------------------------
    def submit(self, *messages: OutboundMessage) -> None:
        self.pending.extend(messages)
        self.pump()

    def pump(self) -> None:
        while self.is_up and self.available > 0 and self.pending:
            message = self.pending.popleft()
            self.in_flight[message.entry_id] = message
            self.available -= 1
            self.connection.send(message)

    def outcome(self, entry_id: int) -> Optional[ForwardOutcome]:
        settlement = self.final.get(entry_id)
        return settlement.outcome if settlement is not None else None


def container_091(properties_bytes: bytes, body: bytes, routing_key: str = "orders@partner") -> MessageContainer:
    """A message as a 0-9-1 client of ours published it (its properties decoded, as
    ``container_from_publish`` and the store's loader leave them)."""
    return MessageContainer(Encoding.AMQP091, (properties_bytes, body), "", routing_key,
                            properties=decode_properties(properties_bytes))


def container_10(encoded: bytes) -> MessageContainer:
    """A message as a 1.0 client of ours sent it (its encoded sections)."""
    return MessageContainer(Encoding.AMQP10, encoded)
