"""``BackendLinkClient`` (the 1.0 connection of a 0-9-1 client's amqp10 backend) closing in
order, against a real proton server connection in memory as the backend: the outcomes the
client gave go first, then the links' detaches and the session's end, and the connection
is closed only once the backend answered the end (issue 44: RabbitMQ's 1.0 plugin loses
the acks of a session it has not finished when the connection closes at once)."""
from __future__ import annotations

from typing import Any

from proton import Collector, Connection, Delivery, Endpoint, Event, Transport, uint
from gateway.amqp10.backend_client import BackendLinkClient
from gateway.backend.addresses import ACCEPTED
from gateway.backend.contract import BackendLogin
from gateway.backend.nodes import BackendNode
from gateway.backend.settings import BackendSettings
from tests.support.amqp10_socket_client import amqp_frame, parse_performatives

GRACE = 5.0


class _Events:
    """The 0-9-1 side (``LinkEvents``) and the edge's connector (the engine's listener)."""

    def __init__(self) -> None:
        self.ready: list[Any] = []
        self.deliveries: list[tuple[Any, Any]] = []
        self.opened = False
        self.ended: list[str] = []

    def link_ready(self, key: Any) -> None:
        self.ready.append(key)

    def delivered(self, key: Any, delivery: Any, message: Any, redelivered: bool) -> None:
        self.deliveries.append((key, delivery))

    def engine_opened(self, engine: Any) -> None:
        self.opened = True

    def engine_lost(self, engine: Any, error: str) -> None:
        self.ended.append(error)

    def lost(self, error: str) -> None:
        raise AssertionError(f"the backend was not lost: {error}")


class _Backend:
    """The backend's end: a proton server connection that answers opens and attaches, and
    records the outcomes it receives; it answers a detach, an end or a close only when
    told to (``answer``)."""

    def __init__(self) -> None:
        self.transport = Transport(Transport.SERVER)
        self.transport.sasl().allowed_mechs("ANONYMOUS")
        self.connection = Connection()
        self.collector = Collector()
        self.connection.collect(self.collector)
        self.transport.bind(self.connection)
        self.outcomes: list[tuple[str, Any]] = []
        self.sender: Any = None

    def receive(self, data: bytes) -> None:
        if data:
            self.transport.push(data)
        while (event := self.collector.peek()) is not None:
            self.collector.pop()
            if event.type == Event.CONNECTION_REMOTE_OPEN:
                event.connection.open()
            elif event.type == Event.SESSION_REMOTE_OPEN:
                event.session.open()
            elif event.type == Event.LINK_REMOTE_OPEN and event.link.state & Endpoint.LOCAL_UNINIT:
                link = event.link
                link.source.address = link.remote_source.address
                link.target.address = link.remote_target.address
                link.open()
                self.sender = link
            elif event.type == Event.DELIVERY and event.delivery.settled:
                self.outcomes.append((event.delivery.tag, event.delivery.remote_state))

    def send(self, count: int) -> None:
        for i in range(count):
            self.sender.delivery(f"m{i}")
            self.sender.send(b"\x00Sw\xa1\x01x")  # amqp-value "x"
            self.sender.advance()

    def answer(self) -> None:
        """Close what the gateway closed (links, session, connection)."""
        for link in (self.sender,):
            if link.state & Endpoint.REMOTE_CLOSED and not link.state & Endpoint.LOCAL_CLOSED:
                link.close()
        session = self.sender.session
        if session.state & Endpoint.REMOTE_CLOSED and not session.state & Endpoint.LOCAL_CLOSED:
            session.close()
        if self.connection.state & Endpoint.REMOTE_CLOSED and not self.connection.state & Endpoint.LOCAL_CLOSED:
            self.connection.close()

    def output(self) -> bytes:
        out = b""
        while (pending := self.transport.pending()) > 0:
            out += self.transport.peek(pending)
            self.transport.pop(pending)
        return out


def _pair() -> tuple[BackendLinkClient, _Backend, _Events]:
    events = _Events()
    settings = BackendSettings(name="b", kind="amqp10", nodes=("127.0.0.1:5672",), connect_timeout=GRACE)
    engine = BackendLinkClient(BackendNode(backend="b", host="127.0.0.1", port=5672), settings,
                               BackendLogin(user="", password="", vhost="/", mechanism="ANONYMOUS"), events)
    engine.listener = events
    backend = _Backend()
    engine.tick(100.0)
    _pump(engine, backend)
    assert events.opened
    return engine, backend, events


def _to_backend(engine: BackendLinkClient, backend: _Backend) -> None:
    backend.receive(engine.data_to_send())


