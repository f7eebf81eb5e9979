"""Links on the broker model: addresses, credit, drain, outcomes, browse, big messages."""
from __future__ import annotations

import pytest
from proton import Delivery, Endpoint, Terminus

from gateway.broker.exchanges import DestinationKind
from tests.support.amqp10_pump import decode_message, encode_message


@pytest.fixture()
def vhost(broker):
    return broker.vhost("/")


def _fill(pump, address: str, count: int, **props) -> None:
    sender = pump.sender(address, name=f"filler-{address}-{count}")
    for i in range(count):
        delivery = pump.send(sender, encode_message(i, **props))
        assert delivery.remote_state == Delivery.ACCEPTED
    sender.close()
    pump.pump()


def _bodies(received) -> list:
    return [decode_message(data).body for _, data in received]


# ------------------------------------------------------------------ addresses

@pytest.mark.parametrize("address, exchange, key", [
    ("/queue/q1", "", "q1"),
    ("/amq/queue/q1", "", "q1"),
    ("q1", "", "q1"),
    ("/queues/q1", "", "q1"),
    ("q1@gateway-test", "", "q1"),
    ("/exchange/amq.direct/rk", "amq.direct", "rk"),
    ("/exchanges/amq.direct/rk", "amq.direct", "rk"),
    ("/topic/a.b", "amq.topic", "a.b"),
])
def test_every_target_form_reaches_the_queue(connect, vhost, address, exchange, key):
    if exchange:
        vhost.bind(DestinationKind.QUEUE, "q1", exchange, key)
    pump = connect()
    sender = pump.sender(address)
    assert sender.remote_target.address == address
    assert pump.send(sender, encode_message("m")).remote_state == Delivery.ACCEPTED
    assert vhost.queue("q1").message_count == 1


@pytest.mark.parametrize("address", ["/exchange/amq.direct", "/queue"])
def test_subject_keyed_targets(connect, vhost, address):
    vhost.bind(DestinationKind.QUEUE, "q1", "amq.direct", "q1")
    pump = connect()
    sender = pump.sender(address)
    assert pump.send(sender, encode_message("m", subject="q1")).remote_state == Delivery.ACCEPTED
    refused = pump.send(sender, encode_message("no subject"))
    assert refused.remote_state == Delivery.REJECTED
    assert refused.remote.condition.name == "amqp:invalid-field"
    assert vhost.queue("q1").message_count == 1


@pytest.mark.parametrize("address", ["/queue/q1", "/amq/queue/q1", "q1", "/queues/q1"])
def test_every_queue_source_form(connect, address):
    pump = connect()
    _fill(pump, "/queue/q1", 1)
    receiver = pump.receiver(address, credit=5)
    assert receiver.remote_source.address == address
    assert _bodies(pump.take(receiver)) == [0]


@pytest.mark.parametrize("source, target", [
    ("/exchange/amq.direct/k", "/exchange/amq.direct/k"),
    ("/exchanges/amq.direct/k", "/exchange/amq.direct/k"),
    ("/topic/a.*", "/topic/a.b"),
])
def test_exchange_sources_bind_a_temporary_queue(connect, vhost, source, target):
    pump = connect()
    before = set(vhost.queues)
    receiver = pump.receiver(source, credit=5)
    temporary = set(vhost.queues) - before
    assert len(temporary) == 1
    _fill(pump, target, 2)
    assert _bodies(pump.take(receiver)) == [0, 1]
    receiver.close()
    pump.pump()
    assert set(vhost.queues) == before


@pytest.mark.parametrize("address, condition, text", [
    ("/queue/missing", "amqp:not-found", "no queue 'missing'"),
    ("missing", "amqp:not-found", "no queue 'missing'"),
    ("/exchange/nope/rk", "amqp:not-found", "no exchange 'nope'"),
    ("/bogus/x", "amqp:invalid-field", "/bogus/x"),
    ("elsewhere@other-container", "amqp:not-found", "amqp$transfer"),
])
def test_unresolvable_target_refuses_attach(connect, address, condition, text):
    pump = connect()
    sender = pump.sender(address)
    assert sender.state & Endpoint.REMOTE_CLOSED
    assert sender.remote_condition.name == condition
    assert text in sender.remote_condition.description
    assert sender.remote_target.address is None


