"""MemoryPager: keeps the bodies held in memory under the memory budget by leaving the
newest bodies of durable queues in the store (RabbitMQ's lazy / classic-queue-v2
behaviour, so a backlog of millions of persistent messages does not exhaust memory).

The producer gate counts the body bytes held in memory. When that count is above
``budget``, :meth:`MemoryPager.relieve` asks each stored queue to drop bodies (newest
first, only those whose writes are committed: see ``QueueStorage.to_page_out``) until the
count is back under the budget. The service calls it after every commit report (the
moment more bodies become droppable) and on the broker's tick; under the budget it is
one comparison. Bodies come back in batches when their entries reach the head.

The memory high watermark (which blocks publishers) stays above the budget: paging is
what keeps a durable backlog from reaching it; transient messages and non-durable queues
are never paged, so they can still reach it.
"""
from __future__ import annotations

import logging
from typing import Any, Optional


__all__ = ["MemoryPager"]

log = logging.getLogger(__name__)


class MemoryPager:
    """See the module docstring; ``budget`` in bytes (``None``: never page out)."""

    __slots__ = ("broker", "budget", "paged_bytes")

    def __init__(self, broker: Any, budget: Optional[int]) -> None:
        self.broker = broker
        self.budget = budget
        #: bytes of bodies dropped from memory so far (a counter, for metrics)
        self.paged_bytes = 0

    def relieve(self) -> int:
        """Drop bodies until the memory count is under the budget; returns bytes dropped."""
        budget = self.budget
        gate = self.broker.gate
        if budget is None or gate.used <= budget:
            return 0
        freed = 0
        for vhost in list(self.broker.vhosts.values()):
            for queue in list(vhost.queues.values()):
                if queue.storage is None or not queue.ready.count:
                    continue
                freed += queue.entries.page_out(gate.used - budget)
                if gate.used <= budget:
                    self.paged_bytes += freed
                    return freed
        self.paged_bytes += freed
        return freed
