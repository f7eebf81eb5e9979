"""Links on the broker model: addresses, credit, drain, outcomes, browse, big messages."""
from __future__ import annotations

import sqlite3

import pytest
from proton import Delivery, Endpoint, Terminus

from gateway.amqp10 import INCOMING_CREDIT
from gateway.broker import Broker, UnroutablePolicy
from gateway.broker.exchanges import DestinationKind
from tests.support.amqp10_pump import Amqp10Pump, decode_message, encode_message, engine_factory
from translators import with_delivery_header
from translators.amqp10_sections import with_message_annotations


def _first_delivery(encoded: bytes, routing_key: str = "q1", exchange: str = "") -> bytes:
    """What a message's first acquisition sends: its own octets but the header, which
    says first-acquirer true and delivery-count 0, and the message-annotations, which
    gain ``x-exchange`` and ``x-routing-key`` (RabbitMQ 4's; here ``/queue/q1``'s)."""
    routed = with_message_annotations(encoded, {"x-exchange": exchange, "x-routing-key": routing_key})
    return with_delivery_header(routed, delivery_count=0, first_acquirer=True)


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
    ("/amq/queue/missing", "amqp:not-found",
     "no queue 'missing' in vhost '/' (address '/amq/queue/missing')"),
    ("/queues/missing", "amqp:not-found",
     "no queue 'missing' in vhost '/' (address '/queues/missing')"),
    ("missing@gateway-test", "amqp:not-found",
     "no queue 'missing' in vhost '/' (address 'missing@gateway-test')"),
    ("/exchange/nope/rk", "amqp:not-found",
     "no exchange 'nope' in vhost '/' (address '/exchange/nope/rk')"),
    ("/bogus/x", "amqp:invalid-field", "/bogus/x"),
    ("elsewhere@other-container", "amqp:not-found",
     "no service 'amqp$transfer' in vhost '/' (address 'elsewhere@other-container')"),
])
def test_unresolvable_target_refuses_attach(connect, address, condition, text):
    pump = connect()
    sender = pump.sender(address)
    assert sender.state & Endpoint.REMOTE_CLOSED
    assert sender.remote_condition.name == condition
    assert text in sender.remote_condition.description
    assert sender.remote_target.address is None


@pytest.mark.parametrize("address, condition, text", [
    ("/queues/missing", "amqp:not-found", "no queue 'missing' in vhost '/' (address '/queues/missing')"),
    ("/amq/queue/missing", "amqp:not-found",
     "no queue 'missing' in vhost '/' (address '/amq/queue/missing')"),
    ("/topic/x/y/z", "amqp:invalid-field", "/topic/x/y/z"),
    ("q@elsewhere", "amqp:invalid-field", "q@elsewhere"),
])
def test_unresolvable_source_refuses_attach(connect, address, condition, text):
    pump = connect()
    receiver = pump.receiver(address, credit=1)
    assert receiver.state & Endpoint.REMOTE_CLOSED
    assert receiver.remote_condition.name == condition
    assert text in receiver.remote_condition.description


def test_relayed_message_to_a_missing_node_names_its_to(connect):
    pump = connect()
    relay = pump.sender(None)
    missing = pump.send(relay, encode_message("b", address="/queues/nope"))
    assert missing.remote.condition.description == "no queue 'nope' in vhost '/' (address '/queues/nope')"


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
    missing = pump.send(relay, encode_message("b", address="/amq/queue/nope"))
    assert missing.remote_state == Delivery.REJECTED
    assert missing.remote.condition.name == "amqp:not-found"
    no_to = pump.send(relay, encode_message("c"))
    assert no_to.remote.condition.name == "amqp:invalid-field"
    assert vhost.queue("q1").message_count == 1


def test_unroutable_message_is_accepted_and_dropped(connect, broker):
    pump = connect()
    sender = pump.sender("/exchange/amq.fanout")
    assert pump.send(sender, encode_message("x", subject="k")).remote_state == Delivery.ACCEPTED
    assert (broker.unroutable.dropped_amqp10, broker.unroutable.returned_amqp10) == (1, 0)


