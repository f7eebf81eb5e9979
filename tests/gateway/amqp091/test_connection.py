"""ServerConnection: handshake, wire rules, channels, closing and heartbeats, pumped in memory."""
from __future__ import annotations

import pytest

from gateway.amqp091 import methods as m
from gateway.amqp091.connection import ConnectionState
from gateway.amqp091.handshake import SERVER_CAPABILITIES
from gateway.amqp091.errors import ChannelException, ConnectionException
from gateway.amqp091.frames import HEARTBEAT_FRAME, HeartbeatFrame, MethodFrame
from gateway.amqp091.handlers import CloseInitiator
from gateway.amqp091.spec import ReplyCode
from gateway.product import product_properties
from translators.basic_properties import BasicProperties
from gateway.auth import Authenticator, Permission, User, UserDirectory, hash_password
from tests.support.frame_builder import ConnectionDriver, methods_of, parse_frames

T0 = 1000.0


@pytest.fixture
def driver() -> ConnectionDriver:
    d = ConnectionDriver(now=T0)
    d.handshake()
    assert d.conn.state is ConnectionState.OPEN
    return d


def only_close(frames) -> m.Method:
    methods = methods_of(frames)
    assert len(methods) == 1 and isinstance(methods[0], m.ConnectionClose), methods
    return methods[0]


# ---- handshake ---------------------------------------------------------------------------

def test_start_is_sent_first_with_server_properties() -> None:
    d = ConnectionDriver()
    (start,) = methods_of(d.received())
    assert isinstance(start, m.ConnectionStart)
    assert (start.version_major, start.version_minor) == (0, 9)
    props = start.server_properties
    for key in ("product", "version", "platform", "copyright", "information"):
        assert isinstance(props[key], str)
    assert {key: props[key] for key in ("product", "version", "platform")} == product_properties()
    assert props["capabilities"] == SERVER_CAPABILITIES
    assert props["capabilities"]["direct_reply_to"] is False
    assert b"PLAIN" in start.mechanisms.split()
    assert start.locales == b"en_US"


def test_full_handshake_sequence() -> None:
    d = ConnectionDriver()
    names = [meth.NAME for meth in methods_of(d.handshake(heartbeat=30))]
    assert names == ["connection.start", "connection.tune", "connection.open-ok"]
    assert d.conn.tune.heartbeat == 30
    assert d.conn.user.name == "guest"
    assert d.conn.vhost == "vhost:/"


def test_server_extras_in_start() -> None:
    d = ConnectionDriver(server_properties={"cluster_name": "gw1"})
    (start,) = methods_of(d.received())
    assert start.server_properties["cluster_name"] == "gw1"


def test_amqplain_login() -> None:
    from gateway.amqp091.values import encode_table

    d = ConnectionDriver()
    d.received()
    response = encode_table({"LOGIN": "guest", "PASSWORD": "guest"})[4:]
    out = d.send(d.frames.method(0, m.ConnectionStartOk(
        client_properties={}, mechanism="AMQPLAIN", response=response, locale="en_US")))
    assert isinstance(methods_of(out)[0], m.ConnectionTune)


class _OfferScram:
    """A listener that names SCRAM-SHA-256 for 0-9-1 explicitly (it is not offered by default)."""

    def __init__(self, auth):
        self._auth = auth

    def mechanisms(self, **kw):
        return self._auth.mechanisms(offered=["SCRAM-SHA-256", "PLAIN"], **kw)

    def start(self, mechanism, **kw):
        return self._auth.start(mechanism, offered=["SCRAM-SHA-256", "PLAIN"], **kw)


def test_scram_not_offered_to_091_by_default() -> None:
    d = ConnectionDriver()
    (start,) = methods_of(d.received())
    assert b"SCRAM" not in start.mechanisms