@pytest.mark.parametrize("address, condition", [
    ("/queue/missing", "amqp:not-found"),
    ("/topic/x/y/z", "amqp:invalid-field"),
    ("q@elsewhere", "amqp:invalid-field"),
])
def test_unresolvable_source_refuses_attach(connect, address, condition):
    pump = connect()
    receiver = pump.receiver(address, credit=1)
    assert receiver.state & Endpoint.REMOTE_CLOSED
    assert receiver.remote_condition.name == condition


def test_source_without_address_is_invalid_field(connect):
    pump = connect()
    receiver = pump.receiver(None, credit=1)
    assert receiver.remote_condition.name == "amqp:invalid-field"


def test_exclusive_queue_of_another_connection_is_resource_locked(connect, vhost):
    vhost.declare_queue("mine", exclusive=True, owner="someone-else")
    pump = connect()
    receiver = pump.receiver("/queue/mine", credit=1)
    assert receiver.remote_condition.name == "amqp:resource-locked"


def test_internal_exchange_is_unauthorized(connect, vhost):
    vhost.declare_exchange("hidden", "direct", internal=True)
    pump = connect()
    sender = pump.sender("/exchange/hidden/k")
    assert sender.remote_condition.name == "amqp:unauthorized-access"


def test_dynamic_target_is_not_implemented(connect):
    pump = connect()
    session = pump.session()
    link = session.sender("dyn")
    link.target.dynamic = True
    link.open()
    pump.pump()
    assert link.remote_condition.name == "amqp:not-implemented"


def test_anonymous_relay_routes_by_to(connect, vhost):
    pump = connect()
    relay = pump.sender(None)
    assert pump.send(relay, encode_message("a", address="/queue/q1")).remote_state == Delivery.ACCEPTED
    missing = pump.send(relay, encode_message("b", address="/queue/nope"))
    assert missing.remote_state == Delivery.REJECTED
    assert missing.remote.condition.name == "amqp:not-found"
    no_to = pump.send(relay, encode_message("c"))
    assert no_to.remote.condition.name == "amqp:invalid-field"
    assert vhost.queue("q1").message_count == 1


def test_unroutable_message_is_released(connect):
    pump = connect()
    sender = pump.sender("/exchange/amq.fanout")
    assert pump.send(sender, encode_message("x", subject="k")).remote_state == Delivery.RELEASED


def test_user_id_must_match_the_login(connect):
    pump = connect()
    sender = pump.sender("/queue/q1")
    ok = pump.send(sender, encode_message("x", user_id=b"guest"))
    assert ok.remote_state == Delivery.ACCEPTED
    bad = pump.send(sender, encode_message("x", user_id=b"mallory"))
    assert bad.remote_state == Delivery.REJECTED
    assert bad.remote.condition.name == "amqp:unauthorized-access"


# ------------------------------------------------------------------ credit

def test_credit_bounds_what_arrives(connect):
    pump = connect()
    _fill(pump, "/queue/q1", 100)
    receiver = pump.receiver("/queue/q1", credit=10)
    first = pump.take(receiver)
    assert _bodies(first) == list(range(10))
    pump.pump()
    assert pump.take(receiver) == []
    for delivery, _ in first:
        pump.settle(delivery)
    assert pump.take(receiver) == []  # settling gives no credit back
    receiver.flow(5)
    pump.pump()
    assert _bodies(pump.take(receiver)) == list(range(10, 15))


def test_drain_uses_up_or_returns_credit(connect):
    pump = connect()
    _fill(pump, "/queue/q1", 3)
    receiver = pump.receiver("/queue/q1")
    receiver.drain(10)
    pump.pump()
    assert len(pump.take(receiver)) == 3
    assert receiver.credit == 0
    assert not receiver.draining()


def test_incoming_credit_follows_queue_capacity(connect, vhost):
    queue = vhost.declare_queue("small", arguments={"x-max-length": 5, "x-overflow": "reject-publish"})
    pump = connect()
    sender = pump.sender("/queue/small")
    assert sender.credit == 5
    for i in range(5):
        pump.send(sender, encode_message(i))
    assert sender.credit == 0
    assert queue.message_count == 5
    receiver = pump.receiver("/queue/small", credit=2)
    for delivery, _ in pump.take(receiver):
        pump.settle(delivery)
    pump.advance(0.1)  # the engine polls capacity for a starving link
    assert sender.credit == 2


