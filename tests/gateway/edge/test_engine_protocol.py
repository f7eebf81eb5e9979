"""``EngineDriver`` in memory (StringTransport, MemoryReactorClock): when the socket closes
after the engine is done, and what happens to input that arrives after a protocol close."""
from __future__ import annotations

import pytest
from twisted.internet.testing import MemoryReactorClock, StringTransport

from gateway.edge.engine_protocol import CLOSE_LINGER, EngineDriver


class ClosingEngine:
    """An engine that closes on ``BYE`` (queueing ``CLOSE-OK``), with or without asking the
    edge to leave closing the socket to the peer."""

    def __init__(self, linger: bool) -> None:
        self.received = bytearray()
        self.eofs = 0
        self.closed = False
        self.wants_input = True
        self.linger_on_close = False
        self._linger = linger
        self._out = bytearray()

    def receive_data(self, data: bytes) -> None:
        assert not self.closed, "input after the engine closed must not reach it"
        self.received += data
        if b"BYE" in self.received:
            self._out += b"CLOSE-OK"
            self.closed = True
            self.linger_on_close = self._linger

    def receive_eof(self) -> None:
        self.eofs += 1
        self.closed = True

    def data_to_send(self) -> bytes:
        out, self._out = bytes(self._out), bytearray()
        return out

    def tick(self, now: float) -> float | None:
        return None


@pytest.fixture
def reactor() -> MemoryReactorClock:
    return MemoryReactorClock()


def _driver(reactor, linger: bool) -> tuple[EngineDriver, ClosingEngine, StringTransport]:
    engine = ClosingEngine(linger)
    transport = StringTransport()
    driver = EngineDriver(engine, transport, reactor)
    driver.start()
    return driver, engine, transport


def test_without_linger_the_socket_closes_once_the_engine_is_closed(reactor):
    driver, engine, transport = _driver(reactor, linger=False)
    driver.data_received(b"BYE")
    assert transport.value() == b"CLOSE-OK"
    assert transport.disconnecting


def test_after_a_protocol_close_input_is_discarded_until_the_peer_closes(reactor):
    driver, engine, transport = _driver(reactor, linger=True)
    driver.data_received(b"BYE")
    assert transport.value() == b"CLOSE-OK"
    assert not transport.disconnecting          # the peer closes first
    driver.data_received(b"late publishes")     # discarded, never answered
    assert bytes(engine.received) == b"BYE" and transport.value() == b"CLOSE-OK"
    assert not transport.disconnecting
    driver.eof_received()
    assert transport.disconnecting
    assert engine.eofs == 0                     # the engine was done already
    driver.connection_lost()
    assert not reactor.getDelayedCalls()


def test_a_peer_that_never_closes_is_closed_after_the_linger(reactor):
    driver, engine, transport = _driver(reactor, linger=True)
    driver.data_received(b"BYE")
    reactor.advance(CLOSE_LINGER - 0.1)
    assert not transport.disconnecting
    reactor.advance(0.1)
    assert transport.disconnecting
    driver.connection_lost()
    assert not reactor.getDelayedCalls()


def test_a_paused_transport_is_resumed_to_read_the_peers_close(reactor):
    driver, engine, transport = _driver(reactor, linger=True)
    engine.wants_input = False
    driver.data_received(b"x")
    assert transport.producerState == "paused"
    driver.data_received(b"BYE")
    assert transport.producerState == "producing"
    assert not transport.disconnecting


def test_shutdown_while_lingering_closes_at_once(reactor):
    driver, engine, transport = _driver(reactor, linger=True)
    driver.data_received(b"BYE")
    driver.shutdown("shutdown")
    assert transport.disconnecting
    assert not reactor.getDelayedCalls()


def test_a_peer_gone_while_lingering_cancels_the_linger(reactor):
    driver, engine, transport = _driver(reactor, linger=True)
    driver.data_received(b"BYE")
    assert reactor.getDelayedCalls()
    driver.connection_lost()
    assert not reactor.getDelayedCalls()
    assert not transport.disconnecting