def test_scram_runs_secure_rounds() -> None:
    import scramp

    from tests.support.frame_builder import make_authenticator

    d = ConnectionDriver(authenticator=_OfferScram(make_authenticator()))
    d.received()
    client = scramp.ScramClient(["SCRAM-SHA-256"], "guest", "guest")
    out = d.send(d.frames.method(0, m.ConnectionStartOk(
        client_properties={}, mechanism="SCRAM-SHA-256", response=client.get_client_first().encode())))
    (secure,) = methods_of(out)
    assert isinstance(secure, m.ConnectionSecure)
    assert d.conn.state is ConnectionState.AWAIT_SECURE_OK
    client.set_server_first(secure.challenge.decode())
    out = d.send(d.frames.method(0, m.ConnectionSecureOk(response=client.get_client_final().encode())))
    assert isinstance(methods_of(out)[0], m.ConnectionTune)


def test_bad_password_with_authentication_failure_close_sends_403() -> None:
    d = ConnectionDriver()
    d.received()
    close = only_close(d.send(d.frames.start_ok(password="wrong")))
    assert close.reply_code == ReplyCode.ACCESS_REFUSED
    assert close.reply_text.startswith("ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN")
    assert d.conn.state is ConnectionState.CLOSING and d.conn.login_failed
    d.send(d.frames.method(0, m.ConnectionCloseOk()))
    assert d.conn.closed


def test_bad_password_without_the_capability_just_closes() -> None:
    d = ConnectionDriver()
    d.received()
    assert d.send(d.frames.start_ok(password="wrong", capabilities={})) == []
    assert d.conn.closed


def test_unknown_mechanism_is_refused_like_bad_credentials() -> None:
    d = ConnectionDriver()
    d.received()
    close = only_close(d.send(d.frames.start_ok(mechanism="KERBEROS")))
    assert close.reply_code == ReplyCode.ACCESS_REFUSED


def test_refused_login_times_out_waiting_for_close_ok() -> None:
    d = ConnectionDriver(now=T0, close_timeout=3.0)
    d.received()
    d.send(d.frames.start_ok(password="wrong"))
    deadline = d.conn.tick(T0)
    assert deadline == T0 + 3.0
    d.conn.tick(T0 + 3.0)
    assert d.conn.closed


def test_unknown_vhost_is_530_naming_it() -> None:
    d = ConnectionDriver()
    d.received()
    d.send(d.frames.start_ok() + d.frames.tune_ok())
    close = only_close(d.send(d.frames.open("nope")))
    assert close.reply_code == ReplyCode.NOT_ALLOWED
    assert "vhost 'nope' not found" in close.reply_text
    assert (close.class_id, close.method_id) == (10, 40)


def test_vhost_access_refused_is_530() -> None:
    d = ConnectionDriver()
    d.received()
    d.send(d.frames.start_ok(user="nobody") + d.frames.tune_ok())
    close = only_close(d.send(d.frames.open("/")))
    assert close.reply_code == ReplyCode.NOT_ALLOWED
    assert "access to vhost '/' refused for user 'nobody'" in close.reply_text


def test_tune_ok_raising_frame_max_closes_without_close_method() -> None:
    d = ConnectionDriver(frame_max=131072)
    d.received()
    d.send(d.frames.start_ok())
    assert d.send(d.frames.tune_ok(frame_max=262144)) == []
    assert d.conn.closed


@pytest.mark.parametrize("early", [
    m.ConnectionTuneOk(), m.ConnectionOpen(), m.ConnectionClose(), m.ConnectionStart()])
def test_handshake_out_of_order_closes_the_socket_silently(early) -> None:
    d = ConnectionDriver()
    d.received()
    assert d.send(d.frames.method(0, early)) == []
    assert d.conn.closed


def test_channel_frame_before_open_closes_silently() -> None:
    d = ConnectionDriver()
    d.received()
    d.send(d.frames.start_ok() + d.frames.tune_ok())
    assert d.send(d.frames.method(1, m.ChannelOpen())) == []
    assert d.conn.closed


def test_handshake_timeout() -> None:
    d = ConnectionDriver(now=T0, handshake_timeout=10.0)
    assert d.conn.tick(T0 + 1) == T0 + 10.0
    d.conn.tick(T0 + 10.0)
    assert d.conn.closed


def test_no_handshake_timeout_once_open(driver) -> None:
    driver.conn.tick(T0 + 11)
    assert not driver.conn.closed


