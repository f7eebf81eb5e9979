"""ServerConnection with the shared ConnectionRegistry and LoginThrottle, pumped in memory."""
from __future__ import annotations

from gateway.amqp091 import methods as m
from gateway.amqp091.connection import ConnectionState
from gateway.amqp091.spec import ReplyCode
from gateway.auth import ConnectionRegistry, LoginThrottle, UserLimits
from tests.support.frame_builder import ConnectionDriver, make_authenticator, methods_of

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
    throttle = LoginThrottle(max_failures=1, window=60.0, base_delay=4.0, max_delay=4.0)
    d = ConnectionDriver(now=T0, login_throttle=throttle, handshake_timeout=5.0)
    d.received()
    d.send(d.frames.start_ok(password="wrong", capabilities={}))
    assert not d.conn.closed
    assert d.conn.tick(T0 + 3) == T0 + 4
    d.conn.tick(T0 + 4)
    assert d.conn.closed and d.received() == [] and d.conn.timed_out is None


def test_a_held_refusal_goes_out_at_the_handshake_deadline_at_the_latest() -> None:
    """A 20 s delay with a 5 s handshake: the answer is sent (and the socket closed) at the
    deadline, while the address's slot stays held for the full 20 s."""
    throttle = LoginThrottle(max_failures=1, window=60.0, base_delay=20.0, max_delay=20.0)
    d = ConnectionDriver(now=T0, login_throttle=throttle, handshake_timeout=5.0)
    d.received()
    d.conn.now = T0 + 1
    assert d.send(d.frames.start_ok(password="wrong", capabilities=CAPS)) == []
    assert d.conn.tick(T0 + 1) == T0 + 5
    d.conn.tick(T0 + 5)
    (close,) = methods_of(d.received())
    assert close.reply_code == ReplyCode.ACCESS_REFUSED and d.conn.timed_out is None
    assert throttle.pending("127.0.0.1", T0 + 20.9) == 1 and throttle.pending("127.0.0.1", T0 + 21) == 0


def test_successful_login_keeps_every_count() -> None:
    throttle = LoginThrottle(max_failures=2, window=60.0, base_delay=1.0, max_delay=1.0)
    bad = ConnectionDriver(now=T0, login_throttle=throttle)
    bad.received()
    bad.send(bad.frames.start_ok(password="wrong", capabilities=CAPS))
    assert throttle.failures("127.0.0.1", T0) == 1 and throttle.user_failures("guest", T0) == 1
    good = ConnectionDriver(now=T0, login_throttle=throttle)
    good.handshake()
    assert throttle.failures("127.0.0.1", T0) == 1 and throttle.user_failures("guest", T0) == 1
    again = ConnectionDriver(now=T0, login_throttle=throttle)
    again.received()
    assert again.send(again.frames.start_ok(password="wrong", capabilities=CAPS)) == []  # held


def test_a_user_past_its_limit_is_refused_unchecked_until_its_next_check(caplog) -> None:
    throttle = LoginThrottle(max_failures=1, window=60.0, base_delay=5.0, max_delay=5.0)
    for _ in range(2):  # the first failure, then the one check due after it
        held = ConnectionDriver(now=T0, login_throttle=throttle)
        held.received()
        assert held.send(held.frames.start_ok(password="wrong", capabilities=CAPS)) == []
    caplog.set_level("WARNING")
    checks = []
    auth = make_authenticator()
    real = auth.check_password
    auth.check_password = lambda name, pw: checks.append(name) or real(name, pw)
    over = ConnectionDriver(now=T0 + 1, login_throttle=throttle, authenticator=auth, peer_port=4242)
    over.received()
    (close,) = methods_of(over.send(over.frames.start_ok(password="guest", capabilities=CAPS)))
    assert close.reply_code == ReplyCode.ACCESS_REFUSED
    assert "too many failed logins for user 'guest'; try again in 4s" in close.reply_text
    assert checks == []                          # the (right) password was never checked
    assert throttle.user_failures("guest", T0 + 1) == 2   # and it is not a failure either
    assert [r.getMessage() for r in caplog.records if "throttled" in r.getMessage()] == [
        "login throttled: login of user 'guest' from 127.0.0.1:4242 refused unchecked: 2 failed "
        "logins in its name in the window; its next check in 4s"]
    later = ConnectionDriver(now=T0 + 5, login_throttle=throttle)
    later.handshake()                            # its next check: checked, and right
    assert later.conn.state is ConnectionState.OPEN


def test_each_refusal_is_logged_once_naming_user_and_peer(caplog) -> None:
    caplog.set_level("INFO")
    throttle = LoginThrottle(max_failures=1, window=60.0, base_delay=2.0, max_delay=2.0)
    d = ConnectionDriver(now=T0, login_throttle=throttle, peer_port=5555)
    d.received()
    d.send(d.frames.start_ok(user="mallory", password="wrong", capabilities=CAPS))
    d.conn.tick(T0 + 2)
    lines = [r.getMessage() for r in caplog.records if "mallory" in r.getMessage()
             or "refused" in r.getMessage()]
    assert lines == ["login refused: user 'mallory' from 127.0.0.1:5555 (AMQP 0-9-1, PLAIN): "
                     "invalid credentials; answer held 2.0s; failures in the window: 1 from the "
                     "address, 1 for the user"]


def test_handshake_timeout_is_recorded_with_its_phase() -> None:
    d = ConnectionDriver(now=T0, handshake_timeout=5.0)
    d.received()
    d.conn.tick(T0 + 5)
    assert d.conn.closed
    assert (d.conn.timed_out.phase, d.conn.timed_out.seconds) == ("0-9-1 start-ok", 5.0)
    tuned = ConnectionDriver(now=T0, handshake_timeout=5.0)
    tuned.received()
    tuned.send(tuned.frames.start_ok())
    tuned.conn.tick(T0 + 5)
    assert tuned.conn.timed_out.phase == "0-9-1 tune-ok"
