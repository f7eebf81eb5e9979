"""BrokerChannel publishing: confirms, mandatory returns, transactions, memory alarms."""
from __future__ import annotations

import pytest

from gateway.amqp091 import methods as m
from gateway.amqp091.frames import MethodFrame
from gateway.amqp091.spec import ReplyCode
from gateway.amqp091.transactions import ConfirmTracker
from tests.support.broker_channel_driver import BrokerClient, deliveries, make_broker
from tests.support.frame_builder import methods_of
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


def _unroutable(broker) -> tuple[int, int]:
    counts = broker.unroutable
    assert (counts.dropped_amqp10, counts.returned_amqp10) == (0, 0)
    return counts.dropped_amqp091, counts.returned_amqp091


def test_unroutable_publishes_are_counted_dropped_or_returned(client, broker):
    client.declare(1, "q")
    client.publish(1, "", "q")
    client.publish(1, "", "q", mandatory=True)
    assert _unroutable(broker) == (0, 0)  # routed: not counted
    client.publish(1, "amq.direct", "nowhere")
    client.publish(1, "", "no-such-queue")
    assert _unroutable(broker) == (2, 0)
    client.publish(1, "amq.direct", "nowhere", mandatory=True)
    assert _unroutable(broker) == (2, 1)


def test_a_publish_refused_by_a_full_queue_is_not_unroutable(client, broker):
    client.declare(1, "small", arguments={"x-max-length": 0, "x-overflow": "reject-publish"})
    client.publish(1, "", "small", mandatory=True)
    client.publish(1, "", "small")
    assert _unroutable(broker) == (0, 0)


def test_tx_counts_unroutable_publishes_at_commit(client, broker):
    client.call(1, m.TxSelect())
    client.publish(1, "amq.direct", "none", mandatory=True)
    client.publish(1, "amq.direct", "none")
    assert _unroutable(broker) == (0, 0)
    client.call(1, m.TxCommit())
    assert _unroutable(broker) == (1, 1)


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
    assert broker.gate.listener_count == 1
    client.call(0, m.ConnectionClose(reply_code=200, reply_text="bye"))
    assert broker.gate.listener_count == 0


def test_already_blocked_broker_blocks_new_connection_at_first_channel(broker):
    broker.set_memory_high_watermark(10)
    c = BrokerClient(broker)
    c.open(1)
    c.declare(1, "q")
    c.publish(1, "", "q", b"y" * 50)
    fresh = BrokerClient(broker)
    assert isinstance(fresh.open(1)[0], m.ConnectionBlocked)


def test_blocked_connection_stops_reading_at_its_first_publish(broker, client):
    broker.set_memory_high_watermark(100)
    client.declare(1, "q")
    wakeups = []
    client.conn.on_output = lambda: wakeups.append(1)
    assert isinstance(client.publish(1, "", "q", b"x" * 200)[0], m.ConnectionBlocked)
    queue = broker.vhost("/").queue("q")
    # blocked but not publishing: still read (a consumer must be able to ack)
    assert client.conn.wants_input
    assert client.call(1, m.QueueDeclare(queue="q", passive=True))[0].message_count == 1
    # a publish while blocked: it and everything after it wait, and reading stops
    batch = (client.frames.content(1, m.BasicPublish(routing_key="q"), b"m2")
             + client.frames.method(1, m.QueueDeclare(queue="q", passive=True)))
    assert client.send(batch) == []
    assert not client.conn.wants_input and queue.message_count == 1
    # octets the edge read before it paused are kept behind the held ones
    assert client.send(client.frames.content(1, m.BasicPublish(routing_key="q"), b"m3")) == []
    assert queue.message_count == 1
    other = BrokerClient(broker)
    other.open(1)
    wakeups.clear()
    other.call(1, m.QueuePurge(queue="q"))  # frees the memory: the alarm ends
    assert wakeups  # the edge is asked for a flush, whose tick replays the held input
    assert methods_of(client.received()) == [m.ConnectionUnblocked()]
    assert queue.message_count == 0 and not client.conn.wants_input  # not replayed inside the alarm
    client.conn.tick(1001.0)
    ok, = methods_of(client.received())
    assert ok == m.QueueDeclareOk(queue="q", message_count=1, consumer_count=0)
    assert client.conn.wants_input
    assert [b for _, _, b in deliveries(client.send(client.frames.method(1, m.BasicConsume(queue="q"))))] == [
        b"m2", b"m3"]