# ---- wire rules once open -----------------------------------------------------------------

def test_heartbeat_on_a_channel_is_501(driver) -> None:
    close = only_close(driver.send(driver.frames.heartbeat(channel=1)))
    assert close.reply_code == ReplyCode.FRAME_ERROR


def test_content_on_channel_zero_is_504(driver) -> None:
    close = only_close(driver.send(driver.frames.body(0, b"x")))
    assert close.reply_code == ReplyCode.CHANNEL_ERROR


def test_connection_method_on_a_channel_is_503(driver) -> None:
    driver.open_channel(1)
    close = only_close(driver.send(driver.frames.method(1, m.ConnectionOpen())))
    assert close.reply_code == ReplyCode.COMMAND_INVALID


def test_channel_method_on_channel_zero_is_503(driver) -> None:
    close = only_close(driver.send(driver.frames.method(0, m.BasicQos())))
    assert close.reply_code == ReplyCode.COMMAND_INVALID


def test_method_not_allowed_in_state_is_503(driver) -> None:
    close = only_close(driver.send(driver.frames.method(0, m.ConnectionTuneOk())))
    assert close.reply_code == ReplyCode.COMMAND_INVALID
    assert "connection.tune-ok" in close.reply_text


def test_server_only_method_from_client_is_503(driver) -> None:
    driver.open_channel(1)
    close = only_close(driver.send(driver.frames.method(1, m.BasicGetEmpty())))
    assert close.reply_code == ReplyCode.COMMAND_INVALID


def test_frame_on_unopened_channel_is_504(driver) -> None:
    close = only_close(driver.send(driver.frames.method(3, m.BasicQos())))
    assert close.reply_code == ReplyCode.CHANNEL_ERROR
    assert "channel.open" in close.reply_text


def test_reopening_an_open_channel_is_504(driver) -> None:
    driver.open_channel(1)
    close = only_close(driver.open_channel(1))
    assert close.reply_code == ReplyCode.CHANNEL_ERROR


def test_channel_above_channel_max_is_504() -> None:
    d = ConnectionDriver(channel_max=2)
    d.received()
    d.send(d.frames.start_ok())
    d.send(d.frames.tune_ok(channel_max=2) + d.frames.open())
    assert isinstance(methods_of(d.open_channel(2))[0], m.ChannelOpenOk)
    close = only_close(d.open_channel(3))
    assert close.reply_code == ReplyCode.CHANNEL_ERROR


def test_refused_class_is_540_naming_it(driver) -> None:
    import struct
    payload = struct.pack(">HH", 70, 10)
    close = only_close(driver.send(driver.frames.raw(1, 1, payload)))
    assert close.reply_code == ReplyCode.NOT_IMPLEMENTED
    assert "file" in close.reply_text


def test_bad_frame_end_closes_without_close_method(driver) -> None:
    assert driver.send(driver.frames.raw(1, 0, m.ConnectionCloseOk().encode(), end=0)) == []
    assert driver.conn.closed


def test_undecodable_method_with_a_bad_frame_end_is_the_frame_end_error(driver) -> None:
    import struct

    driver.open_channel(1)
    undecodable = struct.pack(">HH", 999, 10)  # no class 999
    frame = driver.frames.raw(1, 1, undecodable, end=0x00)
    assert driver.send(frame[:-1]) == []  # payload complete, end octet missing: nothing yet
    assert not driver.conn.closed
    # spec 4.2.3: fatal, close without sending anything (not the 503 that decoding gives)
    assert driver.send(frame[-1:]) == []
    assert driver.conn.closed
    (reason,) = driver.handlers[1].closed_reasons
    assert reason.initiator is CloseInitiator.TRANSPORT and reason.code == ReplyCode.FRAME_ERROR
    assert "frame-end" in reason.text


def test_undecodable_method_with_a_good_frame_end_is_503(driver) -> None:
    import struct

    close = only_close(driver.send(driver.frames.raw(1, 1, struct.pack(">HH", 999, 10))))
    assert close.reply_code == ReplyCode.COMMAND_INVALID


