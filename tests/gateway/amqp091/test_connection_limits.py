"""ServerConnection with the shared ConnectionRegistry and LoginThrottle, pumped in memory."""
from __future__ import annotations

from gateway.amqp091 import methods as m
from gateway.amqp091.connection import ConnectionState
from gateway.amqp091.spec import ReplyCode
from gateway.auth import ConnectionRegistry, LoginThrottle, UserLimits
from tests.support.frame_builder import ConnectionDriver, methods_of

T0 = 1000.0
CAPS = {"authentication_failure_close": True}


def test_per_user_connection_limit_is_530_after_open_and_released_on_close() -> None:
    registry = ConnectionRegistry(default_max_connections=1)
    first = ConnectionDriver(now=T0, connection_registry=registry)
    first.handshake()
    assert first.conn.state is ConnectionState.OPEN and registry.count("guest") == 1
    second = ConnectionDriver(now=T0, connection_registry=registry)
    close = methods_of(second.handshake())[-1]
    assert isinstance(close, m.ConnectionClose)
    assert close.reply_code == ReplyCode.NOT_ALLOWED
    assert close.reply_text == "NOT_ALLOWED - connection limit (1) for user 'guest' reached"
    assert (close.class_id, close.method_id) == (10, 40)  # connection.open
    assert registry.count("guest") == 1
    first.send(first.frames.method(0, m.ConnectionClose(reply_code=200, reply_text="bye")))
    assert first.conn.closed and registry.count("guest") == 0
    third = ConnectionDriver(now=T0, connection_registry=registry)
    third.handshake()
    assert third.conn.state is ConnectionState.OPEN
    third.conn.receive_eof()
    assert registry.count("guest") == 0


def test_user_max_channels_lowers_the_proposed_channel_max() -> None:
    registry = ConnectionRegistry(per_user={"guest": UserLimits(max_channels=3)})
    d = ConnectionDriver(now=T0, channel_max=2047, connection_registry=registry)
    d.received()
    (tune,) = methods_of(d.send(d.frames.start_ok()))
    assert isinstance(tune, m.ConnectionTune) and tune.channel_max == 3
    d.send(d.frames.tune_ok(channel_max=0) + d.frames.open())
    assert d.conn.tune.channel_max == 3
    assert isinstance(methods_of(d.open_channel(3))[0], m.ChannelOpenOk)
    close = methods_of(d.open_channel(4))[0]
    assert isinstance(close, m.ConnectionClose) and close.reply_code == ReplyCode.CHANNEL_ERROR


def test_refused_login_is_answered_late_once_the_address_failed_too_often() -> None:
    throttle = LoginThrottle(max_failures=2, window=60.0, base_delay=1.5, max_delay=10.0)
    first = ConnectionDriver(now=T0, login_throttle=throttle)
    first.received()
    out = first.send(first.frames.start_ok(password="wrong", capabilities=CAPS))
    assert methods_of(out)[0].reply_code == ReplyCode.ACCESS_REFUSED  # not delayed yet
    second = ConnectionDriver(now=T0 + 1, login_throttle=throttle)
    second.received()
    assert second.send(second.frames.start_ok(password="wrong", capabilities=CAPS)) == []
    assert second.conn.tick(T0 + 1) == T0 + 2.5
    # input while waiting is ignored (no 503 that would answer early)
    assert second.send(second.frames.tune_ok()) == []
    assert second.conn.tick(T0 + 2.4) == T0 + 2.5 and second.received() == []
    second.conn.tick(T0 + 2.5)
    (close,) = methods_of(second.received())
    assert close.reply_code == ReplyCode.ACCESS_REFUSED
    assert "Login was refused" in close.reply_text


def test_held_refusal_without_failure_close_capability_just_closes() -> None:
    throttle = LoginThrottle(max_failures=1, window=60.0, base_delay=20.0, max_delay=20.0)
    d = ConnectionDriver(now=T0, login_throttle=throttle, handshake_timeout=5.0)
    d.received()
    d.send(d.frames.start_ok(password="wrong", capabilities={}))
    assert not d.conn.closed
    d.conn.tick(T0 + 10)  # past the handshake timeout: still held, not cut
    assert not d.conn.closed
    d.conn.tick(T0 + 20)
    assert d.conn.closed and d.received() == []


def test_successful_login_forgets_the_failures() -> None:
    throttle = LoginThrottle(max_failures=2, window=60.0, base_delay=1.0, max_delay=1.0)
    bad = ConnectionDriver(now=T0, login_throttle=throttle)
    bad.received()
    bad.send(bad.frames.start_ok(password="wrong", capabilities=CAPS))
    assert throttle.failures_in_window("127.0.0.1", T0) == 1
    good = ConnectionDriver(now=T0, login_throttle=throttle)
    good.handshake()
    assert throttle.failures_in_window("127.0.0.1", T0) == 0
