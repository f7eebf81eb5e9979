"""Permissions, per-user/per-connection limits and login throttling in the 1.0 engine."""
from __future__ import annotations

import pytest
from proton import Delivery, Endpoint

from gateway.auth import (
    Authenticator,
    ConnectionRegistry,
    LoginThrottle,
    Permission,
    User,
    UserDirectory,
    UserLimits,
    hash_password,
)
from tests.support.amqp10_pump import Amqp10Pump, encode_message, engine_factory

# bob may configure "bob.*", write to "amq.topic"/"bob.*", read "bob.*"/"amq.topic"
BOB = Permission(configure=r"bob\..*|amq\.gen-.*", write=r"amq\.topic|bob\..*|amq\.gen-.*",
                 read=r"bob\..*|amq\.topic")


@pytest.fixture(scope="module")
def directory() -> UserDirectory:
    password = hash_password("pw")
    return UserDirectory([
        User("bob", password, permissions={"/": BOB}),
        User("nobody", password, permissions={"/": Permission("", "", "")}),
        User("stranger", password, permissions={"other": Permission(".*", ".*", ".*")}),
        User("root", password, permissions={"/": Permission(".*", ".*", ".*")}),
    ])


@pytest.fixture()
def vhost(broker):
    v = broker.vhost("/")
    v.declare_queue("bob.q")
    return v


def _pump(broker, directory, user="bob", *, password="pw", now=0.0, **engine) -> Amqp10Pump:
    pump = Amqp10Pump(engine_factory(broker, Authenticator(directory), now=now, **engine),
                      user=user, password=password, now=now)
    return pump.open()


def _refused(link) -> str:
    assert link.state & Endpoint.REMOTE_CLOSED
    condition = link.remote_condition
    assert condition.name == "amqp:unauthorized-access"
    return condition.description


# ------------------------------------------------------------------ permissions

def test_receiving_from_a_queue_needs_read(broker, directory, vhost):
    pump = _pump(broker, directory)
    ok = pump.receiver("/queue/bob.q", name="ok")
    assert ok.state & Endpoint.REMOTE_ACTIVE
    text = _refused(pump.receiver("/queue/q1", name="no"))
    assert text == "read access to resource 'q1' in vhost '/' refused for user 'bob'"


def test_sending_to_a_queue_needs_write_on_the_default_exchange(broker, directory, vhost):
    pump = _pump(broker, directory)
    text = _refused(pump.sender("/queue/bob.q"))
    assert "write access to resource 'amq.default'" in text and "user 'bob'" in text
    root = _pump(broker, directory, user="root")
    assert root.sender("/queue/bob.q").state & Endpoint.REMOTE_ACTIVE


def test_sending_to_an_exchange_needs_write_on_it(broker, directory, vhost):
    pump = _pump(broker, directory)
    assert pump.sender("/topic/x", name="topic").state & Endpoint.REMOTE_ACTIVE
    text = _refused(pump.sender("/exchange/amq.direct/rk", name="direct"))
    assert text.startswith("write access to resource 'amq.direct'")


def test_anonymous_relay_is_checked_per_message(broker, directory, vhost):
    pump = _pump(broker, directory)
    relay = pump.sender(None)
    assert relay.state & Endpoint.REMOTE_ACTIVE
    allowed = pump.send(relay, encode_message("x", address="/topic/a"))
    assert allowed.remote_state == Delivery.ACCEPTED  # unroutable: accepted and dropped
    refused = pump.send(relay, encode_message("x", address="/exchange/amq.direct/k"))
    assert refused.remote_state == Delivery.REJECTED
    assert refused.remote.condition.name == "amqp:unauthorized-access"
    assert "'amq.direct'" in refused.remote.condition.description
    assert relay.state & Endpoint.REMOTE_ACTIVE  # the link stays up


def test_exchange_source_needs_read_on_the_exchange(broker, directory, vhost):
    pump = _pump(broker, directory)
    ok = pump.receiver("/topic/a.b", name="ok")
    assert ok.state & Endpoint.REMOTE_ACTIVE
    text = _refused(pump.receiver("/exchange/amq.fanout/k", name="no"))
    assert text.startswith("read access to resource 'amq.fanout'")