def test_unknown_frame_type_closes_without_close_method(driver) -> None:
    assert driver.send(driver.frames.raw(4, 0, b"")) == []
    assert driver.conn.closed


def test_oversized_frame_is_501(driver) -> None:
    close = only_close(driver.send(driver.frames.raw(3, 1, b"x" * 131072)))
    assert close.reply_code == ReplyCode.FRAME_ERROR


def test_body_without_header_is_505(driver) -> None:
    driver.open_channel(1)
    close = only_close(driver.send(driver.frames.method(1, m.BasicPublish()) + driver.frames.body(1, b"x")))
    assert close.reply_code == ReplyCode.UNEXPECTED_FRAME


def test_method_inside_content_is_505(driver) -> None:
    driver.open_channel(1)
    data = (driver.frames.method(1, m.BasicPublish()) + driver.frames.header(1, 60, 4)
            + driver.frames.method(1, m.BasicQos()))
    close = only_close(driver.send(data))
    assert close.reply_code == ReplyCode.UNEXPECTED_FRAME


def test_other_channels_may_interleave_with_a_content(driver) -> None:
    driver.open_channel(1)
    driver.open_channel(2)
    data = (driver.frames.method(1, m.BasicPublish(routing_key="a")) + driver.frames.header(1, 60, 2)
            + driver.frames.method(2, m.BasicQos(prefetch_count=1)) + driver.frames.body(1, b"ok"))
    assert driver.send(data) == []
    (publish, content), = driver.handlers[1].handled
    assert publish.routing_key == "a" and content.body == b"ok"
    assert driver.handlers[2].handled[0][0] == m.BasicQos(prefetch_count=1)


def test_publish_reaches_the_handler_with_properties(driver) -> None:
    driver.open_channel(1)
    props = BasicProperties(content_type="text/plain", delivery_mode=2)
    driver.send(driver.frames.content(1, m.BasicPublish(routing_key="q"), b"x" * 10000, props, frame_max=4096))
    (method, content), = driver.handlers[1].handled
    assert content.properties == props and len(content.body) == 10000


def test_message_above_max_size_closes_the_channel_with_406() -> None:
    d = ConnectionDriver(max_message_size=10)
    d.handshake()
    d.open_channel(1)
    out = d.send(d.frames.content(1, m.BasicPublish(), b"x" * 11))
    (close,) = methods_of(out)
    assert isinstance(close, m.ChannelClose) and close.reply_code == ReplyCode.PRECONDITION_FAILED
    assert "message size 11 is larger than configured max size 10" in close.reply_text
    assert not d.conn.closed  # the body frame after the header was dropped quietly


def test_access_request_gets_ticket_one(driver) -> None:
    driver.open_channel(1)
    (ok,) = methods_of(driver.send(driver.frames.method(1, m.AccessRequest())))
    assert ok == m.AccessRequestOk(ticket=1)


def test_update_secret_with_the_right_password_is_answered_and_re_reads_the_user() -> None:
    guest = User("guest", hash_password("guest", iterations=4096),
                 permissions={"/": Permission(".*", ".*", ".*")})
    authenticator = Authenticator(UserDirectory([guest]))   # its own: the users change
    d = ConnectionDriver(now=T0, authenticator=authenticator)
    d.handshake()
    d.open_channel(1)
    before = d.conn.user
    rotated = User("guest", hash_password("rotated", iterations=4096),
                   permissions={"/": Permission("", "", "")})
    authenticator.users.replace([rotated])
    out = d.send(d.frames.method(0, m.ConnectionUpdateSecret(new_secret=b"rotated", reason="token")))
    assert methods_of(out) == [m.ConnectionUpdateSecretOk()]
    assert d.conn.state is ConnectionState.OPEN
    assert before is guest and d.conn.user is rotated      # permissions re-read
    assert d.handlers[1].user_changes == 1                  # and the channels told


@pytest.mark.parametrize("secret", [b"wrong", b"\xff"])
def test_update_secret_with_a_wrong_secret_closes_with_403_naming_the_user(driver, secret) -> None:
    close = only_close(driver.send(driver.frames.method(
        0, m.ConnectionUpdateSecret(new_secret=secret, reason="rotation"))))
    assert close.reply_code == ReplyCode.ACCESS_REFUSED
    assert "New secret was refused for user 'guest'" in close.reply_text
    assert (close.class_id, close.method_id) == (10, 70)
    assert driver.conn.state is ConnectionState.CLOSING


