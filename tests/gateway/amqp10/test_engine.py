"""The engine surface: SASL hand-off, open negotiation, limits, errors, teardown."""
from __future__ import annotations

import platform

import pytest
from proton import Data, Described, Endpoint, symbol, uint, ulong

from gateway.amqp10 import Amqp10Engine
from gateway.product import __version__
from gateway.amqp10.sasl import AMQP_HEADER, SASL_HEADER
from tests.support.amqp10_pump import encode_message


def _frame(descriptor: int, fields: list, channel: int = 0) -> bytes:
    data = Data()
    data.put_object(Described(ulong(descriptor), fields))
    body = data.encode()
    return (8 + len(body)).to_bytes(4, "big") + bytes([2, 0]) + channel.to_bytes(2, "big") + body


def _close_condition(pump):
    return pump.connection.remote_condition


def test_sasl_plain_login_and_open(connect):
    pump = connect(user="alice", password="secret")
    assert pump.connection.state & Endpoint.REMOTE_ACTIVE
    assert pump.connection.remote_container == "gateway-test"
    assert pump.engine.user.name == "alice"
    assert pump.engine.vhost.name == "/"
    assert "ANONYMOUS-RELAY" in list(pump.connection.remote_offered_capabilities)


def test_open_announces_product_version_and_platform(connect):
    pump = connect()
    properties = pump.connection.remote_properties
    assert properties == {"product": "amqp-gateway", "version": __version__,
                          "platform": f"Python {platform.python_version()}"}
    assert all(isinstance(key, symbol) for key in properties)


def test_wrong_password_gets_auth_outcome_then_close(connect):
    pump = connect(user="alice", password="nope")
    assert pump.engine.closed
    assert pump.transport.sasl().outcome == 1  # auth
    assert not pump.connection.state & Endpoint.REMOTE_ACTIVE


def test_anonymous_where_allowed(connect):
    pump = connect(mechanism="ANONYMOUS", user=None, password=None,
                   engine=dict(allow_anonymous=True))
    assert pump.engine.user.name == "anon"
    refused = connect(mechanism="ANONYMOUS", user=None, password=None)
    # not offered: the client finds no common mechanism and gives up
    assert refused.engine.user is None
    assert not refused.connection.state & Endpoint.REMOTE_ACTIVE
    assert "ANONYMOUS" not in refused.engine._login.server.mechanisms


def test_without_sasl_where_allowed_uses_default_user(connect):
    pump = connect(mechanism=None, engine=dict(default_user="guest", allow_without_sasl=True))
    assert pump.engine.user.name == "guest"
    assert pump.connection.state & Endpoint.REMOTE_ACTIVE


@pytest.mark.parametrize("engine, named", [
    (dict(default_user="guest"), "allow_amqp10_without_sasl: true on the listener"),
    (dict(default_user=None, allow_without_sasl=True), "amqp10.default_user is not set"),
    (dict(default_user="ghost", allow_without_sasl=True), "amqp10.default_user names no user ('ghost')"),
])
def test_without_sasl_refused_gets_open_and_close_naming_the_setting(connect, engine, named):
    pump = connect(mechanism=None, engine=engine)
    assert pump.engine.closed and pump.engine.user is None
    assert pump.connection.state & Endpoint.REMOTE_CLOSED
    condition = _close_condition(pump)
    assert condition.name == "amqp:unauthorized-access"
    assert named in condition.description and "without SASL" in condition.description
    assert pump.engine.linger_on_close        # the client closes the socket next


def test_without_sasl_refused_before_the_peers_open_came(broker, authenticator):
    engine = Amqp10Engine(header=AMQP_HEADER, broker=broker, authenticator=authenticator,
                          peer_host="10.0.0.1", now=0.0, container_id="c", allow_anonymous=False,
                          anonymous_user=None, default_user="guest", default_vhost="/")
    out = engine.data_to_send()
    assert out.startswith(AMQP_HEADER) and not engine.closed   # our header and open
    assert engine.tick(0.0) == 10.0        # the close goes with the peer's open, or at the deadline
    engine.tick(10.0)
    engine.data_to_send()
    assert engine.closed and not engine.linger_on_close


