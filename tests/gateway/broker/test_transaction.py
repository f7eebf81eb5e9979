"""``TransactionWork``: the one buffer of 0-9-1 tx and 1.0 transactions."""
from __future__ import annotations

from gateway.broker.transaction import TransactionWork, WorkKind


def test_posts_and_retirements_come_back_in_arrival_order():
    work: TransactionWork[str, int] = TransactionWork()
    work.post("p1")
    work.retire(1)
    work.post("p2")
    work.retire(2)
    assert len(work) == 4
    assert list(work.retirements()) == [1, 2]
    assert work.take() == [(WorkKind.POST, "p1"), (WorkKind.RETIRE, 1),
                           (WorkKind.POST, "p2"), (WorkKind.RETIRE, 2)]
    assert len(work) == 0 and work.take() == [] and list(work.retirements()) == []