def test_update_secret_before_open_is_503() -> None:
    d = ConnectionDriver(now=T0)
    d.received()
    d.send(d.frames.start_ok())
    assert d.send(d.frames.method(0, m.ConnectionUpdateSecret(new_secret=b"guest"))) == []
    assert d.conn.closed   # before connection.open: closed without a close method


# ---- channels and handlers ----------------------------------------------------------------

def test_channel_open_close_handshake(driver) -> None:
    (ok,) = methods_of(driver.open_channel(1))
    assert isinstance(ok, m.ChannelOpenOk)
    out = driver.send(driver.frames.method(1, m.ChannelClose(reply_code=200, reply_text="bye")))
    assert out == [MethodFrame(1, m.ChannelCloseOk())]
    (reason,) = driver.handlers[1].closed_reasons
    assert (reason.initiator, reason.code, reason.text) == (CloseInitiator.PEER, 200, "bye")
    assert isinstance(methods_of(driver.open_channel(1))[0], m.ChannelOpenOk)  # number reusable


def test_channel_exception_closes_only_that_channel(driver) -> None:
    driver.open_channel(1)
    handler = driver.handlers[1]
    handler.raise_on[m.QueueDeclare] = ChannelException(ReplyCode.NOT_FOUND, "no queue 'q' in vhost '/'", 50, 10)
    (close,) = methods_of(driver.send(driver.frames.method(1, m.QueueDeclare(queue="q", passive=True))))
    assert close == m.ChannelClose(reply_code=404, reply_text="NOT_FOUND - no queue 'q' in vhost '/'",
                                   class_id=50, method_id=10)
    assert handler.closed_reasons[0].initiator is CloseInitiator.LOCAL
    # until close-ok every other frame on the channel is dropped
    assert driver.send(driver.frames.method(1, m.BasicQos())) == []
    assert driver.send(driver.frames.content(1, m.BasicPublish(), b"abc")) == []
    assert len(handler.handled) == 1
    assert driver.send(driver.frames.method(1, m.ChannelCloseOk())) == []
    assert isinstance(methods_of(driver.open_channel(1))[0], m.ChannelOpenOk)
    assert not driver.conn.closed


def test_simultaneous_channel_close(driver) -> None:
    driver.open_channel(1)
    driver.handlers[1].writer.close(ReplyCode.PRECONDITION_FAILED, "unknown delivery tag 5", 60, 80)
    (close,) = methods_of(driver.received())
    assert isinstance(close, m.ChannelClose)
    out = driver.send(driver.frames.method(1, m.ChannelClose(reply_code=200)))
    assert out == [MethodFrame(1, m.ChannelCloseOk())]
    driver.send(driver.frames.method(1, m.ChannelCloseOk()))
    assert isinstance(methods_of(driver.open_channel(1))[0], m.ChannelOpenOk)


def test_unsolicited_channel_close_ok_is_503(driver) -> None:
    driver.open_channel(1)
    close = only_close(driver.send(driver.frames.method(1, m.ChannelCloseOk())))
    assert close.reply_code == ReplyCode.COMMAND_INVALID


def test_handler_connection_exception_closes_the_connection(driver) -> None:
    driver.open_channel(1)
    driver.handlers[1].raise_on[m.TxSelect] = ConnectionException(ReplyCode.RESOURCE_ERROR, "out of memory", 90, 10)
    close = only_close(driver.send(driver.frames.method(1, m.TxSelect())))
    assert (close.reply_code, close.class_id, close.method_id) == (506, 90, 10)
    assert driver.conn.state is ConnectionState.CLOSING
    assert driver.handlers[1].closed_reasons[0].code == 506


def test_unexpected_handler_error_is_541(driver, caplog) -> None:
    driver.open_channel(1)
    driver.handlers[1].raise_on[m.BasicQos] = KeyError("boom")
    close = only_close(driver.send(driver.frames.method(1, m.BasicQos())))
    assert close.reply_code == ReplyCode.INTERNAL_ERROR
    assert "internal error" in caplog.text