def test_memory_alarm_withholds_credit(connect, broker):
    pump = connect()
    sender = pump.sender("/queue/q1")
    broker.set_memory_high_watermark(10)
    for i in range(sender.credit):
        pump.send(sender, encode_message("x" * 100))
    assert sender.credit == 0
    pump.advance(0.1)
    assert sender.credit == 0
    broker.vhost("/").purge_queue("q1")
    broker.set_memory_high_watermark(None)
    pump.advance(0.1)
    assert sender.credit > 0


# ------------------------------------------------------------------ settlement

def _one_delivery(pump, address="/queue/q1", **props):
    _fill(pump, address, 1, **props)
    receiver = pump.receiver(address, name=f"r{len(pump.received)}{id(props)}", credit=1)
    [(delivery, data)] = pump.take(receiver)
    return receiver, delivery, data


def test_accepted_removes_the_message(connect, vhost):
    pump = connect()
    _, delivery, _ = _one_delivery(pump)
    pump.settle(delivery, Delivery.ACCEPTED)
    queue = vhost.queue("q1")
    assert (queue.message_count, queue.acquired_count) == (0, 0)


def test_rejected_discards_without_dead_letter_exchange(connect, vhost):
    pump = connect()
    _, delivery, _ = _one_delivery(pump)
    pump.settle(delivery, Delivery.REJECTED)
    assert vhost.queue("q1").message_count == 0


def test_rejected_dead_letters_when_configured(connect, vhost):
    vhost.declare_queue("dead")
    vhost.declare_queue("work", arguments={"x-dead-letter-exchange": "",
                                           "x-dead-letter-routing-key": "dead"})
    pump = connect()
    _, delivery, _ = _one_delivery(pump, "/queue/work")
    pump.settle(delivery, Delivery.REJECTED)
    assert vhost.queue("work").message_count == 0
    assert vhost.queue("dead").message_count == 1


def test_released_goes_back_without_counting(connect, vhost):
    pump = connect()
    receiver, delivery, _ = _one_delivery(pump)
    receiver.close()
    pump.pump()
    other = pump.receiver("/queue/q1", name="other", credit=1)
    [(d2, data)] = pump.take(other)
    assert decode_message(data).delivery_count == 0
    pump.settle(d2, Delivery.RELEASED)
    third = pump.receiver("/queue/q1", name="third", credit=1)
    [(_, data)] = pump.take(third)
    assert decode_message(data).delivery_count == 0


def test_modified_counts_and_merges_annotations(connect, vhost):
    pump = connect()
    receiver, delivery, _ = _one_delivery(pump)
    pump.settle(delivery, Delivery.MODIFIED, failed=True, annotations={"x-opt-why": "retry"})
    receiver.flow(1)
    pump.pump()
    [(_, data)] = pump.take(receiver)
    message = decode_message(data)
    assert message.delivery_count == 1
    assert message.annotations["x-opt-why"] == "retry"


def test_modified_undeliverable_here_keeps_it_off_this_link(connect, vhost):
    pump = connect()
    receiver, delivery, _ = _one_delivery(pump)
    pump.settle(delivery, Delivery.MODIFIED, undeliverable=True)
    receiver.flow(1)
    pump.pump()
    assert pump.take(receiver) == []
    other = pump.receiver("/queue/q1", name="other", credit=1)
    assert len(pump.take(other)) == 1


def test_presettled_receive_auto_settles(connect, vhost):
    pump = connect()
    _fill(pump, "/queue/q1", 2)
    receiver = pump.receiver("/queue/q1", credit=5, settled=True)
    received = pump.take(receiver)
    assert len(received) == 2 and all(d.settled for d, _ in received)
    assert (vhost.queue("q1").message_count, vhost.queue("q1").acquired_count) == (0, 0)


def test_presettled_send(connect, vhost):
    pump = connect()
    sender = pump.sender("/queue/q1", settled=True)
    pump.send(sender, encode_message("fire and forget"))
    assert vhost.queue("q1").message_count == 1


def test_link_detach_returns_unsettled(connect, vhost):
    pump = connect()
    _fill(pump, "/queue/q1", 4)
    receiver = pump.receiver("/queue/q1", credit=4)
    received = pump.take(receiver)
    pump.settle(received[0][0])
    receiver.detach()
    pump.pump()
    queue = vhost.queue("q1")
    assert (queue.message_count, queue.acquired_count) == (3, 0)
    again = pump.receiver("/queue/q1", name="again", credit=10)
    assert _bodies(pump.take(again)) == [1, 2, 3]