# ------------------------------------------------------------------ unroutable outcome

def _capabilities(terminus) -> list[str]:
    data = terminus.capabilities
    data.rewind()
    if not data.next():
        return []
    return [str(s) for s in data.get_object().elements]


UNROUTABLE_TARGETS = [  # (target, the message's own 'to' and subject)
    ("/exchange/amq.direct/nowhere", {}),
    ("/exchange/amq.direct", {"subject": "nowhere"}),
    ("/topic/nowhere", {}),
    ("/queue", {"subject": "no-such-queue"}),
    (None, {"address": "/exchange/amq.direct/nowhere"}),  # the anonymous relay
]


@pytest.mark.parametrize("target, props", UNROUTABLE_TARGETS)
@pytest.mark.parametrize("policy, state, returned", [
    (UnroutablePolicy.ACCEPT, Delivery.ACCEPTED, 0),
    (UnroutablePolicy.RELEASE, Delivery.RELEASED, 1),
    (UnroutablePolicy.REJECT, Delivery.REJECTED, 1),
])
def test_the_operators_policy_settles_unroutable_messages(connect, broker, target, props, policy,
                                                         state, returned):
    pump = connect(engine=dict(unroutable=policy))
    sender = pump.sender(target)
    delivery = pump.send(sender, encode_message("x", **props))
    assert delivery.remote_state == state
    assert (broker.unroutable.dropped_amqp10, broker.unroutable.returned_amqp10) == (
        1 - returned, returned)
    if policy is UnroutablePolicy.REJECT:
        condition = delivery.remote.condition
        assert condition.name == "amqp:not-found"
        exchange = "the default exchange" if target == "/queue" else (
            "exchange 'amq.topic'" if target == "/topic/nowhere" else "exchange 'amq.direct'")
        key = "no-such-queue" if target == "/queue" else "nowhere"
        assert condition.description == (f"no route for routing key '{key}' from {exchange} "
                                          "in vhost '/'")
    assert sender.state & Endpoint.REMOTE_ACTIVE  # the link stays up


@pytest.mark.parametrize("capability, default, state", [
    ("DISCARD_UNROUTABLE", UnroutablePolicy.REJECT, Delivery.ACCEPTED),
    ("discard-unroutable", UnroutablePolicy.RELEASE, Delivery.ACCEPTED),
    ("REJECT_UNROUTABLE", UnroutablePolicy.ACCEPT, Delivery.REJECTED),
    ("reject-unroutable", UnroutablePolicy.RELEASE, Delivery.REJECTED),
])
@pytest.mark.parametrize("target, props", [UNROUTABLE_TARGETS[0], UNROUTABLE_TARGETS[-1]])
def test_a_target_capability_chooses_the_outcome_and_is_echoed(connect, target, props, capability,
                                                              default, state):
    pump = connect(engine=dict(unroutable=default))
    sender = pump.sender(target, capabilities=["shared", capability])
    assert sender.state & Endpoint.REMOTE_ACTIVE
    assert _capabilities(sender.remote_target) == [capability]  # only what we honour
    assert pump.send(sender, encode_message("x", **props)).remote_state == state


def test_no_capability_is_echoed_unless_asked(connect):
    pump = connect(engine=dict(unroutable=UnroutablePolicy.REJECT))
    assert _capabilities(pump.sender("/topic/x").remote_target) == []


def test_contradicting_capabilities_refuse_the_attach(connect):
    pump = connect()
    sender = pump.sender("/topic/x", capabilities=["DISCARD_UNROUTABLE", "REJECT_UNROUTABLE"])
    assert sender.state & Endpoint.REMOTE_CLOSED
    assert sender.remote_condition.name == "amqp:invalid-field"


def test_a_presettled_unroutable_message_is_dropped_under_any_policy(connect, broker):
    pump = connect(engine=dict(unroutable=UnroutablePolicy.REJECT))
    sender = pump.sender("/topic/nowhere", settled=True)
    pump.send(sender, encode_message("x"))
    assert sender.state & Endpoint.REMOTE_ACTIVE
    assert (broker.unroutable.dropped_amqp10, broker.unroutable.returned_amqp10) == (1, 0)