def test_writer_sends_methods_and_content(driver) -> None:
    driver.open_channel(1)
    writer = driver.handlers[1].writer
    deliver = m.BasicDeliver(consumer_tag="c", delivery_tag=1, exchange="", routing_key="q")
    assert writer.send_content(deliver, b"\x00\x00", b"y" * 300_000)
    frames = driver.received()
    assert frames[0] == MethodFrame(1, deliver)
    assert sum(len(f.payload) for f in frames[2:]) == 300_000
    assert all(len(f.payload) <= 131072 - 8 for f in frames[2:])


def test_writer_drops_frames_after_the_channel_closed(driver) -> None:
    driver.open_channel(1)
    writer = driver.handlers[1].writer
    driver.send(driver.frames.method(1, m.ChannelClose()))
    assert writer.send_method(m.BasicAck(delivery_tag=1)) is False
    assert driver.received() == []


def test_blocked_and_unblocked(driver) -> None:
    driver.open_channel(1)
    context = driver.handlers[1].context
    context.block_publishers("low on memory")
    context.block_publishers("again")  # only once
    assert methods_of(driver.received()) == [m.ConnectionBlocked(reason="low on memory")]
    context.unblock_publishers()
    assert methods_of(driver.received()) == [m.ConnectionUnblocked()]


def test_blocked_not_sent_without_the_client_capability() -> None:
    d = ConnectionDriver()
    d.handshake(capabilities={})
    d.conn.block_publishers("disk")
    assert d.received() == [] and d.conn.blocked


def publish_frames(driver, channel: int = 1) -> bytes:
    return driver.frames.content(channel, m.BasicPublish(routing_key="q"), b"body")


def test_publish_while_blocked_is_held_with_what_follows(driver) -> None:
    driver.open_channel(1)
    driver.conn.block_publishers("memory")
    driver.received()
    handler = driver.handlers[1]
    assert driver.send(driver.frames.method(1, m.BasicQos(prefetch_count=1))) == []
    assert len(handler.handled) == 1 and driver.conn.wants_input  # no publish yet: read on
    driver.send(publish_frames(driver) + driver.frames.method(1, m.BasicQos(prefetch_count=2)))
    assert len(handler.handled) == 1 and not driver.conn.wants_input
    driver.conn.tick(T0 + 1)  # still blocked: nothing is replayed
    assert len(handler.handled) == 1 and not driver.conn.wants_input
    driver.conn.unblock_publishers()
    driver.conn.tick(T0 + 2)
    assert [type(h[0]) for h in handler.handled] == [m.BasicQos, m.BasicPublish, m.BasicQos]
    assert driver.conn.wants_input


def test_unblock_without_the_capability_still_wakes_the_edge() -> None:
    calls = []
    d = ConnectionDriver(on_output=lambda: calls.append(1))
    d.handshake(capabilities={})
    d.open_channel(1)
    d.conn.block_publishers("memory")
    d.send(publish_frames(d))
    calls.clear()
    d.conn.unblock_publishers()
    assert d.received() == [] and calls == [1]  # no connection.unblocked, but a flush
    d.conn.tick(T0 + 1)
    assert len(d.handlers[1].handled) == 1 and d.conn.wants_input


def test_held_connection_pauses_the_missed_heartbeat_check(driver) -> None:
    conn = driver.conn
    driver.open_channel(1)
    conn.block_publishers("memory")
    driver.send(publish_frames(driver))
    conn.tick(T0)  # the last traffic either way was at T0
    deadline = conn.tick(T0 + 200)  # far beyond two silent intervals: we are not reading
    assert not conn.closed
    assert HeartbeatFrame(0) in driver.received()  # our own heartbeats go on
    assert deadline == T0 + 260  # only the next heartbeat to send, no past rx deadline
    conn.unblock_publishers()
    conn.tick(T0 + 300)  # replayed: the monitor restarts from now
    assert not conn.closed and len(driver.handlers[1].handled) == 1
    conn.tick(T0 + 419)
    assert not conn.closed
    conn.tick(T0 + 420)
    assert conn.closed