def test_held_input_is_held_again_if_the_alarm_returns_during_replay(broker, client):
    broker.set_memory_high_watermark(100)
    client.declare(1, "q")
    client.publish(1, "", "q", b"x" * 200)
    batch = (client.frames.content(1, m.BasicPublish(routing_key="q"), b"y" * 200)
             + client.frames.content(1, m.BasicPublish(routing_key="q"), b"z"))
    assert client.send(batch) == []
    broker.vhost("/").purge_queue("q", owner=None)
    client.conn.tick(1001.0)  # the first replayed publish blocks again, the second waits
    assert methods_of(client.received()) == [m.ConnectionUnblocked(), m.ConnectionBlocked(
        reason=broker.gate.reason())]
    assert not client.conn.wants_input
    assert broker.vhost("/").queue("q").message_count == 1


def test_expiration_sets_message_ttl(client, broker):
    client.declare(1, "q")
    client.publish(1, "", "q", properties=BasicProperties(expiration="1000", priority=3, delivery_mode=2))
    entry = broker.vhost("/").queue("q").entries.head(1000.0)
    message = entry.message
    assert (message.ttl_ms, message.priority, message.durable) == (1000, 3, True)
    assert broker.vhost("/").queue("q").expire(1002.0) == 1


# ---- publisher confirms: one multiple ack per run of one batch ------------------------------

def publishes(client, channel, *keys, exchange=""):
    """The octets of one basic.publish per routing key, to feed as one batch."""
    return b"".join(client.frames.content(channel, m.BasicPublish(exchange=exchange, routing_key=k), b"x")
                    for k in keys)


def test_confirms_of_one_batch_become_one_multiple_ack(client):
    client.declare(1, "q")
    client.call(1, m.ConfirmSelect())
    assert client.send(publishes(client, 1, *["q"] * 5)) == [MethodFrame(1, m.BasicAck(delivery_tag=5, multiple=True))]
    # the next batch starts a new run from tag 6
    assert client.send(publishes(client, 1, "q", "q")) == [MethodFrame(1, m.BasicAck(delivery_tag=7, multiple=True))]
    assert client.publish(1, "", "q") == [m.BasicAck(delivery_tag=8, multiple=False)]


