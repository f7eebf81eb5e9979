"""``ProtonTransport``: proton's server engine for one 1.0 connection, fed and drained.

Facts checked on python-qpid-proton 0.40 (DESIGN.md): a server ``Transport`` bound to a
``Connection`` that collects its events into a ``Collector``; no proton SASL (ours ran
before). Input goes in with ``push`` in pieces no larger than ``capacity()``; what does not
fit waits (and the edge is asked to stop reading) until proton has room, and a negative
capacity means the transport takes no more input, the rest is dropped. Output comes out
with ``pending``/``peek``/``pop``, looped: proton encodes the next frames of a large
transfer only after a ``pop``.
"""
from __future__ import annotations

from typing import Any

from proton import Collector, Connection, SymbolList, Transport, symbol

from gateway.amqp10.proton_calls import transport_capacity, transport_drain, transport_push
from gateway.product import product_properties

__all__ = ["ProtonTransport", "connection_properties", "OFFERED_CAPABILITIES"]

#: what our ``open`` offers
OFFERED_CAPABILITIES = ("ANONYMOUS-RELAY",)


def connection_properties(rabbitmq_version: str = "") -> dict[symbol, str]:
    """Our ``open``'s properties: what the gateway says it is (``gateway.product``), with
    symbol keys as the spec and RabbitMQ have them; product RabbitMQ with
    ``rabbitmq_version`` when set (config ``rabbitmq_version``)."""
    return {symbol(key): value for key, value in product_properties(rabbitmq_version).items()}


class ProtonTransport:
    """A server transport, connection and collector; limits in octets, channels, seconds."""

    __slots__ = ("transport", "connection", "collector", "_pending_input")

    def __init__(self, *, container_id: str, max_frame_size: int, channel_max: int,
                 idle_timeout: float, rabbitmq_version: str = "") -> None:
        transport = Transport(Transport.SERVER)
        transport.max_frame_size = max_frame_size
        transport.channel_max = channel_max
        transport.idle_timeout = idle_timeout
        connection = Connection()
        connection.container = container_id
        connection.offered_capabilities = SymbolList([symbol(c) for c in OFFERED_CAPABILITIES])
        connection.properties = connection_properties(rabbitmq_version)
        collector = Collector()
        connection.collect(collector)
        transport.bind(connection)
        self.transport: Any = transport
        self.connection: Any = connection
        self.collector: Any = collector
        self._pending_input = b""

    def push(self, data: bytes) -> bool | None:
        """Give proton ``data`` after what waited; True when all of it went in, False when
        some waits for room (stop reading), None when proton takes no more input."""
        if self._pending_input:
            data = self._pending_input + data
            self._pending_input = b""
        went_in = transport_push(self.transport, data, 0)
        if went_in == len(data):
            return True
        if went_in < 0:
            return None  # closed for input: ignore the rest
        self._pending_input = bytes(data[went_in:])
        return False

    @property
    def input_waits(self) -> bool:
        """Input is waiting and proton has room for it now."""
        return bool(self._pending_input) and transport_capacity(self.transport) > 0

    def drain(self, out: bytearray) -> bool:
        """Append all of proton's output to ``out``; True once the transport is done (head
        closed, or tail closed with nothing left to say)."""
        pending = transport_drain(self.transport, out)
        return pending < 0 or transport_capacity(self.transport) < 0