def test_hostname_selects_vhost(connect):
    assert connect(hostname="vhost:other").engine.vhost.name == "other"
    assert connect(hostname="example.com").engine.vhost.name == "/"
    assert connect(hostname="example.com", engine=dict(default_vhost="other")).engine.vhost.name == "other"


def test_unknown_vhost_closes_with_not_found_naming_it(connect):
    pump = connect(hostname="vhost:nowhere")
    assert pump.engine.closed
    condition = _close_condition(pump)
    assert condition.name == "amqp:not-found"
    assert "nowhere" in condition.description


def test_limits_are_announced(connect):
    pump = connect(engine=dict(max_frame_size=4096, channel_max=3, idle_timeout=4.0))
    assert pump.transport.remote_max_frame_size == 4096
    assert pump.transport.remote_channel_max == 3
    assert pump.transport.remote_idle_timeout == 2.0  # proton asks for half


def test_silent_peer_is_closed_after_idle_timeout(connect):
    pump = connect(engine=dict(idle_timeout=4.0))
    engine = pump.engine
    engine.tick(1.0)
    assert engine.tick(3.9) is not None
    assert not engine.closed
    engine.tick(4.5)
    out = engine.data_to_send()
    assert engine.closed
    assert not engine.linger_on_close       # a silent peer's socket is closed at once
    pump.transport.push(out)
    pump.pump()
    assert _close_condition(pump).name == "amqp:resource-limit-exceeded"


def test_handshake_deadline(broker, authenticator):
    engine = Amqp10Engine(header=SASL_HEADER, broker=broker, authenticator=authenticator,
                          peer_host="10.0.0.1", now=100.0, container_id="c", allow_anonymous=False,
                          anonymous_user=None, default_user=None, default_vhost="/",
                          handshake_timeout=5.0)
    assert engine.data_to_send().startswith(SASL_HEADER)
    assert engine.tick(101.0) == 105.0
    assert not engine.closed
    engine.tick(105.0)
    assert engine.closed


def test_channel_above_channel_max_is_a_framing_error(connect):
    pump = connect(engine=dict(channel_max=1))
    pump.engine.receive_data(_frame(0x11, [None, uint(0), uint(100), uint(100)], channel=5))
    pump.transport.push(pump.engine.data_to_send())
    pump.pump()
    assert pump.engine.closed
    assert _close_condition(pump).name == "amqp:connection:framing-error"


@pytest.mark.parametrize("chunk", [
    b"\x00\x00\x00\x10\x02\x00\x00\x00garbage!",
    b"\x00\x00\x00\x0c\x02\x00\x00\x00\x00\x53\x99\x45",
])
def test_malformed_frame_closes_with_decode_error(connect, chunk):
    pump = connect()
    pump.engine.receive_data(chunk)
    pump.transport.push(pump.engine.data_to_send())
    pump.pump()
    assert pump.engine.closed
    assert _close_condition(pump).name == "amqp:decode-error"


def test_oversized_frame_closes_with_framing_error(connect):
    pump = connect(engine=dict(max_frame_size=1024))
    pump.engine.receive_data(b"\x00\x01\x00\x00\x02\x00\x00\x00" + b"\0" * 100)
    pump.transport.push(pump.engine.data_to_send())
    pump.pump()
    assert pump.engine.closed
    assert _close_condition(pump).name == "amqp:connection:framing-error"


def test_shutdown_closes_with_connection_forced(connect):
    pump = connect()
    pump.engine.shutdown("server shutting down")
    pump.pump()
    assert pump.engine.closed
    condition = _close_condition(pump)
    assert (condition.name, condition.description) == ("amqp:connection:forced", "server shutting down")