def test_temporary_queue_needs_configure_and_write(broker, directory, vhost):
    strict = UserDirectory([User("eve", hash_password("pw"), permissions={
        "/": Permission(configure=r"amq\.gen-.*", write="", read=".*")})])
    before = set(vhost.queues)
    pump = _pump(broker, strict, user="eve")
    text = _refused(pump.receiver("/topic/a.b"))
    assert text.startswith("write access to resource 'amq.gen-")
    assert set(vhost.queues) == before  # the refused temporary queue is gone again


def test_dynamic_source_needs_configure(broker, directory, vhost):
    nobody = _pump(broker, directory, user="nobody")
    text = _refused(nobody.receiver(None, dynamic=True))
    assert text.startswith("configure access to resource 'amq.gen-")
    bob = _pump(broker, directory)
    assert bob.receiver(None, dynamic=True).state & Endpoint.REMOTE_ACTIVE


def test_open_on_a_vhost_without_permissions_is_refused(broker, directory, vhost):
    pump = _pump(broker, directory, user="stranger")
    condition = pump.connection.remote_condition
    assert condition.name == "amqp:unauthorized-access"
    assert condition.description == "access to vhost '/' refused for user 'stranger'"
    assert pump.engine.closed


# ------------------------------------------------------------------ limits

def test_per_user_connection_limit_and_release(broker, directory, vhost):
    registry = ConnectionRegistry(per_user={"bob": UserLimits(max_connections=1)})
    first = _pump(broker, directory, connection_registry=registry)
    assert first.connection.state & Endpoint.REMOTE_ACTIVE and registry.count("bob") == 1
    second = _pump(broker, directory, connection_registry=registry)
    condition = second.connection.remote_condition
    assert condition.name == "amqp:resource-limit-exceeded"
    assert condition.description == "connection limit (1) for user 'bob' reached"
    assert registry.count("bob") == 1
    first.connection.close()
    first.pump()
    assert registry.count("bob") == 0
    third = _pump(broker, directory, connection_registry=registry)
    assert third.connection.state & Endpoint.REMOTE_ACTIVE
    third.engine.receive_eof()
    assert registry.count("bob") == 0


def test_user_max_channels_lowers_channel_max(broker, directory, vhost):
    registry = ConnectionRegistry(per_user={"bob": UserLimits(max_channels=2)})
    pump = _pump(broker, directory, connection_registry=registry)
    assert pump.transport.remote_channel_max == 1
    root = _pump(broker, directory, user="root", connection_registry=registry, channel_max=9)
    assert root.transport.remote_channel_max == 9


def test_links_per_connection_limit(broker, directory, vhost):
    pump = _pump(broker, directory, max_links=2)
    session = pump.session()
    assert pump.receiver("/queue/bob.q", name="a", session=session).state & Endpoint.REMOTE_ACTIVE
    assert pump.sender("/topic/t", name="b", session=session).state & Endpoint.REMOTE_ACTIVE
    third = pump.receiver("/queue/bob.q", name="c", session=session)
    assert third.remote_condition.name == "amqp:resource-limit-exceeded"
    assert third.remote_condition.description == "link limit (2) per connection reached"
    assert pump.connection.state & Endpoint.REMOTE_ACTIVE


# ------------------------------------------------------------------ login throttling

def test_failed_logins_are_answered_late_after_the_threshold(broker, directory, vhost):
    throttle = LoginThrottle(max_failures=2, window=60.0, base_delay=1.5, max_delay=10.0)
    first = _pump(broker, directory, password="wrong", login_throttle=throttle, now=10.0)
    assert first.engine.closed and first.transport.sasl().outcome == 1
    second = _pump(broker, directory, password="wrong", login_throttle=throttle, now=11.0)
    engine = second.engine
    assert not engine.closed and second.transport.sasl().outcome is None
    assert engine.tick(11.0) == pytest.approx(12.5)
    second.now = 12.4
    second.pump()
    assert not engine.closed
    second.now = 12.5
    second.pump()
    assert engine.closed and second.transport.sasl().outcome == 1


