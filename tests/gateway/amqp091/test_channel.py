"""BrokerChannel: declares, bindings, deletes and every error path with its reply code."""
from __future__ import annotations

import pytest

from gateway.amqp091 import methods as m
from gateway.amqp091.channel import BrokerChannel
from gateway.amqp091.spec import ReplyCode
from tests.support.broker_channel_driver import BrokerClient, deliveries, make_broker
from translators.basic_properties import BasicProperties


@pytest.fixture
def broker():
    return make_broker()


@pytest.fixture
def client(broker):
    c = BrokerClient(broker)
    c.open(1)
    return c


def only(methods, kind):
    assert len(methods) == 1 and isinstance(methods[0], kind), methods
    return methods[0]


def channel_close(methods, code: ReplyCode) -> m.Method:
    close = only(methods, m.ChannelClose)
    assert close.reply_code == code, close
    return close


def connection_close(methods, code: ReplyCode) -> m.Method:
    close = [x for x in methods if isinstance(x, m.ConnectionClose)]
    assert close and close[0].reply_code == code, methods
    return close[0]


# ---- declares -------------------------------------------------------------------------------

def test_queue_declare_ok_counts_messages_and_consumers(client):
    only(client.declare(1, "q1"), m.QueueDeclareOk)
    client.publish(1, "", "q1", b"a")
    client.publish(1, "", "q1", b"b")
    ok = only(client.declare(1, "q1", passive=True), m.QueueDeclareOk)
    assert (ok.queue, ok.message_count, ok.consumer_count) == ("q1", 2, 0)


def test_server_named_queue(client):
    ok = only(client.declare(1, ""), m.QueueDeclareOk)
    assert ok.queue.startswith("amq.gen-") and len(ok.queue) == len("amq.gen-") + 22


def test_nowait_declare_sends_nothing(client, broker):
    assert client.declare(1, "q-nowait", nowait=True) == []
    assert broker.vhost("/").queue("q-nowait") is not None


def test_passive_declare_of_missing_queue_is_404_naming_it(client):
    close = channel_close(client.declare(1, "nope", passive=True), ReplyCode.NOT_FOUND)
    assert close.reply_text == "NOT_FOUND - no queue 'nope' in vhost '/'"
    assert (close.class_id, close.method_id) == (50, 10)


def test_passive_exchange_declare_of_missing_exchange_is_404(client):
    close = channel_close(client.call(1, m.ExchangeDeclare(exchange="nox", passive=True)), ReplyCode.NOT_FOUND)
    assert "no exchange 'nox'" in close.reply_text


def test_unknown_exchange_type_is_503_connection_error(client):
    connection_close(client.call(1, m.ExchangeDeclare(exchange="x", type="bogus")), ReplyCode.COMMAND_INVALID)


def test_reserved_exchange_name_is_403(client):
    close = channel_close(client.call(1, m.ExchangeDeclare(exchange="amq.mine", type="direct")),
                          ReplyCode.ACCESS_REFUSED)
    assert close.reply_text.startswith("ACCESS_REFUSED - ")


def test_inequivalent_redeclare_is_406(client):
    only(client.call(1, m.ExchangeDeclare(exchange="x1", type="direct")), m.ExchangeDeclareOk)
    channel_close(client.call(1, m.ExchangeDeclare(exchange="x1", type="fanout")), ReplyCode.PRECONDITION_FAILED)


def test_queue_redeclare_with_other_ttl_is_406(client):
    client.declare(1, "qa", arguments={"x-message-ttl": 100})
    channel_close(client.declare(1, "qa", arguments={"x-message-ttl": 200}), ReplyCode.PRECONDITION_FAILED)


def test_invalid_queue_argument_is_406(client):
    channel_close(client.declare(1, "qb", arguments={"x-max-length": "lots"}), ReplyCode.PRECONDITION_FAILED)


