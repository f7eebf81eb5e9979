"""ConsumerSet: exclusivity and round-robin picking."""
from __future__ import annotations

import pytest

from gateway.broker import ConsumerSet, CreditWindow, ResourceLocked


def test_pick_round_robin_skips_without_credit(consumer_cls) -> None:
    s = ConsumerSet("queue 'q' in vhost '/'")
    a = consumer_cls("a")
    b = consumer_cls("b", credit=CreditWindow.prefetch(1))
    c = consumer_cls("c")
    for x in (a, b, c):
        s.add(x)
    b.credit.consume_one()
    assert [s.pick().tag for _ in range(4)] == ["a", "c", "a", "c"]
    assert s.pick(excluded={a}).tag == "c"
    assert s.pick(excluded={a, c}) is None


def test_browsers_kept_apart(consumer_cls) -> None:
    s = ConsumerSet("q")
    browser = consumer_cls("b", acquires=False)
    s.add(browser)
    assert s.acquiring == 0 and len(s) == 1 and browser in s and s.browsers[browser] == 0
    assert s.pick() is None
    assert s.remove(browser) and not s.remove(browser)


def test_exclusive(consumer_cls) -> None:
    s = ConsumerSet("queue 'q' in vhost '/'")
    s.add(consumer_cls("a"))
    with pytest.raises(ResourceLocked) as info:
        s.add(consumer_cls("x", exclusive=True))
    assert info.value.text == "queue 'q' in vhost '/' in exclusive use"
    assert len(s.clear()) == 1 and len(s) == 0
