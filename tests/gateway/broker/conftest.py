"""Fixtures for the broker model tests: a recording consumer and a message factory."""
from __future__ import annotations

from typing import Any, Optional

import pytest

from gateway.broker import Broker, CreditWindow, Encoding, MessageContainer


class RecordingConsumer:
    """A Consumer that records what it is given; ``auto_settle`` acks like no-ack."""

    def __init__(
        self,
        tag: str = "c",
        *,
        credit: Optional[CreditWindow] = None,
        exclusive: bool = False,
        acquires: bool = True,
        queue: Any = None,
        auto_settle: bool = False,
    ) -> None:
        self.tag = tag
        self.credit = credit if credit is not None else CreditWindow.prefetch(0)
        self.exclusive = exclusive
        self.acquires = acquires
        self.queue = queue
        self.auto_settle = auto_settle
        self.entries: list = []
        self.cancelled: list[str] = []

    def deliver(self, entry: Any, now: float) -> None:
        self.entries.append(entry)
        if self.auto_settle:
            entry.queue.settle(entry)

    def cancelled_by_broker(self, reason: str) -> None:
        self.cancelled.append(reason)

    @property
    def bodies(self) -> list:
        return [e.message.payload for e in self.entries]

    def __repr__(self) -> str:
        return f"RecordingConsumer({self.tag!r})"


def make_message(
    body: Any = "m",
    *,
    routing_key: str = "",
    exchange: str = "",
    headers: Optional[dict] = None,
    priority: Optional[int] = None,
    ttl_ms: Optional[int] = None,
    durable: bool = False,
    size: Optional[int] = None,
) -> MessageContainer:
    """A 0-9-1-origin message whose payload is ``body`` itself (easy to compare)."""
    return MessageContainer(
        Encoding.AMQP091,
        body,
        exchange=exchange,
        routing_key=routing_key,
        headers=headers,
        priority=priority,
        ttl_ms=ttl_ms,
        durable=durable,
        size=len(str(body)) if size is None else size,
    )


@pytest.fixture
def broker() -> Broker:
    return Broker(container_id="test-container")


@pytest.fixture
def vhost(broker: Broker):
    return broker.vhost("/")


@pytest.fixture
def consumer_cls():
    return RecordingConsumer


@pytest.fixture
def msg():
    return make_message
