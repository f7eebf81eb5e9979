"""The sniffer driven in memory: Twisted's StringTransport and a MemoryReactorClock."""
from __future__ import annotations

import pytest
from twisted.internet.address import IPv4Address
from twisted.internet.testing import MemoryReactorClock, StringTransport

from gateway.config import ListenerConfig
from gateway.connection_log import HANDSHAKE_TIMEOUT_KIND, HandshakeTimeout
from gateway.edge.listener import HARD_CAP_MIN_MARGIN, ListenerFactory, hard_cap
from gateway.metrics import GatewayMetrics
from gateway.protocol_header import AMQP091_HEADER, AMQP10_SASL_HEADER, HeaderKind


class RecordingEngine:
    """Stands in for a protocol engine: records input, answers with a fixed greeting."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.received = bytearray()
        self.eof = False
        self.closed = False
        self.wants_input = True
        self.on_output = None
        self._out = bytearray(b"HELLO")
        self.shutdown_reason = None

    def receive_data(self, data):
        self.received += data
        if b"BYE" in self.received:
            self._out += b"CLOSING"
            self.closed = True

    def receive_eof(self):
        self.eof = True

    def data_to_send(self):
        out, self._out = bytes(self._out), bytearray()
        return out

    def tick(self, now):
        return None

    def shutdown(self, reason):
        self.shutdown_reason = reason
        self._out += b"SHUTDOWN"
        self.closed = True


@pytest.fixture
def env():
    reactor = MemoryReactorClock()
    engines = []

    def factory_fn(ctx):
        e = RecordingEngine(ctx)
        engines.append(e)
        return e

    listener = ListenerConfig(port=0, sniff_timeout=3.0)
    metrics = GatewayMetrics()
    factory = ListenerFactory(listener, reactor, metrics, factory_fn)
    return reactor, factory, engines, metrics


def connect(factory):
    proto = factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", 40000))
    transport = StringTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", 40000))
    proto.makeConnection(transport)
    return proto, transport


def sample(metrics, name, labels=None):
    return metrics.registry.get_sample_value(name, labels or {}) or 0


@pytest.mark.parametrize("header,kind,label", [
    (b"AMQP\x00\x00\x09\x01", HeaderKind.AMQP091, "amqp091"),
    (b"AMQP\x01\x01\x00\x09", HeaderKind.AMQP09, "amqp09"),
    (b"AMQP\x03\x01\x00\x00", HeaderKind.AMQP10_SASL, "amqp10"),
    # served or refused by the 1.0 engine, which knows the listener's setting
    (b"AMQP\x00\x01\x00\x00", HeaderKind.AMQP10_PLAIN, "amqp10"),
])
def test_recognised_headers_reach_an_engine_with_leftovers(env, header, kind, label):
    reactor, factory, engines, metrics = env
    proto, transport = connect(factory)
    for b in header[:-1]:
        proto.dataReceived(bytes([b]))
        assert not engines
    proto.dataReceived(header[-1:] + b"rest")
    assert len(engines) == 1
    assert engines[0].ctx.kind is kind and engines[0].ctx.header == header
    assert bytes(engines[0].received) == b"rest"
    assert transport.value() == b"HELLO"
    assert sample(metrics, "amqp_gateway_connections_accepted_total", {"protocol": label}) == 1
    assert sample(metrics, "amqp_gateway_connections_open", {"protocol": label}) == 1
    proto.dataReceived(b"BYE")
    assert transport.value().endswith(b"CLOSING")
    assert transport.disconnecting
    proto.connectionLost(None)
    assert sample(metrics, "amqp_gateway_connections_open", {"protocol": label}) == 0


@pytest.mark.parametrize("data,reply,reason", [
    (b"AMQP\x01\x01\x00\x0a", AMQP091_HEADER, "unknown-header"),        # 0-10
    (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", AMQP091_HEADER, "unknown-header"),
    (b"\xff\xfe\xfd", AMQP091_HEADER, "unknown-header"),
    (b"AMQP\x01\x01\x08\x00", AMQP091_HEADER, "amqp08"),
    (b"AMQP\x01\x01\x09\x01", AMQP091_HEADER, "amqp08"),
    (b"AMQP\x02\x01\x00\x00", AMQP10_SASL_HEADER, "tls-not-enabled"),
    (b"\x16\x03\x01\x00\xa5\x01\x00\x00", AMQP091_HEADER, "tls-not-enabled"),
])
def test_refused_headers_get_our_header_and_a_close(env, data, reply, reason):
    reactor, factory, engines, metrics = env
    proto, transport = connect(factory)
    proto.dataReceived(data)
    assert transport.value() == reply
    assert transport.disconnecting
    assert not engines
    assert sample(metrics, "amqp_gateway_sniff_failures_total", {"reason": reason}) == 1
    proto.dataReceived(b"more")          # ignored, never raises
    assert transport.value() == reply


def test_short_read_then_eof_gets_our_header(env):
    reactor, factory, engines, metrics = env
    proto, transport = connect(factory)
    proto.dataReceived(b"AMQP\x00")
    assert transport.value() == b""
    proto.readConnectionLost()
    assert transport.value() == AMQP091_HEADER
    assert transport.disconnecting
    assert sample(metrics, "amqp_gateway_sniff_failures_total", {"reason": "short-read"}) == 1


def test_silent_peer_closed_at_the_deadline(env):
    reactor, factory, engines, metrics = env
    proto, transport = connect(factory)
    reactor.advance(2.9)
    assert not transport.disconnecting
    reactor.advance(0.2)
    assert transport.disconnecting
    assert transport.value() == b""
    assert sample(metrics, "amqp_gateway_sniff_failures_total", {"reason": "timeout"}) == 1


def test_partial_header_closed_at_the_deadline(env):
    reactor, factory, engines, metrics = env
    proto, transport = connect(factory)
    proto.dataReceived(b"AMQP")
    reactor.advance(3.1)
    assert transport.disconnecting and not engines


def test_recognised_connection_cancels_the_deadline(env):
    reactor, factory, engines, metrics = env
    proto, transport = connect(factory)
    proto.dataReceived(AMQP091_HEADER)
    reactor.advance(60)
    assert not transport.disconnecting


def test_engine_failure_costs_only_the_connection(env):
    reactor, factory, engines, metrics = env
    proto, transport = connect(factory)
    proto.dataReceived(AMQP091_HEADER)

    def boom(data):
        raise RuntimeError("bug")

    engines[0].receive_data = boom
    proto.dataReceived(b"x")             # must not raise
    assert transport.disconnecting


def test_drain_asks_engines_to_shut_down(env):
    reactor, factory, engines, metrics = env
    p1, t1 = connect(factory)
    p1.dataReceived(AMQP091_HEADER)
    p2, t2 = connect(factory)            # still sniffing
    d = factory.drain("shutdown")
    assert engines[0].shutdown_reason == "shutdown"
    assert t1.value().endswith(b"SHUTDOWN") and t1.disconnecting
    assert t2.disconnecting
    assert not d.called
    p1.connectionLost(None)
    p2.connectionLost(None)
    assert d.called


def test_capped_listener_accepts_sockets_up_to_the_hard_cap_then_closes_them(env):
    """Above max_connections sockets are still accepted (the engine refuses them at open
    with the protocol's error); only beyond the cap plus a margin are they closed."""
    reactor, factory, engines, metrics = env
    factory.max_connections = 1
    assert hard_cap(1) == 1 + HARD_CAP_MIN_MARGIN
    held = [connect(factory) for _ in range(hard_cap(1))]
    assert all(proto is not None for proto, _ in held)
    assert factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", 1)) is None
    assert sample(metrics, "amqp_gateway_sniff_failures_total", {"reason": "connection-limit"}) == 1
    held[0][0].connectionLost(None)
    assert factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", 2)) is not None


def test_hard_cap_grows_with_the_limit_and_zero_is_none():
    assert hard_cap(0) == 0
    assert hard_cap(1000) == 1250


def test_engines_get_the_listener_slots_and_the_listener_cap_wins(env):
    reactor, _, engines, metrics = env
    factory = ListenerFactory(ListenerConfig(port=0, name="edge", max_connections=3), reactor,
                              metrics, lambda ctx: engines.append(RecordingEngine(ctx)) or engines[-1],
                              max_connections=50)
    assert factory.max_connections == 3
    proto, transport = connect(factory)
    proto.dataReceived(AMQP091_HEADER)
    slots = engines[0].ctx.listener_slots
    assert slots is factory.slots and (slots.name, slots.limit) == ("edge", 3)
    unset = ListenerFactory(ListenerConfig(port=0), reactor, metrics, lambda ctx: None,
                            max_connections=50)
    assert unset.max_connections == 50
    assert unset.slots.name == "127.0.0.1:0"


# ------------------------------------------------------------------ login throttle, timeouts

def test_sniff_timeouts_are_logged_once_per_interval_with_a_count(env, caplog):
    reactor, factory, engines, metrics = env
    caplog.set_level("INFO", logger="gateway.edge")
    connect(factory)
    connect(factory)
    reactor.advance(3.1)
    factory.connection_log.flush(reactor.seconds() + 10)
    assert [r.getMessage() for r in caplog.records] == [
        "handshake timeout: 127.0.0.1:40000 stalled in phase 'protocol header' for 3.0s; closed",
        "handshake-timeout: 1 more in the last 10s not logged: 1 protocol header"]
    assert factory.connection_log.left_out(HANDSHAKE_TIMEOUT_KIND) == 0


class TimingOutEngine(RecordingEngine):
    """Closes itself at its handshake deadline, as both protocol engines do."""

    def __init__(self, ctx):
        super().__init__(ctx)
        self.timed_out = None

    def tick(self, now):
        if now >= 5.0:
            self.closed = True
            self.timed_out = HandshakeTimeout("test phase", 5.0)
            return None
        return 5.0


def test_the_driver_logs_an_engine_handshake_timeout_once(caplog):
    reactor = MemoryReactorClock()
    factory = ListenerFactory(ListenerConfig(port=0), reactor, GatewayMetrics(), TimingOutEngine)
    caplog.set_level("INFO", logger="gateway.edge")
    proto, transport = connect(factory)
    proto.dataReceived(AMQP091_HEADER)
    reactor.advance(5.0)
    assert transport.disconnecting
    proto.driver.flush()
    assert [r.getMessage() for r in caplog.records if "timeout" in r.getMessage()] == [
        "handshake timeout: 127.0.0.1:40000 stalled in phase 'test phase' for 5.0s; closed"]


# ------------------------------------------------------------------ PROXY protocol

PROXY_V2 = (b"\r\n\r\n\x00\r\nQUIT\n\x21\x11\x00\x0c" + bytes([203, 0, 113, 9, 127, 0, 0, 1])
            + (40123).to_bytes(2, "big") + (5672).to_bytes(2, "big"))


def proxy_listener(reactor, metrics, engines, **kwargs):
    def factory_fn(ctx):
        e = RecordingEngine(ctx)
        engines.append(e)
        return e
    return ListenerFactory(ListenerConfig(port=0, sniff_timeout=3.0, proxy_protocol=True),
                           reactor, metrics, factory_fn, **kwargs)


@pytest.mark.parametrize("proxy_header", [PROXY_V2, b"PROXY TCP4 203.0.113.9 127.0.0.1 40123 5672\r\n"])
def test_a_proxy_header_names_the_client_to_the_engine_and_the_logs(env, caplog, proxy_header):
    reactor, _, engines, metrics = env
    factory = proxy_listener(reactor, metrics, engines)
    proto, transport = connect(factory)
    caplog.set_level("INFO", logger="gateway.connection_log")
    stream = proxy_header + AMQP091_HEADER + b"rest"
    for b in stream[:len(proxy_header) + 7]:
        proto.dataReceived(bytes([b]))
        assert not engines and not transport.disconnecting
    proto.dataReceived(stream[len(proxy_header) + 7:])
    ctx = engines[0].ctx
    assert (ctx.peer_host, ctx.peer_port) == ("203.0.113.9", 40123)
    assert ctx.kind is HeaderKind.AMQP091 and bytes(engines[0].received) == b"rest"
    assert factory.peer_text(proto) == "203.0.113.9:40123"
    assert any("203.0.113.9:40123" in r.getMessage() for r in caplog.records)


def test_a_local_proxy_header_keeps_the_socket_address(env):
    reactor, _, engines, metrics = env
    factory = proxy_listener(reactor, metrics, engines)
    proto, transport = connect(factory)
    proto.dataReceived(b"\r\n\r\n\x00\r\nQUIT\n\x20\x00\x00\x00" + AMQP10_SASL_HEADER)
    assert (engines[0].ctx.peer_host, engines[0].ctx.peer_port) == ("127.0.0.1", 40000)


@pytest.mark.parametrize("data", [AMQP091_HEADER, b"PROXY TCP4 1.2.3 1.2.3.4 1 2\r\n" + AMQP091_HEADER])
def test_a_connection_without_a_valid_proxy_header_is_closed_and_logged(env, caplog, data):
    reactor, _, engines, metrics = env
    factory = proxy_listener(reactor, metrics, engines)
    proto, transport = connect(factory)
    caplog.set_level("WARNING", logger="gateway.edge.sniffer")
    proto.dataReceived(data)
    assert transport.disconnecting and transport.value() == b"" and not engines
    assert sample(metrics, "amqp_gateway_sniff_failures_total", {"reason": "proxy-header"}) == 1
    [line] = [r.getMessage() for r in caplog.records]
    assert "from 127.0.0.1:40000 refused: the listener expects a PROXY protocol header" in line
    proto.dataReceived(b"more")                     # ignored, never raises
    proto.connectionLost(None)


def test_a_proxy_header_not_finished_by_the_deadline_is_closed(env):
    reactor, _, engines, metrics = env
    factory = proxy_listener(reactor, metrics, engines)
    proto, transport = connect(factory)
    proto.dataReceived(PROXY_V2[:20])
    reactor.advance(3.0)
    assert transport.disconnecting and not engines


def test_behind_a_balancer_the_engine_sees_the_client_not_the_balancer(env):
    """The login throttle (in the engines) counts the client the PROXY header names; no
    connection is refused at the listener for its failed logins (issue 41)."""
    reactor, _, engines, metrics = env
    factory = proxy_listener(reactor, metrics, engines)
    proto, transport = connect(factory)                      # accepted from 127.0.0.1
    proto.dataReceived(PROXY_V2 + AMQP091_HEADER)
    assert engines and engines[0].ctx.peer_host == "203.0.113.9"
    assert not transport.disconnecting
