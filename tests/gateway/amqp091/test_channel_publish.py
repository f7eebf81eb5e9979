"""BrokerChannel publishing: confirms, mandatory returns, transactions, memory alarms."""
from __future__ import annotations

import pytest

from gateway.amqp091 import methods as m
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


def test_confirms_ack_each_publish_in_sequence(client):
    client.declare(1, "q")
    assert client.call(1, m.ConfirmSelect()) == [m.ConfirmSelectOk()]
    acks = [client.publish(1, "", "q")[0] for _ in range(3)]
    assert acks == [m.BasicAck(delivery_tag=i, multiple=False) for i in (1, 2, 3)]


def test_unroutable_publish_is_still_acked(client):
    client.call(1, m.ConfirmSelect())
    assert client.publish(1, "amq.direct", "nowhere") == [m.BasicAck(delivery_tag=1, multiple=False)]


def test_reject_publish_overflow_is_nacked(client):
    client.declare(1, "small", arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    client.call(1, m.ConfirmSelect(nowait=True))
    assert client.publish(1, "", "small") == [m.BasicAck(delivery_tag=1, multiple=False)]
    assert client.publish(1, "", "small") == [m.BasicNack(delivery_tag=2, multiple=False, requeue=False)]


def test_mandatory_unroutable_is_returned_with_312_then_acked(client):
    client.call(1, m.ConfirmSelect())
    frames = client.publish_frames(1, "amq.direct", "nowhere", b"body", BasicProperties(message_id="m"),
                                   mandatory=True)
    (ret, props, body), = deliveries(frames)
    assert (ret.reply_code, ret.reply_text, ret.exchange, ret.routing_key) == (
        ReplyCode.NO_ROUTE, "NO_ROUTE", "amq.direct", "nowhere")
    assert props.message_id == "m" and body == b"body"
    assert frames[-1].method == m.BasicAck(delivery_tag=1, multiple=False)


def test_mandatory_routed_is_not_returned(client):
    client.declare(1, "q")
    assert client.publish(1, "", "q", mandatory=True) == []


def test_tx_holds_publishes_until_commit(client, broker):
    client.declare(1, "q")
    assert client.call(1, m.TxSelect()) == [m.TxSelectOk()]
    client.publish(1, "", "q")
    client.publish(1, "", "q")
    queue = broker.vhost("/").queue("q")
    assert queue.message_count == 0
    assert client.call(1, m.TxCommit()) == [m.TxCommitOk()]
    assert queue.message_count == 2


def test_tx_rollback_discards_publishes_and_restores_acks(client, broker):
    client.declare(1, "q")
    client.publish(1, "", "q", b"a")
    client.call(1, m.BasicConsume(queue="q"))
    client.call(1, m.TxSelect())
    client.publish(1, "", "q", b"b")
    client.call(1, m.BasicAck(delivery_tag=1))
    assert client.call(1, m.TxRollback()) == [m.TxRollbackOk()]
    queue = broker.vhost("/").queue("q")
    assert queue.message_count == 0 and queue.acquired_count == 1
    client.call(1, m.BasicAck(delivery_tag=1))
    client.call(1, m.TxCommit())
    assert queue.acquired_count == 0


def test_tx_publish_to_missing_exchange_fails_at_publish(client):
    client.call(1, m.TxSelect())
    close = client.publish(1, "missing", "k")[0]
    assert isinstance(close, m.ChannelClose) and close.reply_code == ReplyCode.NOT_FOUND


def test_tx_mandatory_return_happens_at_commit(client):
    client.call(1, m.TxSelect())
    assert client.publish(1, "amq.direct", "none", mandatory=True) == []
    out = client.call(1, m.TxCommit())
    assert isinstance(out[0], m.BasicReturn) and out[-1] == m.TxCommitOk()


@pytest.mark.parametrize("method", [m.TxCommit(), m.TxRollback()])
def test_commit_or_rollback_without_select_is_406(client, method):
    close = client.call(1, method)[0]
    assert close.reply_code == ReplyCode.PRECONDITION_FAILED
    assert close.reply_text == "PRECONDITION_FAILED - channel is not transactional"


def test_confirm_and_tx_do_not_mix(client):
    client.call(1, m.TxSelect())
    assert client.call(1, m.ConfirmSelect())[0].reply_code == ReplyCode.PRECONDITION_FAILED
    client.open(2)
    client.call(2, m.ConfirmSelect())
    assert client.call(2, m.TxSelect())[0].reply_code == ReplyCode.PRECONDITION_FAILED


def test_memory_alarm_blocks_and_unblocks_publishers(broker, client):
    broker.set_memory_high_watermark(100)
    client.declare(1, "q")
    out = client.publish(1, "", "q", b"x" * 200)
    assert isinstance(out[0], m.ConnectionBlocked) and "memory high watermark" in out[0].reason
    out = client.call(1, m.QueuePurge(queue="q"))
    assert m.ConnectionUnblocked() in out


def test_blocked_listener_is_removed_when_the_connection_closes(broker, client):
    assert len(broker.gate._listeners) == 1
    client.call(0, m.ConnectionClose(reply_code=200, reply_text="bye"))
    assert broker.gate._listeners == []


def test_already_blocked_broker_blocks_new_connection_at_first_channel(broker):
    broker.set_memory_high_watermark(10)
    c = BrokerClient(broker)
    c.open(1)
    c.declare(1, "q")
    c.publish(1, "", "q", b"y" * 50)
    fresh = BrokerClient(broker)
    assert isinstance(fresh.open(1)[0], m.ConnectionBlocked)


def test_expiration_sets_message_ttl(client, broker):
    client.declare(1, "q")
    client.publish(1, "", "q", properties=BasicProperties(expiration="1000", priority=3, delivery_mode=2))
    entry = broker.vhost("/").queue("q")._head(1000.0)
    message = entry.message
    assert (message.ttl_ms, message.priority, message.durable) == (1000, 3, True)
    assert broker.vhost("/").queue("q").expire(1002.0) == 1
