"""``ClientEngine``: the engine surface over our 0-9-1 client role, for what the edge drives
on an outbound socket (a forwarder's ``OutboundAmqp091``, edge mode's ``BackendRelay`` and
``BackendBridge``).

Each of them owns a ``ClientConnection`` and reads its events after every input and timer
(``_dispatch``, theirs); the surface itself (``receive_data``, ``receive_eof``,
``data_to_send``, ``tick``, ``closed``, ``wants_input``, ``on_output``) is this one class,
so the three differ only in what the events mean.
"""
from __future__ import annotations

from typing import Callable, Optional

from gateway.amqp091.client import ClientConnection

__all__ = ["ClientEngine"]


class ClientEngine:
    """The engine surface of ``gateway.edge.engine_protocol`` over ``self.client``."""

    def __init__(self, client: ClientConnection) -> None:
        self.client = client
        #: set by the edge: called when output appears outside its own calls
        self.on_output: Optional[Callable[[], None]] = None
        #: ``on_output`` was called and the edge has not taken the output since: a
        #: forwarder's slice of publishes asks the edge once, not once a publish
        self._output_asked = False

    @property
    def closed(self) -> bool:
        return self.client.closed

    @property
    def wants_input(self) -> bool:
        return self.client.wants_input

    def receive_data(self, data: bytes) -> None:
        self.client.receive_data(data)
        self._dispatch()

    def receive_eof(self) -> None:
        self.client.receive_eof()
        self._dispatch()

    def data_to_send(self) -> bytes:
        self._output_asked = False
        return self.client.data_to_send()

    def tick(self, now: float) -> Optional[float]:
        deadline = self.client.tick(now)
        self._dispatch()
        return deadline

    def report_down(self, error: str) -> None:
        """The socket went (the edge calls it with a line naming why)."""
        if not self.client.closed:
            self.client.transport_lost(error)
        self._dispatch()

    def close(self, reason: str) -> None:
        self.client.close(reason)
        self.output_ready()

    def shutdown(self, reason: str) -> None:
        self.close(reason)

    def output_ready(self) -> None:
        if self.on_output is not None and not self._output_asked:
            self._output_asked = True
            self.on_output()

    def _dispatch(self) -> None:
        """Act on the client's events (``take_events``)."""
        raise NotImplementedError