def test_nacks_stay_single_and_acks_never_jump_over_them(client):
    client.declare(1, "big")
    client.declare(1, "small", arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    client.call(1, m.ConfirmSelect())
    #                        1      2      3        4        5      6      7        8
    batch = publishes(client, 1, "big", "big", "small", "small", "big", "big", "small", "big")
    assert methods_of(client.send(batch)) == [
        m.BasicAck(delivery_tag=3, multiple=True),
        m.BasicNack(delivery_tag=4, multiple=False, requeue=False),
        m.BasicAck(delivery_tag=6, multiple=True),
        m.BasicNack(delivery_tag=7, multiple=False, requeue=False),
        m.BasicAck(delivery_tag=8, multiple=False),
    ]


def test_channels_coalesce_their_own_confirms(client):
    client.declare(1, "q")
    client.open(2)
    client.call(1, m.ConfirmSelect())
    client.call(2, m.ConfirmSelect())
    out = client.send(publishes(client, 1, "q", "q") + publishes(client, 2, "q", "q", "q")
                      + publishes(client, 1, "q"))
    assert sorted(out, key=lambda f: f.channel) == [
        MethodFrame(1, m.BasicAck(delivery_tag=3, multiple=True)),
        MethodFrame(2, m.BasicAck(delivery_tag=3, multiple=True)),
    ]


def test_pending_acks_precede_a_later_reply_on_the_channel(client):
    client.call(1, m.ConfirmSelect())
    batch = (publishes(client, 1, "k", "k", exchange="amq.direct")
             + client.frames.method(1, m.QueueDeclare(queue="after"))
             + publishes(client, 1, "k", exchange="amq.direct"))
    assert methods_of(client.send(batch)) == [
        m.BasicAck(delivery_tag=2, multiple=True),
        m.QueueDeclareOk(queue="after", message_count=0, consumer_count=0),
        m.BasicAck(delivery_tag=3, multiple=False),
    ]


def test_client_acks_do_not_break_a_run(client):
    client.declare(1, "in")
    client.publish(1, "", "in", b"a")
    client.publish(1, "", "in", b"b")
    client.call(1, m.BasicConsume(queue="in"))
    client.call(1, m.ConfirmSelect())
    batch = (publishes(client, 1, "out") + client.frames.method(1, m.BasicAck(delivery_tag=1))
             + publishes(client, 1, "out") + client.frames.method(1, m.BasicAck(delivery_tag=2)))
    assert methods_of(client.send(batch)) == [m.BasicAck(delivery_tag=2, multiple=True)]


def test_pending_acks_are_sent_before_a_channel_error(client):
    client.call(1, m.ConfirmSelect())
    batch = publishes(client, 1, "k", "k", exchange="amq.direct") + publishes(client, 1, "k", exchange="missing")
    ack, close = methods_of(client.send(batch))
    assert ack == m.BasicAck(delivery_tag=2, multiple=True)
    assert isinstance(close, m.ChannelClose) and close.reply_code == ReplyCode.NOT_FOUND


def test_pending_acks_are_sent_before_close_ok(client):
    client.call(1, m.ConfirmSelect())
    batch = publishes(client, 1, "k", "k", exchange="amq.direct") + client.frames.method(1, m.ChannelClose())
    assert methods_of(client.send(batch)) == [m.BasicAck(delivery_tag=2, multiple=True), m.ChannelCloseOk()]


def test_pending_acks_are_sent_before_a_connection_error(client):
    client.call(1, m.ConfirmSelect())
    batch = publishes(client, 1, "k", "k", exchange="amq.direct") + client.frames.method(1, m.ChannelOpen())
    ack, close = methods_of(client.send(batch))
    assert ack == m.BasicAck(delivery_tag=2, multiple=True)
    assert isinstance(close, m.ConnectionClose) and close.reply_code == ReplyCode.CHANNEL_ERROR


def test_pending_acks_are_sent_before_connection_close_ok(client):
    client.call(1, m.ConfirmSelect())
    batch = (publishes(client, 1, "k", "k", exchange="amq.direct")
             + client.frames.method(0, m.ConnectionClose(reply_code=200)))
    assert methods_of(client.send(batch)) == [m.BasicAck(delivery_tag=2, multiple=True), m.ConnectionCloseOk()]


def test_confirm_tracker_runs():
    tracker = ConfirmTracker()
    assert tracker.take_ack() is None
    assert tracker.add_ack(tracker.next_seq()) is True  # starts a run: schedule a flush
    assert tracker.add_ack(tracker.next_seq()) is False
    assert tracker.take_ack() == m.BasicAck(delivery_tag=2, multiple=True)
    assert tracker.take_ack() is None
    assert tracker.add_ack(tracker.next_seq()) is True
    assert tracker.take_ack() == m.BasicAck(delivery_tag=3, multiple=False)


def test_confirm_tracker_holds_the_next_publish_for_the_store():
    tracker = ConfirmTracker()
    assert tracker.add_ack(tracker.next_seq()) is True
    assert tracker.hold_next() is True  # the first held in the batch: schedule take_held
    assert tracker.hold_next() is False
    assert (tracker.last_seq, tracker.held) == (3, 3)
    assert tracker.take_ack() == m.BasicAck(delivery_tag=1, multiple=False)
    assert tracker.take_held() == 3
    assert tracker.answer(3, None) == m.BasicAck(delivery_tag=3, multiple=True)
    assert tracker.hold_next() is True
    assert tracker.held == 4
