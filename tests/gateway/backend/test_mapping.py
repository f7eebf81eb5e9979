"""The 1.0 <-> 0-9-1 rules of edge mode: sources and outcomes."""
from __future__ import annotations

import pytest

from addressing import AddressError
from gateway.backend.mapping import Disposition, disposition_for, source_queue


@pytest.mark.parametrize("outcome, expected", [
    ("accepted", Disposition.ACK), ("released", Disposition.NACK_REQUEUE),
    ("rejected", Disposition.REJECT), ("modified", Disposition.NACK_REQUEUE),
    ("", Disposition.NACK_REQUEUE),
])
def test_outcomes(outcome: str, expected: Disposition) -> None:
    assert disposition_for(outcome) is expected


@pytest.mark.parametrize("address", ["/queue/q1", "/amq/queue/q1", "/queues/q1", "q1"])
def test_queue_sources(address: str) -> None:
    assert source_queue(address) == "q1"


@pytest.mark.parametrize("address", ["/exchange/x/k", "/topic/k", "/queue", "a@b"])
def test_other_sources_are_refused(address: str) -> None:
    with pytest.raises(AddressError):
        source_queue(address)