def test_queue_deleted_detaches_consumer(connect, vhost):
    pump = connect()
    receiver = pump.receiver("/queue/q1", credit=1)
    vhost.delete_queue("q1")
    pump.pump()
    assert receiver.state & Endpoint.REMOTE_CLOSED
    assert receiver.remote_condition.name == "amqp:link:detach-forced"


# ------------------------------------------------------------------ browse, dynamic, size

def test_copy_browses_without_acquiring(connect, vhost):
    pump = connect()
    _fill(pump, "/queue/q1", 3)
    browser = pump.receiver("/queue/q1", credit=10, copy=True)
    assert browser.remote_source.distribution_mode == Terminus.DIST_MODE_COPY
    assert _bodies(pump.take(browser)) == [0, 1, 2]
    assert vhost.queue("q1").message_count == 3
    consumer = pump.receiver("/queue/q1", name="consumer", credit=10)
    assert _bodies(pump.take(consumer)) == [0, 1, 2]


def test_dynamic_reply_queue(connect, vhost):
    pump = connect()
    replies = pump.receiver(None, dynamic=True, credit=5)
    address = replies.remote_source.address
    assert address.startswith("/queue/amq.gen-")
    name = address.rsplit("/", 1)[1]
    assert vhost.queue(name) is not None
    relay = pump.sender(None)
    pump.send(relay, encode_message("reply", address=address))
    assert _bodies(pump.take(replies)) == ["reply"]
    replies.close()
    pump.pump()
    assert vhost.queue(name) is None


def test_ten_mib_message_both_ways_multi_frame(connect):
    pump = connect(engine=dict(max_frame_size=65536))
    body = bytes(range(256)) * (10 * 4096)
    encoded = encode_message(body)
    sender = pump.sender("/queue/q1")
    assert pump.send(sender, encoded).remote_state == Delivery.ACCEPTED
    receiver = pump.receiver("/queue/q1", credit=1)
    [(_, data)] = pump.take(receiver)
    assert data == encoded
    assert pump.transport.frames_input > 150


def test_message_size_limit_detaches(connect, vhost):
    pump = connect(engine=dict(max_message_size=1000))
    sender = pump.sender("/queue/q1")
    assert sender.remote_max_message_size == 1000
    pump.send(sender, encode_message(b"x" * 2000))
    assert sender.remote_condition.name == "amqp:link:message-size-exceeded"
    assert vhost.queue("q1").message_count == 0


def test_amqp10_to_amqp10_is_byte_identical(connect):
    pump = connect()
    encoded = encode_message({"k": [1, 2.5, "x"]}, subject="s", properties={"a": 1},
                             annotations={"x-opt-z": 3}, durable=True, priority=7)
    pump.send(pump.sender("/queue/q1"), encoded)
    receiver = pump.receiver("/queue/q1", credit=1)
    [(_, data)] = pump.take(receiver)
    assert data == encoded


def test_release_and_new_credit_in_one_batch_redelivers_the_released_first(connect):
    pump = connect()
    receiver = pump.receiver(None, dynamic=True)
    sender = pump.sender(receiver.remote_source.address)
    for body in ("first", "second"):
        pump.send(sender, encode_message(body))
    receiver.flow(1)
    pump.pump()
    [(delivery, _)] = pump.take(receiver)
    delivery.update(Delivery.RELEASED)
    delivery.settle()
    receiver.flow(1)  # goes out in the same bytes as the disposition
    pump.pump()
    assert _bodies(pump.take(receiver)) == ["first"]


def test_message_from_amqp091_is_translated_once_and_cached(connect, vhost):
    from gateway.broker.message import Encoding, MessageContainer
    from translators.basic_properties import BasicProperties

    properties = BasicProperties(content_type="text/plain", message_id="m-1", delivery_mode=2)
    message = MessageContainer(Encoding.AMQP091, (b"", b"hello from 0-9-1"), properties=properties,
                               size=16, durable=True)
    vhost.publish("", "q1", message, 0.0)
    pump = connect()
    receiver = pump.receiver("/queue/q1", credit=1)
    [(_, data)] = pump.take(receiver)
    decoded = decode_message(data)
    assert decoded.id == "m-1" and decoded.durable
    assert decoded.body in (b"hello from 0-9-1", "hello from 0-9-1")
    assert message.converted(Encoding.AMQP10, lambda m: pytest.fail("not cached")) is not None