def test_server_close_releases_held_input_so_close_ok_can_be_read(driver) -> None:
    driver.open_channel(1)
    driver.conn.block_publishers("memory")
    driver.send(publish_frames(driver))
    assert not driver.conn.wants_input
    driver.conn.close(ReplyCode.CONNECTION_FORCED, "shutdown")
    only_close(driver.received())
    driver.conn.tick(T0 + 1)
    assert driver.conn.wants_input and driver.handlers[1].handled == []  # discarded while closing
    driver.send(driver.frames.method(0, m.ConnectionCloseOk()))
    assert driver.conn.closed


# ---- closing ------------------------------------------------------------------------------

def test_client_close(driver) -> None:
    driver.open_channel(1)
    out = driver.send(driver.frames.method(0, m.ConnectionClose(reply_code=200, reply_text="bye")))
    assert out == [MethodFrame(0, m.ConnectionCloseOk())]
    assert driver.conn.closed
    assert driver.handlers[1].closed_reasons[0].initiator is CloseInitiator.PEER


def test_after_close_ok_the_client_closes_the_socket(driver) -> None:
    """close-ok sent: the edge leaves closing the socket to the client (RabbitMQ's way),
    and publishes the client had queued behind its close are not answered."""
    driver.open_channel(1)
    assert not driver.conn.linger_on_close
    out = driver.send(driver.frames.method(0, m.ConnectionClose(reply_code=200))
                      + driver.frames.content(1, m.BasicPublish(routing_key="q"), b"late"))
    assert out == [MethodFrame(0, m.ConnectionCloseOk())]
    assert driver.conn.closed and driver.conn.linger_on_close
    assert driver.send(driver.frames.content(1, m.BasicPublish(routing_key="q"), b"later")) == []
    assert driver.handlers[1].handled == []


def test_closes_without_a_close_ok_of_ours_close_the_socket_at_once(driver) -> None:
    driver.conn.close(ReplyCode.CONNECTION_FORCED, "shutdown")
    driver.send(driver.frames.method(0, m.ConnectionCloseOk()))
    assert driver.conn.closed and not driver.conn.linger_on_close
    eof = ConnectionDriver(now=T0)
    eof.handshake()
    eof.conn.receive_eof()
    assert eof.conn.closed and not eof.conn.linger_on_close


def test_server_close_waits_for_close_ok_and_discards_the_rest(driver) -> None:
    driver.open_channel(1)
    driver.conn.close(ReplyCode.CONNECTION_FORCED, "shutdown")
    close = only_close(driver.received())
    assert close.reply_code == 320
    assert driver.send(driver.frames.method(1, m.BasicQos()) + driver.frames.content(1, m.BasicPublish(), b"x")) == []
    assert driver.handlers[1].handled == []
    driver.send(driver.frames.method(0, m.ConnectionCloseOk()))
    assert driver.conn.closed


def test_simultaneous_connection_close(driver) -> None:
    driver.conn.close()
    only_close(driver.received())
    out = driver.send(driver.frames.method(0, m.ConnectionClose(reply_code=200)))
    assert out == [MethodFrame(0, m.ConnectionCloseOk())]
    assert driver.conn.closed


def test_eof_closes_and_notifies_channels(driver) -> None:
    driver.open_channel(1)
    driver.conn.receive_eof()
    assert driver.conn.closed
    assert driver.handlers[1].closed_reasons[0].initiator is CloseInitiator.TRANSPORT


def test_input_after_close_is_ignored(driver) -> None:
    driver.send(driver.frames.method(0, m.ConnectionClose()))
    assert driver.send(driver.frames.method(0, m.ConnectionClose())) == []


# ---- heartbeats ---------------------------------------------------------------------------

def test_heartbeat_sent_after_an_idle_interval(driver) -> None:
    conn = driver.conn
    conn.tick(T0)  # samples the handshake traffic
    assert conn.data_to_send() == b""
    conn.receive_data(driver.frames.heartbeat())
    assert conn.tick(T0 + 59) == T0 + 60
    assert conn.data_to_send() == b""
    conn.tick(T0 + 60)
    assert conn.data_to_send() == HEARTBEAT_FRAME


