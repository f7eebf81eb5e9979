"""``credit_to_grant``: the flow increment that lifts a receiver to a window, never leaving
a negative count (a peer's overshoot) to go out as a wrapped link-credit."""
from __future__ import annotations

import pytest

from gateway.amqp10.link_credit import credit_to_grant


@pytest.mark.parametrize(("have", "window", "expected"), [
    (0, 5, 5),     # a fresh link: the whole window
    (3, 5, 2),     # a top-up
    (5, 5, 0),     # full already
    (7, 5, 0),     # more than the window: never taken back
    (-4, 1, 5),    # the peer sent 4 past its credit: lifted to the window itself
    (-4, 0, 4),    # no window: lifted to 0, never left negative on the wire
    (-4, -3, 4),   # a window still owed (negative): 0 on the wire
    (0, -3, 0),
])
def test_the_grant_leaves_the_link_with_the_window_or_nothing_negative(have, window, expected):
    assert credit_to_grant(have, window) == expected
    assert have + expected == max(window, 0, have)
