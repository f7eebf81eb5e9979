"""Unroutable publishes: what a publisher is told, and how many there were.

A publish that no queue (and no service node) takes is *unroutable*. 0-9-1 decides
what happens by the publish's ``mandatory`` flag (``basic.return``, or dropped); AMQP
1.0 has no such flag, so the gateway applies an :class:`UnroutablePolicy`: the
operator's default (``amqp10.unroutable`` in the config) or the one a link's target
asks for (``gateway.amqp10.unroutable_outcome``).

:class:`UnroutableCounts` are plain ints the protocols increment on the (rare)
unroutable path and ``gateway.metrics`` reads at scrape time, with RabbitMQ's meaning
(``rabbitmq_global_messages_unroutable_{dropped,returned}_total``, per protocol):
*dropped* when the publisher is not told (0-9-1 without ``mandatory``; 1.0 settled
``accepted``, or sent pre-settled), *returned* when it is (0-9-1 ``basic.return``; 1.0
``released`` or ``rejected``).
"""
from __future__ import annotations

import enum
from typing import Iterator

__all__ = ["UnroutablePolicy", "UnroutableCounts", "PROTOCOL_LABELS"]

#: the ``protocol`` label values, as RabbitMQ's global counters spell them
PROTOCOL_LABELS = ("amqp091", "amqp10")


class UnroutablePolicy(enum.Enum):
    """The outcome a 1.0 publisher gets for an unroutable message (the config values).

    ACCEPT drops it, as RabbitMQ 3's 1.0 plugin and a non-mandatory 0-9-1 publish do;
    RELEASE is what RabbitMQ 4 does; REJECT is Qpid Broker-J's default (``rejected``
    with ``amqp:not-found``).
    """

    ACCEPT = "accept"
    RELEASE = "release"
    REJECT = "reject"


class UnroutableCounts:
    """Unroutable publishes since start, per protocol: ``dropped`` and ``returned``."""

    __slots__ = ("dropped_amqp091", "returned_amqp091", "dropped_amqp10", "returned_amqp10")

    def __init__(self) -> None:
        self.dropped_amqp091 = 0
        self.returned_amqp091 = 0
        self.dropped_amqp10 = 0
        self.returned_amqp10 = 0

    def samples(self) -> Iterator[tuple[str, str, int]]:
        """``(kind, protocol label, count)`` for every pair, kind ``dropped`` or
        ``returned`` (for the metrics collector)."""
        for kind in ("dropped", "returned"):
            for protocol in PROTOCOL_LABELS:
                yield kind, protocol, getattr(self, f"{kind}_{protocol}")