def test_a_held_answer_goes_out_at_the_handshake_deadline_at_the_latest(broker, directory, vhost):
    throttle = LoginThrottle(max_failures=1, window=60.0, base_delay=20.0, max_delay=20.0)
    pump = _pump(broker, directory, password="wrong", login_throttle=throttle, handshake_timeout=5.0)
    assert pump.engine.tick(0.0) == 5.0
    pump.now = 4.9
    pump.pump()
    assert not pump.engine.closed
    pump.now = 5.0
    pump.pump()
    assert pump.engine.closed and pump.transport.sasl().outcome == 1
    assert pump.engine.timed_out is None
    assert throttle.pending("127.0.0.1", 19.9) == 1   # the slot: the full 20 s


def test_successful_login_keeps_every_count(broker, directory, vhost):
    throttle = LoginThrottle(max_failures=2, window=60.0, base_delay=1.0, max_delay=1.0)
    _pump(broker, directory, password="wrong", login_throttle=throttle)
    assert throttle.failures("127.0.0.1", 0.0) == 1 and throttle.user_failures("bob", 0.0) == 1
    ok = _pump(broker, directory, login_throttle=throttle)
    assert ok.connection.state & Endpoint.REMOTE_ACTIVE
    assert throttle.failures("127.0.0.1", 0.0) == 1 and throttle.user_failures("bob", 0.0) == 1
    held = _pump(broker, directory, user="root", password="wrong", login_throttle=throttle)
    assert not held.engine.closed and held.transport.sasl().outcome is None


def test_a_user_past_its_limit_gets_sys_temp_unchecked(broker, directory, vhost):
    throttle = LoginThrottle(max_failures=1, window=60.0, base_delay=5.0, max_delay=5.0)
    for _ in range(2):  # the first failure, then the one check due after it
        held = _pump(broker, directory, password="wrong", login_throttle=throttle)
        assert held.transport.sasl().outcome is None
    over = _pump(broker, directory, password="pw", login_throttle=throttle, now=1.0)
    assert over.engine.closed and over.transport.sasl().outcome == 4   # sys-temp
    assert throttle.user_failures("bob", 1.0) == 2                    # not counted
    later = _pump(broker, directory, password="pw", login_throttle=throttle, now=5.0)
    assert later.connection.state & Endpoint.REMOTE_ACTIVE


def test_a_refusal_is_logged_once_naming_user_and_peer(broker, directory, vhost, caplog):
    caplog.set_level("INFO")
    throttle = LoginThrottle(max_failures=3, window=60.0, base_delay=1.0, max_delay=1.0)
    _pump(broker, directory, user="mallory", password="wrong", login_throttle=throttle,
          peer_port=6000)
    lines = [r.getMessage() for r in caplog.records if "mallory" in r.getMessage()
             or "refused" in r.getMessage() or "SASL" in r.getMessage()]
    assert lines == ["login refused: user 'mallory' from 127.0.0.1:6000 (AMQP 1.0, PLAIN): "
                     "invalid credentials; answered at once; failures in the window: 1 from the "
                     "address, 1 for the user"]


@pytest.mark.parametrize("login,phase", [(False, "1.0 SASL init"), (True, "1.0 open")])
def test_handshake_timeout_is_recorded_with_its_phase(broker, directory, vhost, login, phase):
    pump = Amqp10Pump(engine_factory(broker, Authenticator(directory), handshake_timeout=5.0),
                      user="bob", password="pw" if login else None,
                      mechanism="PLAIN" if login else "EXTERNAL")
    if login:
        pump.pump()      # SASL only: proton opens the connection when open() is called
    else:
        pump.transport.sasl()
        pump.pump()
    pump.now = 5.0
    pump.pump()
    assert pump.engine.closed
    assert (pump.engine.timed_out.phase, pump.engine.timed_out.seconds) == (phase, 5.0)