def test_internal_failure_closes_with_internal_error_and_never_raises(connect, monkeypatch):
    pump = connect()
    sender = pump.sender("/queue/q1")

    def boom(*args, **kwargs):
        raise RuntimeError("bug")

    monkeypatch.setattr("gateway.amqp10.incoming_link.container_from_summary", boom)
    pump.send(sender, encode_message("x"))
    assert pump.engine.closed
    assert _close_condition(pump).name == "amqp:internal-error"


def test_client_close_is_answered(connect):
    pump = connect()
    assert not pump.engine.linger_on_close
    pump.connection.close()
    pump.pump()
    assert pump.engine.closed
    assert pump.connection.state & Endpoint.REMOTE_CLOSED
    assert pump.engine.linger_on_close      # the client closes the socket next


def test_a_close_of_ours_leaves_closing_the_socket_to_the_peer(connect):
    pump = connect(hostname="vhost:nowhere")
    assert pump.engine.closed and pump.engine.linger_on_close


def test_eof_and_handshake_timeout_close_the_socket_at_once(connect, broker, authenticator):
    pump = connect()
    pump.engine.receive_eof()
    assert pump.engine.closed and not pump.engine.linger_on_close
    engine = Amqp10Engine(header=AMQP_HEADER, broker=broker, authenticator=authenticator,
                          peer_host="10.0.0.1", now=0.0, container_id="c", allow_anonymous=False,
                          anonymous_user=None, default_user="guest", default_vhost="/",
                          handshake_timeout=5.0, allow_without_sasl=True)
    engine.data_to_send()
    engine.tick(5.0)                        # no open came
    engine.data_to_send()
    assert engine.closed and not engine.linger_on_close


def test_eof_returns_unsettled_messages(connect, broker):
    queue = broker.vhost("/").queue("q1")
    pump = connect()
    sender = pump.sender("/queue/q1")
    for i in range(3):
        pump.send(sender, encode_message(i))
    receiver = pump.receiver("/queue/q1", credit=3)
    assert len(pump.take(receiver)) == 3
    assert queue.message_count == 0 and queue.acquired_count == 3
    pump.engine.receive_eof()
    assert pump.engine.closed
    assert queue.message_count == 3 and queue.acquired_count == 0


def test_delivery_caused_by_another_connection_calls_on_output(connect):
    consumer = connect()
    flushes = []
    consumer.engine.on_output = lambda: flushes.append(1)
    receiver = consumer.receiver("/queue/q1", credit=5)
    assert flushes == []  # output produced inside our own calls needs no nudge
    producer = connect()
    producer.send(producer.sender("/queue/q1"), encode_message("hi"))
    assert flushes
    consumer.pump()
    assert len(consumer.take(receiver)) == 1


def test_exclusive_temporary_queues_go_with_the_connection(connect, broker):
    pump = connect()
    receiver = pump.receiver(None, dynamic=True, credit=1)
    name = receiver.remote_source.address.rsplit("/", 1)[1]
    assert broker.vhost("/").queue(name) is not None
    pump.connection.close()
    pump.pump()
    assert broker.vhost("/").queue(name) is None


def test_connection_close_takes_temporary_queues_without_detaching_other_links(connect):
    pump = connect()
    owner = pump.receiver(None, dynamic=True, name="owner")
    other = pump.receiver(owner.remote_source.address, name="other", credit=1)
    pump.connection.close()
    pump.pump()
    assert other.remote_condition is None
    assert pump.connection.state & Endpoint.REMOTE_CLOSED


def test_one_data_to_send_carries_a_whole_large_delivery(connect):
    pump = connect()
    encoded = encode_message(b"x" * (4 * 1024 * 1024))
    pump.send(pump.sender("/queue/q1"), encoded)
    receiver = pump.receiver("/queue/q1")
    receiver.flow(1)
    pump.engine.receive_data(pump._client_output())
    assert len(pump.engine.data_to_send()) > len(encoded)