def test_routed_messages_are_not_counted(connect, broker, vhost):
    vhost.bind(DestinationKind.QUEUE, "q1", "amq.topic", "k")
    pump = connect(engine=dict(unroutable=UnroutablePolicy.REJECT))
    assert pump.send(pump.sender("/topic/k"), encode_message("x")).remote_state == Delivery.ACCEPTED
    assert (broker.unroutable.dropped_amqp10, broker.unroutable.returned_amqp10) == (0, 0)


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


def _acquirers(received) -> list:
    return [(decode_message(data).first_acquirer, decode_message(data).delivery_count)
            for _, data in received]


def test_first_acquirer_is_true_on_the_first_acquisition_only(connect):
    """1.0 -> 1.0: the sender's header says first-acquirer false; the first acquisition
    says true, a release or a modified outcome and the redelivery says false."""
    pump = connect()
    pump.send(pump.sender("/queue/q1"), encode_message("m", durable=True, first_acquirer=False))
    receiver = pump.receiver("/queue/q1", credit=1)
    [(delivery, data)] = received = pump.take(receiver)
    assert _acquirers(received) == [(True, 0)] and decode_message(data).durable
    pump.settle(delivery, Delivery.RELEASED)
    receiver.flow(1)
    pump.pump()
    [(delivery, _)] = received = pump.take(receiver)
    assert _acquirers(received) == [(False, 0)]
    pump.settle(delivery, Delivery.MODIFIED, failed=True)
    receiver.flow(1)
    pump.pump()
    assert _acquirers(pump.take(receiver)) == [(False, 1)]


def test_first_acquirer_after_a_lost_link_is_false(connect):
    pump = connect()
    pump.send(pump.sender("/queue/q1"), encode_message("m"))
    first = pump.receiver("/queue/q1", name="first", credit=1)
    assert _acquirers(pump.take(first)) == [(True, 0)]
    first.close()  # unsettled: the message goes back
    pump.pump()
    again = pump.receiver("/queue/q1", name="again", credit=1)
    assert _acquirers(pump.take(again)) == [(False, 0)]


def test_a_browser_is_never_the_first_acquirer(connect, vhost):
    """A copy link acquires nothing: first-acquirer false, whether the message came from
    1.0 (whose header said true) or from 0-9-1 (whose cached translation says true); the
    consumer that acquires them afterwards is the first acquirer."""
    from gateway.broker.message import Encoding, MessageContainer
    from translators.basic_properties import BasicProperties

    pump = connect()
    pump.send(pump.sender("/queue/q1"), encode_message("from 1.0", first_acquirer=True))
    vhost.publish("", "q1", MessageContainer(Encoding.AMQP091, (b"", b"from 0-9-1"),
                                             properties=BasicProperties(), size=10), 0.0)
    browser = pump.receiver("/queue/q1", name="browser", credit=10, copy=True)
    assert _acquirers(pump.take(browser)) == [(False, 0), (False, 0)]
    consumer = pump.receiver("/queue/q1", name="consumer", credit=10)
    assert _acquirers(pump.take(consumer)) == [(True, 0), (True, 0)]


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
    assert data == _first_delivery(encoded)
    assert pump.transport.frames_input > 150


def test_message_size_limit_detaches(connect, vhost):
    pump = connect(engine=dict(max_message_size=1000))
    sender = pump.sender("/queue/q1")
    assert sender.remote_max_message_size == 1000
    pump.send(sender, encode_message(b"x" * 2000))
    assert sender.remote_condition.name == "amqp:link:message-size-exceeded"
    assert vhost.queue("q1").message_count == 0