def test_other_connections_exclusive_queue_is_405(broker, client):
    client.declare(1, "mine", exclusive=True)
    other = BrokerClient(broker)
    other.open(1)
    close = channel_close(other.declare(1, "mine", passive=True), ReplyCode.RESOURCE_LOCKED)
    assert "mine" in close.reply_text
    other.open(2)
    channel_close(other.call(2, m.BasicConsume(queue="mine")), ReplyCode.RESOURCE_LOCKED)


def test_exclusive_queue_is_deleted_when_its_connection_closes(broker, client):
    client.declare(1, "gone-with-conn", exclusive=True)
    client.call(0, m.ConnectionClose(reply_code=200, reply_text="bye"))
    assert client.conn.closed
    assert broker.vhost("/").queue("gone-with-conn") is None


def test_exclusive_queue_survives_channel_close(broker, client):
    client.declare(1, "kept", exclusive=True)
    client.call(1, m.ChannelClose(reply_code=200, reply_text="bye"))
    assert broker.vhost("/").queue("kept") is not None


# ---- bindings ---------------------------------------------------------------------------

def test_bind_routes_and_unbind_stops_routing(client, broker):
    client.declare(1, "qd")
    only(client.call(1, m.QueueBind(queue="qd", exchange="amq.direct", routing_key="k")), m.QueueBindOk)
    client.publish(1, "amq.direct", "k")
    assert broker.vhost("/").queue("qd").message_count == 1
    only(client.call(1, m.QueueUnbind(queue="qd", exchange="amq.direct", routing_key="k")), m.QueueUnbindOk)
    client.publish(1, "amq.direct", "k")
    assert broker.vhost("/").queue("qd").message_count == 1


def test_bind_to_missing_exchange_or_queue_is_404(client):
    client.declare(1, "qe")
    channel_close(client.call(1, m.QueueBind(queue="qe", exchange="missing")), ReplyCode.NOT_FOUND)
    client.open(2)
    channel_close(client.call(2, m.QueueBind(queue="missing", exchange="amq.direct")), ReplyCode.NOT_FOUND)


def test_bind_to_default_exchange_is_403(client):
    client.declare(1, "qf")
    channel_close(client.call(1, m.QueueBind(queue="qf", exchange="")), ReplyCode.ACCESS_REFUSED)


def test_empty_queue_name_means_last_declared_and_empty_key_means_its_name(client, broker):
    client.declare(1, "last-one")
    only(client.call(1, m.QueueBind(queue="", exchange="amq.direct", routing_key="")), m.QueueBindOk)
    client.publish(1, "amq.direct", "last-one")
    assert broker.vhost("/").queue("last-one").message_count == 1


def test_empty_queue_name_without_declare_is_404(client):
    close = channel_close(client.call(1, m.BasicGet(queue="")), ReplyCode.NOT_FOUND)
    assert "no previously declared queue" in close.reply_text


def test_exchange_to_exchange_binding(client, broker):
    client.call(1, m.ExchangeDeclare(exchange="src", type="fanout"))
    client.call(1, m.ExchangeDeclare(exchange="dst", type="direct"))
    client.declare(1, "qx")
    client.call(1, m.QueueBind(queue="qx", exchange="dst", routing_key="rk"))
    only(client.call(1, m.ExchangeBind(destination="dst", source="src")), m.ExchangeBindOk)
    client.publish(1, "src", "rk")
    assert broker.vhost("/").queue("qx").message_count == 1
    only(client.call(1, m.ExchangeUnbind(destination="dst", source="src")), m.ExchangeUnbindOk)
    client.publish(1, "src", "rk")
    assert broker.vhost("/").queue("qx").message_count == 1


# ---- deletes and purge ---------------------------------------------------------------------

def test_purge_and_delete_report_counts(client):
    client.declare(1, "qp")
    for _ in range(3):
        client.publish(1, "", "qp")
    assert only(client.call(1, m.QueuePurge(queue="qp")), m.QueuePurgeOk).message_count == 3
    client.publish(1, "", "qp")
    assert only(client.call(1, m.QueueDelete(queue="qp")), m.QueueDeleteOk).message_count == 1


