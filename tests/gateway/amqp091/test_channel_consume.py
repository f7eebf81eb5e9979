"""BrokerChannel consumers: prefetch, acknowledgements, requeue, recover, flow, x-death."""
from __future__ import annotations

import pytest

from gateway.amqp091 import methods as m
from gateway.amqp091.spec import ReplyCode
from gateway.broker import Encoding, MessageContainer
from tests.support.broker_channel_driver import BrokerClient, deliveries, make_broker
from translators import to_amqp10
from translators.basic_properties import BasicProperties


@pytest.fixture
def broker():
    return make_broker()


@pytest.fixture
def client(broker):
    c = BrokerClient(broker)
    c.open(1)
    return c


def fill(client, queue, n, channel=1):
    client.declare(channel, queue)
    for i in range(n):
        client.publish(channel, "", queue, str(i).encode())


def consume(client, queue, channel=1, **kwargs):
    return deliveries(client.send(client.frames.method(channel, m.BasicConsume(queue=queue, **kwargs))))


def test_deliveries_in_order_with_increasing_tags(client):
    fill(client, "q", 5)
    got = consume(client, "q", consumer_tag="c")
    assert [b for _, _, b in got] == [b"0", b"1", b"2", b"3", b"4"]
    assert [d.delivery_tag for d, _, _ in got] == [1, 2, 3, 4, 5]
    assert all(d.consumer_tag == "c" and not d.redelivered and d.routing_key == "q" for d, _, _ in got)


def test_consume_ok_precedes_deliveries(client):
    fill(client, "q", 1)
    methods = client.call(1, m.BasicConsume(queue="q"))
    assert [type(x) for x in methods] == [m.BasicConsumeOk, m.BasicDeliver]


def test_properties_bytes_are_passed_through(client):
    client.declare(1, "qprops")
    props = BasicProperties(content_type="application/json", headers={"a": 1}, message_id="m1")
    client.publish(1, "", "qprops", b"{}", properties=props)
    (_, got, body), = consume(client, "qprops")
    assert got == props and body == b"{}"


def test_per_consumer_prefetch(client, broker):
    fill(client, "q", 5)
    client.call(1, m.BasicQos(prefetch_count=2))
    got = consume(client, "q")
    assert len(got) == 2
    more = deliveries(client.send(client.frames.method(1, m.BasicAck(delivery_tag=1))))
    assert [d.delivery_tag for d, _, _ in more] == [3]
    more = deliveries(client.send(client.frames.method(1, m.BasicAck(delivery_tag=3, multiple=True))))
    assert [d.delivery_tag for d, _, _ in more] == [4, 5]
    assert broker.vhost("/").queue("q").acquired_count == 2


def test_global_prefetch_is_shared_by_the_channels_consumers(client):
    fill(client, "qa", 3)
    fill(client, "qb", 3)
    client.call(1, m.BasicQos(prefetch_count=3, global_=True))
    got = consume(client, "qa") + consume(client, "qb")
    assert len(got) == 3
    more = deliveries(client.send(client.frames.method(1, m.BasicAck(delivery_tag=0, multiple=True))))
    assert len(more) == 3


@pytest.mark.parametrize("global_", [False, True])
def test_prefetch_size_is_540_connection_error_as_in_rabbitmq(client, global_):
    out = client.call(1, m.BasicQos(prefetch_size=1000, prefetch_count=5, global_=global_))
    assert out == [m.ConnectionClose(reply_code=ReplyCode.NOT_IMPLEMENTED,
                                     reply_text="NOT_IMPLEMENTED - prefetch_size!=0 (1000)",
                                     class_id=60, method_id=10)]
    assert client.conn.state.value == "closing"


def test_prefetch_size_zero_is_accepted(client):
    assert client.call(1, m.BasicQos(prefetch_size=0, prefetch_count=5)) == [m.BasicQosOk()]


