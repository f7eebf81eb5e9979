"""In-memory pump between our ``Amqp10Engine`` and a real proton *client* transport.

No sockets, no reactor: ``pump()`` moves bytes both ways until nothing moves. The first
8 bytes the client writes are the protocol header the sniffer would have read; they are
passed to ``engine_factory(header)`` to build the engine, exactly as the edge does.

``ClientSide`` wraps the proton client ``Connection`` with small helpers (open a sender
or receiver, send an encoded message, read complete deliveries) so tests read like the
protocol exchange they check.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from proton import Collector, Connection, Delivery, Event, Message, Terminus, Transport

from tests.support.amqp10_link_options import ask_capabilities

__all__ = ["Amqp10Pump", "encode_message", "decode_message"]


def encode_message(body: Any = None, **properties: Any) -> bytes:
    """A proton-encoded message with ``body`` and Message attributes ``properties``."""
    message = Message(body=body, **properties)
    return message.encode()


def decode_message(data: bytes) -> Message:
    message = Message()
    message.decode(data)
    return message


class Amqp10Pump:
    """A proton client connection pumped against an engine built by ``engine_factory``.

    ``mechanism`` None means no SASL at all (the ``AMQP 0 1 0 0`` header).
    """

    def __init__(
        self,
        engine_factory: Callable[[bytes], Any],
        *,
        user: Optional[str] = "guest",
        password: Optional[str] = "guest",
        mechanism: Optional[str] = "PLAIN",
        hostname: Optional[str] = "vhost:/",
        container: str = "test-client",
        max_frame_size: Optional[int] = None,
        idle_timeout: Optional[float] = None,
        now: float = 0.0,
    ) -> None:
        self.engine_factory = engine_factory
        self.engine: Any = None
        self.now = now
        self.transport = Transport()
        if max_frame_size:
            self.transport.max_frame_size = max_frame_size
        if idle_timeout:
            self.transport.idle_timeout = idle_timeout
        self.connection = Connection()
        self.connection.container = container
        if hostname is not None:
            self.connection.hostname = hostname
        if mechanism is not None:
            sasl = self.transport.sasl()
            sasl.allowed_mechs(mechanism)
            sasl.allow_insecure_mechs = True
            if user is not None:
                self.connection.user = user
            if password is not None:
                self.connection.password = password
        self.collector = Collector()
        self.connection.collect(self.collector)
        self.transport.bind(self.connection)
        self.events: list[Any] = []
        self.server_closed = False
        self.received: dict[Any, list[Delivery]] = {}
        self._backlog = b""

    # ------------------------------------------------------------------ plumbing
    def _client_output(self) -> bytes:
        pending = self.transport.pending()
        if pending <= 0:
            return b""
        data = bytes(self.transport.peek(pending))
        self.transport.pop(pending)
        return data

    def pump(self, max_rounds: int = 10000) -> None:
        """Move bytes both ways until neither side has anything to say."""
        for _ in range(max_rounds):
            moved = False
            out = self._client_output()
            if out and self.engine is None:
                header, out = out[:8], out[8:]
                self.engine = self.engine_factory(header)
                moved = True
            if out and self.engine is not None and not self.engine.closed:
                self.engine.receive_data(out)
                moved = True
            if self.engine is not None:
                self.engine.tick(self.now)
                back = self._backlog + self.engine.data_to_send()
                self._backlog = b""
                if back:
                    moved = True
                    self._backlog = self._push_client(back)
                if self.engine.closed and not self.server_closed:
                    self.server_closed = True
                    if self.transport.capacity() >= 0:
                        self.transport.close_tail()
                    moved = True
            self._drain_events()
            if not moved:
                return
        raise AssertionError("pump did not settle")

    def _push_client(self, data: bytes) -> bytes:
        """Push into the client transport within its capacity; return what is left."""
        while data:
            capacity = self.transport.capacity()
            if capacity < 0:
                return b""
            if capacity == 0:
                return data
            self.transport.push(data[:capacity])
            data = data[capacity:]
            self._drain_events()
        return b""

    def _drain_events(self) -> None:
        while True:
            event = self.collector.peek()
            if event is None:
                return
            self.events.append(event.type)
            if event.type == Event.DELIVERY:
                delivery = event.delivery
                if delivery.link.is_receiver and delivery.readable and not delivery.partial:
                    link = delivery.link
                    data = link.recv(delivery.pending)
                    self.received.setdefault(link.name, []).append((delivery, data))
                    link.advance()
            self.collector.pop()

    def advance(self, seconds: float) -> None:
        """Move the clock on both sides and pump."""
        self.now += seconds
        self.transport.tick(self.now)
        self.pump()

    # ------------------------------------------------------------------ client API
    def open(self) -> "Amqp10Pump":
        self.connection.open()
        self.pump()
        return self

    def session(self) -> Any:
        session = self.connection.session()
        session.open()
        return session

    def sender(self, address: Optional[str], *, name: str = "sender", settled: bool = False,
               session: Any = None, capabilities: Sequence[str] = (),
               durable: bool = False) -> Any:
        """A sending link to ``address``; its target asks for ``capabilities`` (symbols)
        and, with ``durable``, has terminus durability ``unsettled-state``."""
        session = session or self.session()
        link = session.sender(name)
        link.target.address = address
        _terminus_options(link.target, capabilities, durable)
        if settled:
            link.snd_settle_mode = link.SND_SETTLED
        link.open()
        self.pump()
        return link

    def receiver(self, address: Optional[str], *, name: str = "receiver", credit: int = 0,
                 dynamic: bool = False, copy: bool = False, settled: bool = False,
                 session: Any = None, durable: bool = False) -> Any:
        session = session or self.session()
        link = session.receiver(name)
        if dynamic:
            link.source.dynamic = True
        else:
            link.source.address = address
        _terminus_options(link.source, (), durable)
        if copy:
            link.source.distribution_mode = link.source.DIST_MODE_COPY
        if settled:
            link.snd_settle_mode = link.SND_SETTLED
        link.open()
        if credit:
            link.flow(credit)
        self.pump()
        return link

    def send(self, link: Any, data: bytes, *, tag: Optional[str] = None) -> Delivery:
        """Send one encoded message on ``link`` and pump; returns the delivery."""
        count = getattr(self, "_tags", 0)
        self._tags = count + 1
        delivery = link.delivery(tag or f"t{count}")
        link.send(data)
        link.advance()
        if link.snd_settle_mode == link.SND_SETTLED:
            delivery.settle()
        self.pump()
        return delivery

    def take(self, link: Any) -> list[tuple[Delivery, bytes]]:
        """Complete deliveries received on ``link`` since the last call."""
        return self.received.pop(link.name, [])

    def settle(self, delivery: Delivery, outcome: int = Delivery.ACCEPTED,
               **remote: Any) -> None:
        """Settle a received delivery with ``outcome`` (attributes of the local
        disposition, e.g. ``failed=True``, go in ``remote``) and pump."""
        for key, value in remote.items():
            setattr(delivery.local, key, value)
        delivery.update(outcome)
        delivery.settle()
        self.pump()


def _terminus_options(terminus: Terminus, capabilities: Sequence[str], durable: bool) -> None:
    if capabilities:
        ask_capabilities(terminus, capabilities)
    if durable:
        terminus.durability = Terminus.DELIVERIES


def engine_factory(broker: Any, authenticator: Any, *, now: float = 0.0,
                   **overrides: Any) -> Callable[[bytes], Any]:
    """A factory building ``Amqp10Engine`` the way ``gateway/service.py`` does."""
    from gateway.amqp10 import Amqp10Engine

    def build(header: bytes) -> Any:
        options: dict[str, Any] = dict(
            broker=broker, authenticator=authenticator, peer_host="127.0.0.1", now=now,
            container_id="gateway-test", allow_anonymous=False, anonymous_user=None,
            default_user=None, default_vhost="/",
        )
        options.update(overrides)
        return Amqp10Engine(header=header, **options)

    return build