def test_purge_missing_queue_is_404(client):
    channel_close(client.call(1, m.QueuePurge(queue="nope")), ReplyCode.NOT_FOUND)


def test_delete_if_empty_and_if_unused_are_406(client):
    client.declare(1, "qie")
    client.publish(1, "", "qie")
    channel_close(client.call(1, m.QueueDelete(queue="qie", if_empty=True)), ReplyCode.PRECONDITION_FAILED)
    client.open(2)
    client.call(2, m.BasicConsume(queue="qie"))
    client.open(3)
    channel_close(client.call(3, m.QueueDelete(queue="qie", if_unused=True)), ReplyCode.PRECONDITION_FAILED)


def test_exchange_delete_if_unused_and_predeclared(client):
    client.call(1, m.ExchangeDeclare(exchange="xu", type="direct"))
    client.declare(1, "qxu")
    client.call(1, m.QueueBind(queue="qxu", exchange="xu"))
    channel_close(client.call(1, m.ExchangeDelete(exchange="xu", if_unused=True)), ReplyCode.PRECONDITION_FAILED)
    client.open(2)
    channel_close(client.call(2, m.ExchangeDelete(exchange="amq.direct")), ReplyCode.ACCESS_REFUSED)
    client.open(3)
    only(client.call(3, m.ExchangeDelete(exchange="xu")), m.ExchangeDeleteOk)


def test_queue_delete_cancels_consumers_with_notification(client):
    client.declare(1, "qc")
    ok = only(client.call(1, m.BasicConsume(queue="qc", consumer_tag="c1")), m.BasicConsumeOk)
    assert ok.consumer_tag == "c1"
    client.open(2)
    out = client.call(2, m.QueueDelete(queue="qc"))
    cancel = [x for x in out if isinstance(x, m.BasicCancel)]
    assert cancel and cancel[0].consumer_tag == "c1" and cancel[0].nowait
    assert isinstance(out[-1], m.QueueDeleteOk)


def test_no_cancel_notification_without_the_capability(broker):
    client = BrokerClient(broker, capabilities={})
    client.open(1)
    client.declare(1, "qnc")
    client.call(1, m.BasicConsume(queue="qnc"))
    out = client.call(1, m.QueueDelete(queue="qnc"))
    assert [type(x) for x in out] == [m.QueueDeleteOk]


# ---- permissions, publish-time validation --------------------------------------------------

def test_permission_refusals_are_403(broker):
    bob = BrokerClient(broker, user="bob")
    bob.open(1)
    only(bob.declare(1, "bob.q"), m.QueueDeclareOk)
    close = channel_close(bob.declare(1, "alice.q"), ReplyCode.ACCESS_REFUSED)
    assert close.reply_text == ("ACCESS_REFUSED - configure access to resource 'alice.q' in vhost '/' "
                                "refused for user 'bob'")
    bob.open(2)
    channel_close(bob.publish(2, "amq.fanout", "k"), ReplyCode.ACCESS_REFUSED)
    bob.open(3)
    assert bob.publish(3, "", "bob.q") == []


def test_unknown_exchange_on_publish_is_404(client):
    close = channel_close(client.publish(1, "no-such-x", "k"), ReplyCode.NOT_FOUND)
    assert (close.class_id, close.method_id) == (60, 40)


def test_publish_to_internal_exchange_is_403(client):
    client.call(1, m.ExchangeDeclare(exchange="inner", type="fanout", internal=True))
    channel_close(client.publish(1, "inner", ""), ReplyCode.ACCESS_REFUSED)


def test_immediate_is_540_connection_error(client):
    connection_close(client.publish(1, "", "q", immediate=True), ReplyCode.NOT_IMPLEMENTED)


@pytest.mark.parametrize("expiration", ["-1", "1.5", "soon", " 10", "99999999999"])
def test_invalid_expiration_is_406(client, expiration):
    close = channel_close(client.publish(1, "", "q", properties=BasicProperties(expiration=expiration)),
                          ReplyCode.PRECONDITION_FAILED)
    assert "invalid expiration" in close.reply_text