def _pump(engine: BackendLinkClient, backend: _Backend) -> None:
    """Both ways until neither has anything to say."""
    for _ in range(20):
        _to_backend(engine, backend)
        out = backend.output()
        if not out:
            return
        engine.receive_data(out)
    raise AssertionError("the two ends kept talking")


def _consumed(count: int) -> tuple[BackendLinkClient, _Backend, _Events]:
    engine, backend, events = _pair()
    engine.open_receiver("consumer", "/amq/queue/q", count)
    _pump(engine, backend)
    assert events.ready == ["consumer"]
    backend.send(count)
    _pump(engine, backend)
    assert len(events.deliveries) == count
    return engine, backend, events


def test_the_connection_closes_only_after_the_backend_ended_the_session_with_every_outcome_applied():
    engine, backend, events = _consumed(3)
    for key, delivery in events.deliveries:
        engine.settle(key, delivery, ACCEPTED)
    engine.close("the client's connection closed")
    engine.tick(100.1)
    _to_backend(engine, backend)
    # what the backend read: every ack, then the detach and the end; not yet a close
    assert not backend.connection.state & Endpoint.REMOTE_CLOSED
    assert backend.outcomes == [("m0", Delivery.ACCEPTED), ("m1", Delivery.ACCEPTED), ("m2", Delivery.ACCEPTED)]
    assert backend.sender.state & Endpoint.REMOTE_CLOSED
    assert backend.sender.session.state & Endpoint.REMOTE_CLOSED
    assert not engine.closed

    backend.answer()  # the backend's detach and end: now the close
    engine.receive_data(backend.output())
    _to_backend(engine, backend)
    assert backend.connection.state & Endpoint.REMOTE_CLOSED
    assert not engine.closed  # the socket stays until the backend's close

    backend.answer()
    engine.receive_data(backend.output())
    engine.data_to_send()
    assert engine.closed


def test_a_backend_that_never_answers_the_end_is_closed_after_connect_timeout():
    engine, backend, events = _consumed(2)
    key, delivery = events.deliveries[0]
    engine.settle(key, delivery, ACCEPTED)
    engine.close("the client's connection closed")
    deadline = engine.tick(100.1)
    assert deadline == 100.1 + GRACE
    _to_backend(engine, backend)
    # the one acked is accepted, the other released, before the end
    assert backend.outcomes == [("m0", Delivery.ACCEPTED), ("m1", Delivery.RELEASED)]
    assert not backend.connection.state & Endpoint.REMOTE_CLOSED

    engine.tick(100.1 + GRACE)
    _to_backend(engine, backend)
    assert backend.connection.state & Endpoint.REMOTE_CLOSED
    assert engine.closed



TRANSFER, FLOW = 0x14, 0x13


def _overshoot(first_id: int, count: int) -> bytes:
    """``count`` transfers the backend sends past its credit, written by hand (proton's own
    sender never would): channel 0 and handle 0 are the backend's first session and link,
    and the delivery ids go on from the ``first_id`` proton's sender used last."""
    return b"".join(amqp_frame(TRANSFER, [uint(0), uint(first_id + i), f"x{i}".encode(), uint(0), False],
                               payload=b"\x00Sw\xa1\x01x")
                    for i in range(count))


def _link_credits(output: bytes) -> list[tuple[int, int]]:
    """``(delivery-count, link-credit)`` of each link flow frame in ``output``."""
    return [(int(fields[5]), int(fields[6])) for descriptor, fields in parse_performatives(output)
            if descriptor == FLOW and len(fields) > 6 and fields[4] is not None]


def test_a_backend_that_sends_past_its_credit_is_never_given_a_wrapped_negative_credit():
    """RabbitMQ 3.10 sent 9 transfers on a link with credit 5 (issue 44): proton's count went
    to -4, and the next top-up of 1 went out as link-credit 0xfffffffd. Now the credit the
    backend is given stays within the window the 0-9-1 side gave (5 less its unacked)."""
    engine, backend, events = _consumed(5)
    engine.receive_data(_overshoot(5, 4))
    assert len(events.deliveries) == 9
    credits = []
    for key, delivery in events.deliveries:  # the 0-9-1 client acks one by one
        engine.settle(key, delivery, ACCEPTED)
        engine.add_credit(key, 1)
        credits += _link_credits(engine.data_to_send())
    # the first ack lifts the count to 0; the next three pay off the overshoot; then 1 each
    assert credits == [(9, 0), (9, 1), (9, 2), (9, 3), (9, 4), (9, 5)]
