"""What the service lends the HTTP API's handlers, which management cannot build itself:
the 0-9-1 message codec (publish and get), and the facts of the running gateway the health
checks read (its bound listeners with their certificates' dates, its connections)."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, NamedTuple, Optional

from gateway.broker import MessageContainer
from translators.basic_properties import BasicProperties

__all__ = ["MessageCodec", "ListenerFact", "HealthFacts"]


class MessageCodec(NamedTuple):
    """The 0-9-1 encoding, lent by the service: ``compose(properties, body, exchange,
    routing_key, now)`` -> a container (``ValueError`` for a property 0-9-1 refuses);
    ``describe(container)`` -> ``(BasicProperties, body)`` as a 0-9-1 consumer gets them."""

    compose: Callable[[BasicProperties, bytes, str, str, float], MessageContainer]
    describe: Callable[[MessageContainer], tuple[BasicProperties, bytes]]


@dataclass(frozen=True)
class ListenerFact:
    """One bound listener: RabbitMQ's protocol name, address, and for a TLS listener its
    certificate files with the expiry (seconds since the epoch) of each certificate in
    them (``None`` for a file that could not be read)."""

    protocol: str
    interface: str
    port: int
    certfile: Optional[str] = None
    cacertfile: Optional[str] = None
    certfile_expiries: Optional[tuple[float, ...]] = ()
    cacertfile_expiries: Optional[tuple[float, ...]] = ()


@dataclass
class HealthFacts:
    """``listeners()``: the bound listeners now; ``connections()``: open AMQP
    connections; ``max_connections``: the gateway's cap (0: none)."""

    listeners: Callable[[], list[ListenerFact]] = list
    connections: Callable[[], int] = lambda: 0
    max_connections: int = 0
    clock: Callable[[], float] = time.time
