"""The contract between a forwarder and its outbound connection: what both sides make of it."""
from __future__ import annotations

from gateway.forward.outbound import ForwardOutcome, Settlement, accepted_all


def test_accepted_all_makes_the_settlements_a_call_each_would() -> None:
    made = accepted_all((3, 4))
    assert made == [Settlement(3, ForwardOutcome.ACCEPTED), Settlement(4, ForwardOutcome.ACCEPTED)]
    assert all(type(s) is Settlement and s.outcome is ForwardOutcome.ACCEPTED and s.error is None for s in made)