def test_amqp10_to_amqp10_keeps_the_bare_message_and_adds_the_routing_annotations(connect):
    pump = connect()
    encoded = encode_message({"k": [1, 2.5, "x"]}, subject="s", properties={"a": 1},
                             annotations={"x-opt-z": 3}, durable=True, priority=7)
    pump.send(pump.sender("/queue/q1"), encoded)
    receiver = pump.receiver("/queue/q1", credit=1)
    [(_, data)] = pump.take(receiver)
    assert data == _first_delivery(encoded)
    decoded = decode_message(data)
    assert (decoded.durable, decoded.priority, decoded.first_acquirer) == (True, 7, True)
    assert decoded.annotations == {"x-opt-z": 3, "x-exchange": "", "x-routing-key": "q1"}
    assert data.endswith(encoded[encoded.index(b"\x00Ss"):])  # the properties section on: its octets


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


# ------------------------------------------------------------------ max-message-size on both sides

def _limited_receiver(pump, address: str, limit: int, *, name: str, credit: int):
    """A receiver whose attach says max-message-size ``limit``."""
    link = pump.session().receiver(name)
    link.source.address = address
    link.max_message_size = limit
    link.open()
    link.flow(credit)
    pump.pump()
    return link


def test_every_attach_announces_our_max_message_size(connect):
    pump = connect(engine=dict(max_message_size=4096))
    assert pump.sender("/queue/q1").remote_max_message_size == 4096
    assert pump.receiver("/queue/q1", credit=1).remote_max_message_size == 4096


def test_message_above_the_receivers_limit_detaches_it_and_stays_queued(connect, vhost):
    pump = connect()
    sender = pump.sender("/queue/q1")
    small, big = encode_message("small"), encode_message("x" * 2000)
    pump.send(sender, small)
    pump.send(sender, big)
    limited = _limited_receiver(pump, "/queue/q1", 1000, name="limited", credit=5)
    assert [data for _, data in pump.take(limited)] == [_first_delivery(small)]  # not the big one
    assert limited.state & Endpoint.REMOTE_CLOSED
    assert limited.remote_condition.name == "amqp:link:message-size-exceeded"
    assert limited.remote_condition.description == (
        f"message size ({len(_first_delivery(big))} bytes) > maximum message size (1000 bytes)")
    queue = vhost.queue("q1")
    assert (queue.message_count, queue.acquired_count, queue.consumer_count) == (2, 0, 0)
    other = pump.receiver("/queue/q1", name="other", credit=5)
    received = pump.take(other)
    assert _bodies(received) == ["small", "x" * 2000]  # in order
    assert [decode_message(data).delivery_count for _, data in received] == [0, 0]
    assert received[1][1] == _first_delivery(big)  # never sent: still a first acquisition


def test_message_within_the_receivers_limit_is_delivered(connect):
    pump = connect()
    encoded = encode_message("x" * 500)
    pump.send(pump.sender("/queue/q1"), encoded)
    sent = _first_delivery(encoded)
    limited = _limited_receiver(pump, "/queue/q1", len(sent), name="limited", credit=5)
    assert [data for _, data in pump.take(limited)] == [sent]
    assert limited.state & Endpoint.REMOTE_ACTIVE


# ------------------------------------------------------------------ credit from the queues a target reaches

def _reject_publish(vhost, name: str, **limits):
    arguments = {"x-overflow": "reject-publish"}
    arguments.update({f"x-{k.replace('_', '-')}": v for k, v in limits.items()})
    return vhost.declare_queue(name, arguments=arguments)


@pytest.mark.parametrize("target", ["/exchange/amq.direct/k", "/topic/k", "/exchanges/amq.direct/k"])
def test_exchange_target_credit_follows_the_bound_queue(connect, vhost, target):
    queue = _reject_publish(vhost, "small", max_length=3)
    exchange = "amq.topic" if target.startswith("/topic") else "amq.direct"
    vhost.bind(DestinationKind.QUEUE, "small", exchange, "k")
    pump = connect()
    sender = pump.sender(target)
    assert sender.credit == 3
    for i in range(3):
        assert pump.send(sender, encode_message(i)).remote_state == Delivery.ACCEPTED
    assert sender.credit == 0
    pump.advance(0.1)
    assert sender.credit == 0
    queue.get(0.0, ack=False)
    pump.advance(0.1)  # the engine polls the room of a starving link
    assert sender.credit == 1