def test_user_id_of_another_user_is_406(client):
    channel_close(client.publish(1, "", "q", properties=BasicProperties(user_id="mallory")),
                  ReplyCode.PRECONDITION_FAILED)
    client.open(2)
    assert client.publish(2, "", "q", properties=BasicProperties(user_id="guest")) == []


def test_reused_consumer_tag_is_530(client):
    client.declare(1, "qt")
    client.call(1, m.BasicConsume(queue="qt", consumer_tag="same"))
    connection_close(client.call(1, m.BasicConsume(queue="qt", consumer_tag="same")), ReplyCode.NOT_ALLOWED)


def test_exclusive_consumer_conflict_is_403(client):
    client.declare(1, "qxc")
    client.call(1, m.BasicConsume(queue="qxc", exclusive=True))
    client.open(2)
    close = channel_close(client.call(2, m.BasicConsume(queue="qxc")), ReplyCode.ACCESS_REFUSED)
    assert "in exclusive use" in close.reply_text


def test_consume_missing_queue_is_404(client):
    channel_close(client.call(1, m.BasicConsume(queue="ghost")), ReplyCode.NOT_FOUND)


def test_factory_builds_broker_channels(broker):
    c = BrokerClient(broker)
    c.open(5)
    handler = c.conn.channel_handlers()[5]
    assert isinstance(handler, BrokerChannel) and handler.channel_id == 5


def test_get_reports_remaining_count_and_get_empty(client):
    client.declare(1, "qg")
    client.publish(1, "", "qg", b"one")
    client.publish(1, "", "qg", b"two")
    got = deliveries(client.send(client.frames.method(1, m.BasicGet(queue="qg", no_ack=True))))
    assert got[0][0].message_count == 1 and got[0][2] == b"one"
    client.call(1, m.BasicGet(queue="qg", no_ack=True))
    only(client.call(1, m.BasicGet(queue="qg")), m.BasicGetEmpty)


# ---- the error table -------------------------------------------------------------------------

def test_every_broker_error_kind_has_a_reply_code_of_the_right_level():
    from gateway.amqp091.error_map import REPLY_CODES, amqp_error
    from gateway.amqp091.errors import ChannelException, ConnectionException
    from gateway.broker import errors as be

    assert set(REPLY_CODES) == set(be.ErrorKind)
    hard = {be.CommandInvalid: 503, be.NotAllowed: 530, be.FeatureNotImplemented: 540}
    soft = {be.NotFound: 404, be.AccessRefused: 403, be.ResourceLocked: 405, be.PreconditionFailed: 406,
            be.InvalidArgument: 406, be.ResourceLimitExceeded: 406}
    method = m.QueueDeclare(queue="q")
    for cls, code in hard.items():
        exc = amqp_error(cls("why"), method)
        assert isinstance(exc, ConnectionException) and exc.code == code
        assert (exc.class_id, exc.method_id) == (50, 10)
    for cls, code in soft.items():
        exc = amqp_error(cls("why"), method)
        assert isinstance(exc, ChannelException) and exc.code == code
        assert exc.reply_text == f"{exc.code.name} - why"


def test_shutdown_sends_320_and_requeues_unacked(broker):
    c = BrokerClient(broker, connection_id=7)
    c.open(1)
    c.declare(1, "durable-ish")
    c.publish(1, "", "durable-ish")
    c.call(1, m.BasicConsume(queue="durable-ish"))
    assert c.conn.connection_id == 7
    c.conn.shutdown("gateway shutting down")
    close = connection_close(methods_of_frames(c.received()), ReplyCode.CONNECTION_FORCED)
    assert close.reply_text == "CONNECTION_FORCED - gateway shutting down"
    queue = broker.vhost("/").queue("durable-ish")
    assert queue.message_count == 1 and queue.acquired_count == 0


def methods_of_frames(frames):
    from tests.support.frame_builder import methods_of

    return methods_of(frames)
