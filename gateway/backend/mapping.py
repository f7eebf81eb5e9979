"""The 1.0 <-> 0-9-1 rules of edge mode: where a 1.0 link goes on a 0-9-1 backend, and
what a 1.0 outcome does to the backend's delivery.

Targets: ``/exchange/X/RK``, ``/exchange/X`` (the message's subject is the key),
``/topic/RK``, ``/queue/Q`` and the other forms our grammar knows become publishes
(``addressing.resolve_remote_target``). Sources: ``/queue/Q``, ``/amq/queue/Q``,
``/queues/Q`` and a bare ``Q`` become a consumer of queue Q; anything else is refused.

Outcomes (the issue's table): accepted -> basic.ack; released -> basic.nack with requeue;
rejected -> basic.reject without requeue; modified -> basic.nack with requeue (delivery-
failed counts as RabbitMQ counts redeliveries); a settlement without an outcome is
released (our default outcome).
"""
from __future__ import annotations

import enum

from addressing import AddressError, AddressErrorKind, LocalConsume, resolve_remote_source

__all__ = ["Disposition", "disposition_for", "source_queue"]


class Disposition(enum.Enum):
    ACK = "basic.ack"
    NACK_REQUEUE = "basic.nack requeue"
    REJECT = "basic.reject"


#: 1.0 outcome names -> the backend's
_DISPOSITIONS = {"accepted": Disposition.ACK, "released": Disposition.NACK_REQUEUE,
                 "rejected": Disposition.REJECT, "modified": Disposition.NACK_REQUEUE}


def disposition_for(outcome: str) -> Disposition:
    """The backend's settlement for a 1.0 ``outcome`` name (anything else: released)."""
    return _DISPOSITIONS.get(outcome, Disposition.NACK_REQUEUE)


def source_queue(address: str) -> str:
    """The backend queue a 1.0 source address consumes from. Raises ``AddressError``."""
    route = resolve_remote_source(address)
    if not isinstance(route, LocalConsume):
        raise AddressError(AddressErrorKind.INVALID,
                           f"a proxied vhost consumes only from queues (/queue/NAME), not '{address}'")
    return route.queue