def test_exchange_target_credit_is_the_largest_room_among_its_queues(connect, vhost):
    _reject_publish(vhost, "two", max_length=2)
    _reject_publish(vhost, "four", max_length=4)
    for name in ("two", "four"):
        vhost.bind(DestinationKind.QUEUE, name, "amq.fanout", "")
    pump = connect()
    assert pump.sender("/exchange/amq.fanout/any").credit == 4


def test_drop_head_queue_leaves_the_window_and_keeps_the_newest(connect, vhost):
    queue = vhost.declare_queue("newest", arguments={"x-max-length": 5})
    vhost.bind(DestinationKind.QUEUE, "newest", "amq.direct", "k")
    pump = connect()
    for target in ("/queue/newest", "/exchange/amq.direct/k"):
        sender = pump.sender(target, name=target)
        assert sender.credit == INCOMING_CREDIT
        for i in range(10):
            assert pump.send(sender, encode_message(i)).remote_state == Delivery.ACCEPTED
        assert queue.message_count == 5
    receiver = pump.receiver("/queue/newest", credit=10)
    assert _bodies(pump.take(receiver)) == [5, 6, 7, 8, 9]


def test_full_queue_behind_an_unbounded_route_rejects_each_message(connect, vhost):
    _reject_publish(vhost, "full", max_length=1)
    vhost.bind(DestinationKind.QUEUE, "full", "amq.direct", "full")
    pump = connect()
    sender = pump.sender("/exchange/amq.direct")  # subject-keyed: nothing known at attach
    assert sender.credit == INCOMING_CREDIT
    assert pump.send(sender, encode_message(0, subject="full")).remote_state == Delivery.ACCEPTED
    refused = pump.send(sender, encode_message(1, subject="full"))
    assert refused.remote_state == Delivery.REJECTED
    assert refused.remote.condition.name == "amqp:resource-limit-exceeded"
    assert "'full'" in refused.remote.condition.description
    assert vhost.queue("full").message_count == 1


def test_credit_follows_max_length_bytes(connect, vhost):
    queue = _reject_publish(vhost, "bytes", max_length_bytes=1000)
    pump = connect()
    sender = pump.sender("/queue/bytes")
    assert sender.credit == INCOMING_CREDIT  # nothing held yet: one message per byte of room
    sender.close()
    pump.pump()
    for _ in range(4):
        vhost.publish("", "bytes", _sized(100), 0.0)
    assert queue.capacity_left() == 6  # 600 bytes of room, 100 per message held
    sender = pump.sender("/queue/bytes", name="again")
    assert sender.credit == 6
    for _ in range(6):
        assert pump.send(sender, _data_message(100)).remote_state == Delivery.ACCEPTED
    assert queue.capacity_left() == 0
    assert sender.credit == 0


def _data_message(size: int) -> bytes:
    from translators.section_scan import SectionCode, encode_binary_section

    return encode_binary_section(SectionCode.DATA, b"y" * size)


def _sized(size: int):
    from gateway.broker.message import Encoding, MessageContainer

    return MessageContainer(Encoding.AMQP10, _data_message(size), size=size)


# ------------------------------------------------------------------ modified keeps every section

def _sections_message() -> bytes:
    """annotations, properties, two data sections and a footer, built by hand (proton's
    Message has no footer and folds data sections)."""
    from proton import Data, Described, symbol, ulong

    from translators.section_scan import SectionCode, encode_binary_section

    def described(code, value) -> bytes:
        data = Data()
        data.put_object(Described(ulong(code), value))
        return bytes(data.encode())

    return (described(SectionCode.MESSAGE_ANNOTATIONS, {symbol("x-opt-origin"): "sender"})
            + described(SectionCode.PROPERTIES, ["m-1"])
            + encode_binary_section(SectionCode.DATA, b"first part")
            + encode_binary_section(SectionCode.DATA, b"second part")
            + described(SectionCode.FOOTER, {symbol("x-opt-signature"): "sig"}))