def test_outgoing_traffic_postpones_the_heartbeat(driver) -> None:
    conn = driver.conn
    conn.tick(T0)
    driver.open_channel(1)
    conn.tick(T0 + 30)  # the open-ok counts as proof of life
    conn.receive_data(driver.frames.heartbeat())
    conn.tick(T0 + 60)
    assert conn.data_to_send() == b""
    conn.tick(T0 + 90)
    assert conn.data_to_send() == HEARTBEAT_FRAME


def test_silent_peer_is_dropped_after_two_intervals(driver) -> None:
    conn = driver.conn
    driver.open_channel(1)
    conn.tick(T0)
    conn.tick(T0 + 60)
    assert not conn.closed
    conn.receive_data(driver.frames.heartbeat())
    conn.tick(T0 + 100)  # activity seen at 100
    conn.tick(T0 + 219)
    assert not conn.closed
    conn.tick(T0 + 220)  # two 60 s intervals of silence
    assert conn.closed
    assert set(parse_frames(conn.data_to_send())) <= {HeartbeatFrame(0)}  # no close method
    assert driver.handlers[1].closed_reasons[0].initiator is CloseInitiator.TRANSPORT


def test_heartbeat_zero_disables_timers() -> None:
    d = ConnectionDriver(now=T0)
    d.handshake(heartbeat=0)
    assert d.conn.tick(T0 + 10_000) is None
    assert not d.conn.closed


# ---- engine surface -----------------------------------------------------------------------

def test_backpressure_via_wants_input() -> None:
    d = ConnectionDriver(output_high_water=1000)
    d.handshake()
    d.open_channel(1)
    assert d.conn.wants_input
    d.handlers[1].writer.send_content(m.BasicDeliver(), b"\x00\x00", b"z" * 2000)
    assert not d.conn.wants_input
    d.conn.data_to_send()
    assert d.conn.wants_input


def test_on_output_is_called_when_the_buffer_fills() -> None:
    calls = []
    d = ConnectionDriver(on_output=lambda: calls.append(1))
    assert calls == [1]  # connection.start
    d.handshake()
    calls.clear()
    d.conn.close()  # output outside receive_data, e.g. from a broker callback
    d.conn.close()
    assert calls == [1]


def test_fed_byte_by_byte() -> None:
    d = ConnectionDriver()
    d.received()
    data = d.frames.start_ok() + d.frames.tune_ok() + d.frames.open() + d.frames.method(1, m.ChannelOpen())
    for i in range(len(data)):
        d.conn.receive_data(data[i:i + 1])
    names = [meth.NAME for meth in methods_of(d.received())]
    assert names == ["connection.tune", "connection.open-ok", "channel.open-ok"]


def test_frames_before_a_framing_error_are_still_processed(driver) -> None:
    data = driver.frames.method(1, m.ChannelOpen()) + driver.frames.raw(4, 0, b"")
    out = driver.send(data)
    assert out == [MethodFrame(1, m.ChannelOpenOk())]
    assert driver.conn.closed


def _documented_transitions() -> dict[tuple[str, str], set[str]]:
    """The state table of ``connection_state``'s docstring: (state, event) -> next states."""
    from gateway.amqp091 import connection_state

    lines = connection_state.__doc__.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:3] == ["state", "event", "->"])
    table: dict[tuple[str, str], set[str]] = {}
    for line in lines[start + 1:]:
        if not line.strip():
            break
        left, right = line.split("->")
        state, method = left.split()
        nexts = right.split("(")[0].strip()
        table[(state, method)] = set() if nexts == "-" else {s.strip() for s in nexts.split("|")}
    return table


def test_the_transition_table_is_the_documented_one() -> None:
    from gateway.amqp091.connection_state import TRANSITIONS, LocalEvent

    assert _documented_transitions() == {
        (state.name, event.name if isinstance(event, LocalEvent) else event.NAME): {s.name for s in next_states}
        for (state, event), next_states in TRANSITIONS.items()
    }