def test_no_ack_consumer_ignores_prefetch_and_leaves_nothing_unacked(client, broker):
    fill(client, "q", 4)
    client.call(1, m.BasicQos(prefetch_count=1))
    assert len(consume(client, "q", no_ack=True)) == 4
    queue = broker.vhost("/").queue("q")
    assert queue.acquired_count == 0 and queue.message_count == 0


def test_round_robin_between_consumers(client):
    client.declare(1, "rr")
    client.call(1, m.BasicConsume(queue="rr", consumer_tag="a", no_ack=True))
    client.call(1, m.BasicConsume(queue="rr", consumer_tag="b", no_ack=True))
    tags = []
    for i in range(4):
        frames = client.publish_frames(1, "", "rr", b"x")
        tags += [d.consumer_tag for d, _, _ in deliveries(frames)]
    assert tags == ["a", "b", "a", "b"]


def test_nack_requeue_redelivers_and_reject_discards(client, broker):
    fill(client, "q", 2)
    client.call(1, m.BasicQos(prefetch_count=1))
    (d1, _, _), = consume(client, "q")
    again = deliveries(client.send(client.frames.method(1, m.BasicNack(delivery_tag=d1.delivery_tag))))
    assert again[0][0].redelivered and again[0][2] == b"0"
    nxt = deliveries(client.send(client.frames.method(1, m.BasicReject(delivery_tag=again[0][0].delivery_tag,
                                                                        requeue=False))))
    assert nxt[0][2] == b"1" and not nxt[0][0].redelivered
    client.call(1, m.BasicAck(delivery_tag=nxt[0][0].delivery_tag))
    queue = broker.vhost("/").queue("q")
    assert queue.message_count == 0 and queue.acquired_count == 0


def test_nack_multiple(client, broker):
    fill(client, "q", 3)
    got = consume(client, "q")
    client.call(1, m.BasicCancel(consumer_tag=got[0][0].consumer_tag))
    client.call(1, m.BasicNack(delivery_tag=2, multiple=True, requeue=True))
    queue = broker.vhost("/").queue("q")
    assert queue.message_count == 2 and queue.acquired_count == 1


@pytest.mark.parametrize("method", [
    m.BasicAck(delivery_tag=9), m.BasicNack(delivery_tag=9), m.BasicReject(delivery_tag=9),
    m.BasicAck(delivery_tag=9, multiple=True),
])
def test_unknown_delivery_tag_is_406(client, method):
    fill(client, "q", 1)
    consume(client, "q")
    close = client.call(1, method)[0]
    assert isinstance(close, m.ChannelClose) and close.reply_code == ReplyCode.PRECONDITION_FAILED
    assert close.reply_text == "PRECONDITION_FAILED - unknown delivery tag 9"


def test_double_ack_is_406(client):
    fill(client, "q", 1)
    consume(client, "q")
    assert client.call(1, m.BasicAck(delivery_tag=1)) == []
    assert client.call(1, m.BasicAck(delivery_tag=1))[0].reply_code == ReplyCode.PRECONDITION_FAILED


def test_channel_close_requeues_unacked_as_redelivered(client):
    fill(client, "q", 2)
    consume(client, "q")
    client.call(1, m.ChannelClose(reply_code=200, reply_text="bye"))
    client.open(2)
    got = deliveries(client.send(client.frames.method(2, m.BasicGet(queue="q"))))
    assert got[0][0].redelivered and got[0][2] == b"0"


def test_recover_requeues_and_requeue_false_is_540(client):
    fill(client, "q", 1)
    consume(client, "q")
    out = client.send(client.frames.method(1, m.BasicRecover(requeue=True)))
    assert isinstance(out[0].method, m.BasicRecoverOk)
    (d, _, _), = deliveries(out)
    assert d.redelivered and d.delivery_tag == 2
    close = client.call(1, m.BasicRecover(requeue=False))
    assert isinstance(close[0], m.ConnectionClose) and close[0].reply_code == ReplyCode.NOT_IMPLEMENTED


