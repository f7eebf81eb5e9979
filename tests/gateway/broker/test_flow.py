"""CreditWindow (prefetch and link credit), ProducerGate (memory alarm) and PublishFlow
(back-pressure from one destination)."""
from __future__ import annotations

import pytest

from gateway.broker import CreditMode, CreditWindow, ProducerGate, PublishFlow


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
    gate.sub(20)  # 91 bytes: below the high mark, above the low one (90)
    assert gate.blocked
    gate.sub(1)
    assert not gate.blocked and listener.events == ["blocked", "unblocked"]


def test_alarm_between_the_marks_keeps_its_state_so_a_slow_consumer_cannot_flip_it(caplog) -> None:
    """The measured case: one message consumed, one published, around the high mark. With
    the low mark at 90% a flip needs 10 messages' worth, not one."""
    gate = ProducerGate(1000, low_ratio=0.9)
    listener = Listener()
    gate.add_listener(listener)
    caplog.set_level("DEBUG", logger="gateway.broker.flow")
    for _ in range(11):
        gate.add(100)                      # 1100: set
    assert gate.blocked
    for _ in range(200):                   # ack one, publish one: stays set
        gate.sub(100)
        gate.add(100)
    assert listener.events == ["blocked"] and gate.transitions == 1
    for _ in range(2):                     # down to 900 = the low mark: cleared
        gate.sub(100)
    assert listener.events == ["blocked", "unblocked"]
    for _ in range(200):                   # between the marks while clear: stays clear
        gate.add(100)
        gate.sub(100)
    assert gate.transitions == 2
    assert [r.getMessage().split(",")[0] for r in caplog.records] == [
        "memory alarm set", "memory alarm cleared"]


def test_without_hysteresis_the_same_load_flips_every_message() -> None:
    """``low_ratio=1.0`` is the old behaviour (clear at the high mark): the comparison the
    default ratio is for."""
    gate = ProducerGate(1000, low_ratio=1.0)
    for _ in range(11):
        gate.add(100)
    for _ in range(200):
        gate.sub(100)
        gate.add(100)
    assert gate.transitions == 1 + 2 * 200


def test_low_mark_follows_the_high_mark_and_a_raised_alarm_clears_only_below_it() -> None:
    gate = ProducerGate(1000, low_ratio=0.5)
    assert gate.low_watermark == 500
    gate.add(1001)
    assert gate.blocked
    gate.set_high_watermark(2000)          # 1001 > 1000 (new low mark): stays set
    assert gate.blocked and gate.low_watermark == 1000
    gate.set_high_watermark(3000)          # 1001 <= 1500: cleared
    assert not gate.blocked
    gate.set_high_watermark(1500)          # not above the high mark: stays clear
    assert not gate.blocked


@pytest.mark.parametrize("ratio", [0.0, -0.1, 1.01])
def test_low_ratio_must_be_a_fraction(ratio: float) -> None:
    with pytest.raises(ValueError):
        ProducerGate(100, low_ratio=ratio)


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


def test_each_alarm_is_logged_in_its_own_words(caplog) -> None:
    """Issue 41: the store alarm's clearing was logged as "memory alarm cleared"."""
    gate = ProducerGate(1000, low_ratio=0.5)
    listener = Listener()
    gate.add_listener(listener)
    caplog.set_level("WARNING", logger="gateway.broker.flow")
    gate.set_alarm("store", "store writes fail: disk full")
    gate.add(2000)                               # memory too, while the store blocks
    gate.set_alarm("store", None)                # memory still blocks
    gate.sub(1800)                               # memory clears: producers flow
    gate.set_alarm("disk", "free disk space below the limit")
    gate.set_alarm("disk", None)
    assert [r.getMessage() for r in caplog.records] == [
        "store alarm set, blocking producers: store writes fail: disk full",
        "memory alarm set: memory high watermark reached (2000 of 1000 bytes; clears at 500) "
        "(producers were blocked already)",
        "store alarm cleared; producers stay blocked by: memory",
        "memory alarm cleared, unblocking producers: 200 bytes queued, at or below the low mark 500",
        "disk alarm set, blocking producers: free disk space below the limit",
        "disk alarm cleared, unblocking producers",
    ]
    assert listener.events == ["blocked", "unblocked", "blocked", "unblocked"] and gate.transitions == 4


def test_a_publish_flow_pauses_above_its_bound_and_resumes_its_waiters_at_half() -> None:
    flow = PublishFlow(10, "'org-b'")
    flow.update(10)
    assert not flow.paused
    flow.update(11)
    assert flow.paused and flow.pauses == 1
    resumed: list[str] = []
    flow.wait(lambda: resumed.append("a"))
    flow.wait(lambda: resumed.append("b"))
    assert flow.waiting == 2
    flow.update(6)  # between half and the bound: still paused (hysteresis)
    assert flow.paused and resumed == []
    flow.update(5)
    assert not flow.paused and resumed == ["a", "b"] and flow.waiting == 0


def test_a_publish_flow_that_is_not_paused_resumes_at_once_and_bound_zero_never_pauses() -> None:
    resumed: list[int] = []
    PublishFlow(10).wait(lambda: resumed.append(1))
    assert resumed == [1]
    never = PublishFlow(0)
    never.update(10**6)
    assert not never.paused


def test_a_publish_flow_released_resumes_everyone_whatever_the_backlog() -> None:
    flow = PublishFlow(2)
    flow.update(3)
    resumed: list[int] = []
    flow.wait(lambda: resumed.append(1))
    flow.release()
    assert not flow.paused and resumed == [1]


def test_a_publish_flow_refuses_a_negative_bound() -> None:
    with pytest.raises(ValueError) as raised:
        PublishFlow(-1)
    assert "bound" in str(raised.value)


def test_a_cancelled_waiter_is_not_resumed_nor_counted() -> None:
    flow = PublishFlow(2)
    flow.update(3)
    resumed: list[str] = []

    def gone() -> None:
        resumed.append("gone")

    flow.wait(gone)
    flow.wait(lambda: resumed.append("kept"))
    flow.cancel(gone)
    flow.cancel(gone)  # (twice: nothing to forget the second time)
    assert flow.waiting == 1
    flow.release()
    assert resumed == ["kept"]
