"""``PublishResult``: what publishing a message in a vhost did (``vhost_publish``).

Apart from the publisher so that a queue can keep the result of a message it alone took
(``Queue.took_alone``): that is every ordinary publish to one queue, and made once it costs
nothing per message.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Optional

__all__ = ["PublishResult"]


class PublishResult(NamedTuple):
    """What a publish did.

    ``queues``: queues that took the message; ``rejected``: queues that refused it
    (``reject-publish`` overflow: 0-9-1 nacks the confirm); ``service``: the service node
    name it was handed to, if any. ``routed`` is False for an unroutable message
    (0-9-1 ``mandatory`` returns it).

    A named tuple, not a frozen dataclass: one is made per publish, and a frozen
    dataclass's ``__init__`` costs twice as much.
    """

    queues: tuple[Any, ...] = ()
    rejected: tuple[Any, ...] = ()
    service: Optional[str] = None

    @property
    def routed(self) -> bool:
        return bool(self.queues or self.rejected or self.service is not None)

    @property
    def count(self) -> int:
        """Number of queues that took the message."""
        return len(self.queues)