def test_modified_annotations_keep_every_other_section(connect):
    from translators.amqp10_sections import decode_sections
    from translators.section_scan import SectionCode

    pump = connect()
    original = _sections_message()
    pump.send(pump.sender("/queue/q1"), original)
    receiver = pump.receiver("/queue/q1", credit=1)
    [(delivery, data)] = pump.take(receiver)
    assert data == _first_delivery(original)
    pump.settle(delivery, Delivery.MODIFIED, failed=True, annotations={"x-opt-why": "retry"})
    receiver.flow(1)
    pump.pump()
    [(_, again)] = pump.take(receiver)
    sections = decode_sections(again)
    assert [code for code, _ in sections] == [
        SectionCode.HEADER, SectionCode.MESSAGE_ANNOTATIONS, SectionCode.PROPERTIES,
        SectionCode.DATA, SectionCode.DATA, SectionCode.FOOTER]
    assert sections[0][1][4] == 1  # delivery-count
    assert sections[1][1] == {"x-opt-origin": "sender", "x-exchange": "", "x-routing-key": "q1",
                              "x-opt-why": "retry"}  # merged
    # everything after the annotations is the sender's bytes
    tail = original[original.index(b"\x00\x53\x73"):]
    assert again.endswith(tail)


# ------------------------------------------------------------------ a declare waits for the store

def _stored_pump(store, authenticator):
    broker = Broker(container_id="gateway-test", store=store)
    return Amqp10Pump(engine_factory(broker, authenticator)).open(), broker


def _commit(store, loop, pump) -> None:
    done: list = []
    store.after_commit(done.append)
    store.flush()
    loop.run_until(lambda: bool(done))
    pump.pump()


@pytest.mark.parametrize("role", ["sender", "receiver"])
def test_an_attach_that_declares_a_durable_queue_is_answered_once_it_is_saved(store, loop, authenticator,
                                                                              tmp_path, role):
    pump, broker = _stored_pump(store, authenticator)
    link = getattr(pump, role)("/queue/made", durable=True)
    assert broker.vhost("/").queue("made").durable  # declared at once...
    assert not link.state & Endpoint.REMOTE_ACTIVE  # ...but not attached before its commit
    _commit(store, loop, pump)
    assert link.state & Endpoint.REMOTE_ACTIVE and link.remote_condition is None
    db = sqlite3.connect(str(tmp_path / "store.db"))
    assert db.execute("SELECT name FROM queues").fetchall() == [("made",)]
    if role == "sender":
        assert link.credit == INCOMING_CREDIT
        assert pump.send(link, encode_message("m")).remote_state == Delivery.ACCEPTED
    # an existing queue, or a transient one, is attached at once
    again = getattr(pump, role)("/queue/made", name="again", durable=True)
    transient = getattr(pump, role)("/queue/plain", name="plain")
    assert again.state & Endpoint.REMOTE_ACTIVE and transient.state & Endpoint.REMOTE_ACTIVE


def test_a_failed_commit_refuses_the_attach_naming_the_problem(store, loop, authenticator):
    pump, _ = _stored_pump(store, authenticator)
    real = store.commit_thread.execute

    def full(ops):
        real(ops)
        raise sqlite3.OperationalError("database or disk is full")

    store.commit_thread.execute = full
    link = pump.sender("/queue/made", durable=True)
    _commit_failed: list = []
    store.after_commit(_commit_failed.append)
    store.flush()
    loop.run_until(lambda: bool(_commit_failed))
    pump.pump()
    assert link.state & Endpoint.REMOTE_CLOSED
    assert link.remote_condition.name == "amqp:resource-limit-exceeded"
    assert link.remote_condition.description.startswith(
        "the queue declared for address '/queue/made' is in effect but not saved: store write failed: "
        "database or disk is full")


def test_a_link_detached_before_its_queue_is_saved_is_closed_cleanly(store, loop, authenticator):
    pump, broker = _stored_pump(store, authenticator)
    link = pump.receiver("/queue/made", durable=True, credit=5)
    link.close()
    pump.pump()
    _commit(store, loop, pump)
    assert link.state & Endpoint.REMOTE_CLOSED  # our attach, then our detach
    assert broker.vhost("/").queue("made").consumer_count == 0  # never became a consumer