def test_cancel_stops_deliveries(client):
    client.declare(1, "q")
    client.call(1, m.BasicConsume(queue="q", consumer_tag="c"))
    assert isinstance(client.call(1, m.BasicCancel(consumer_tag="c"))[0], m.BasicCancelOk)
    assert client.publish(1, "", "q") == []


def test_channel_flow_pauses_and_resumes_deliveries(client):
    client.declare(1, "q")
    client.call(1, m.BasicConsume(queue="q", no_ack=True))
    ok = client.call(1, m.ChannelFlow(active=False))
    assert ok == [m.ChannelFlowOk(active=False)]
    assert client.publish(1, "", "q", b"held") == []
    out = client.send(client.frames.method(1, m.ChannelFlow(active=True)))
    assert out[0].method == m.ChannelFlowOk(active=True)
    assert [b for _, _, b in deliveries(out)] == [b"held"]


def test_delivery_from_another_connection_calls_on_output(broker, client):
    client.declare(1, "q")
    client.call(1, m.BasicConsume(queue="q", no_ack=True))
    calls = []
    client.conn.on_output = lambda: calls.append(1)
    other = BrokerClient(broker)
    other.open(1)
    other.publish(1, "", "q", b"cross")
    assert calls == [1]
    assert [b for _, _, b in deliveries(client.received())] == [b"cross"]


def test_dead_lettered_message_carries_x_death(client):
    client.declare(1, "dlq")
    client.declare(1, "work", arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq"})
    client.publish(1, "", "work", b"bad", properties=BasicProperties(headers={"k": "v"}))
    (d, _, _), = consume(client, "work")
    client.call(1, m.BasicReject(delivery_tag=d.delivery_tag, requeue=False))
    got = deliveries(client.send(client.frames.method(1, m.BasicGet(queue="dlq", no_ack=True))))
    props = got[0][1]
    death = props.headers["x-death"][0]
    assert props.headers["k"] == "v"
    assert death["queue"] == "work" and death["reason"] == "rejected" and death["count"] == 1
    assert death["routing-keys"] == ["work"] and props.headers["x-first-death-reason"] == "rejected"


def test_amqp10_origin_message_is_translated(client, broker):
    client.declare(1, "from10")
    encoded = to_amqp10(BasicProperties(content_type="text/plain", message_id="id-1"), b"payload")
    message = MessageContainer(Encoding.AMQP10, encoded, size=7)
    broker.vhost("/").publish("", "from10", message, 1000.0)
    got = deliveries(client.send(client.frames.method(1, m.BasicGet(queue="from10", no_ack=True))))
    props, body = got[0][1], got[0][2]
    assert body == b"payload" and props.content_type == "text/plain" and props.message_id == "id-1"


# ---- the unacked record ------------------------------------------------------------------

def _unacked(tags):
    from gateway.amqp091.consumer import Unacked, UnackedDeliveries

    record = UnackedDeliveries()
    for t in tags:
        assert record.next_tag() == t
        record.add(Unacked(t, entry=None, window=None))  # type: ignore[arg-type]
    return record


def test_unacked_take_multiple_takes_every_lower_tag():
    record = _unacked([1, 2, 3, 4])
    assert [u.tag for u in record.take(3, True)] == [1, 2, 3]
    assert len(record) == 1


def test_unacked_take_multiple_zero_takes_all_and_unknown_raises():
    from gateway.amqp091.consumer import UnknownDeliveryTag

    record = _unacked([1, 2])
    with pytest.raises(UnknownDeliveryTag) as info:
        record.take(7, True)
    assert info.value.tag == 7 and len(record) == 2
    assert [u.tag for u in record.take(0, True)] == [1, 2]
    with pytest.raises(UnknownDeliveryTag):
        record.take(0, False)


def test_unacked_restore_keeps_tag_order():
    record = _unacked([1, 2, 3])
    taken = record.take(2, False)
    record.restore(taken)
    assert [u.tag for u in record.take(3, True)] == [1, 2, 3]
