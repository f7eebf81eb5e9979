"""CreditWindow (prefetch and link credit) and ProducerGate (memory alarm)."""
from __future__ import annotations

import pytest

from gateway.broker import CreditMode, CreditWindow, ProducerGate


def test_prefetch_zero_is_unlimited() -> None:
    w = CreditWindow.prefetch(0)
    for _ in range(1000):
        w.consume_one()
    assert w.has_credit() and w.available() > 10**9


def test_prefetch_counts_outstanding() -> None:
    w = CreditWindow.prefetch(2)
    assert w.available() == 2
    w.consume_one()
    w.consume_one()
    assert not w.has_credit() and w.available() == 0
    w.settle_one()
    assert w.has_credit() and w.available() == 1
    w.settle_one(5)  # never below zero
    assert w.outstanding == 0


def test_lowering_limit_below_outstanding_stops_deliveries() -> None:
    w = CreditWindow.prefetch(5)
    for _ in range(4):
        w.consume_one()
    w.limit = 2
    assert not w.has_credit() and w.available() == 0
    w.limit = 0
    assert w.has_credit()
    with pytest.raises(ValueError):
        w.limit = -1


def test_parent_window_limits_both() -> None:
    channel = CreditWindow.prefetch(3)
    a = CreditWindow.prefetch(2, parent=channel)
    b = CreditWindow.prefetch(0, parent=channel)
    a.consume_one()
    a.consume_one()
    assert not a.has_credit() and b.available() == 1
    b.consume_one()
    assert not b.has_credit() and channel.outstanding == 3
    a.settle_one()
    assert channel.outstanding == 2 and b.has_credit() and a.available() == 1


def test_link_credit_grant_and_drain() -> None:
    w = CreditWindow.link_credit()
    assert w.mode is CreditMode.CREDIT and not w.has_credit()
    w.grant(3)
    w.consume_one()
    assert w.credit == 2 and w.available() == 2
    w.settle_one()  # settlement does not return 1.0 credit
    assert w.credit == 2
    w.grant(5, drain=True)
    assert w.drain
    w.consume_one()
    assert w.drain_all() == 4
    assert w.credit == 0 and not w.drain and not w.has_credit()
    with pytest.raises(ValueError):
        w.grant(-1)


class Listener:
    def __init__(self) -> None:
        self.events: list[str] = []

    def blocked(self, reason: str) -> None:
        self.events.append("blocked")
        self.reason = reason

    def unblocked(self) -> None:
        self.events.append("unblocked")


def test_gate_blocks_above_watermark_once() -> None:
    gate = ProducerGate(100)
    listener = Listener()
    gate.add_listener(listener)
    gate.add(100)
    assert not gate.blocked and listener.events == []
    gate.add(1)
    gate.add(50)
    assert gate.blocked and listener.events == ["blocked"]
    assert "101 of 100 bytes" in listener.reason
    gate.sub(40)
    assert gate.blocked
    gate.sub(20)
    assert not gate.blocked and listener.events == ["blocked", "unblocked"]


def test_late_listener_told_at_once_and_removal() -> None:
    gate = ProducerGate(10)
    gate.add(11)
    late = Listener()
    gate.add_listener(late)
    assert late.events == ["blocked"]
    gate.remove_listener(late)
    gate.remove_listener(late)  # unknown: ignored
    gate.sub(11)
    assert late.events == ["blocked"]


def test_gate_without_watermark_never_blocks_and_can_be_changed() -> None:
    gate = ProducerGate(None)
    listener = Listener()
    gate.add_listener(listener)
    gate.add(10**9)
    assert not gate.blocked
    gate.set_high_watermark(100)
    assert gate.blocked and listener.events == ["blocked"]
    gate.set_high_watermark(None)
    assert not gate.blocked and listener.events == ["blocked", "unblocked"]
