"""1.0 links record message events in ``broker.ledger`` (transfer in, route, deliver, outcome)."""
from __future__ import annotations

import pytest
from proton import Delivery

from gateway.broker import UnroutablePolicy
from tests.support.amqp10_pump import encode_message
from tests.support.ledger_capture import LedgerCapture


@pytest.fixture()
def ledger(broker):
    broker.use_ledger(LedgerCapture())
    return broker.ledger


def _send(pump, target, count=1, **props):
    sender = pump.sender(target, name=f"s-{target}")
    return [pump.send(sender, encode_message(i, **props)) for i in range(count)]


def test_transfer_is_received_then_routed(connect, ledger):
    pump = connect()
    [delivery] = _send(pump, "/queue/q1", id="m-1", correlation_id="c-1")
    assert delivery.remote_state == Delivery.ACCEPTED
    assert ledger.kinds() == ["received", "routed"]
    received, routed = ledger.events
    assert (received["proto_in"].value, received["address"], received["link"]) == ("1.0", "/queue/q1", "s-/queue/q1")
    assert (received["message_id"], received["correlation_id"], received["user"]) == ("m-1", "c-1", "guest")
    assert received["connection"] and received["connection"] == routed["connection"]
    assert received["gateway_id"] and received["gateway_id"] == routed["gateway_id"]
    assert routed["routed_to"] == ("q1",) and routed["routing_key"] == "q1"


@pytest.mark.parametrize("policy, state, reason", [
    (UnroutablePolicy.ACCEPT, Delivery.ACCEPTED, None),
    (UnroutablePolicy.RELEASE, Delivery.RELEASED, "released"),
    (UnroutablePolicy.REJECT, Delivery.REJECTED, "no route for routing key 'nowhere' from "
                                                 "exchange 'amq.direct' in vhost '/'"),
])
def test_unroutable_transfer_is_recorded_whatever_its_outcome(connect, ledger, policy, state,
                                                              reason):
    pump = connect(engine=dict(unroutable=policy))
    [delivery] = _send(pump, "/exchange/amq.direct/nowhere")
    assert delivery.remote_state == state
    assert ledger.kinds() == ["received", "unroutable"]
    assert ledger.events[1]["reason"] == reason


def test_wrong_user_id_is_a_lone_refusal(connect, ledger):
    pump = connect()
    [delivery] = _send(pump, "/queue/q1", user_id=b"mallory")
    assert delivery.remote_state == Delivery.REJECTED
    assert ledger.kinds() == ["refused"]
    assert "mallory" in ledger.events[0]["reason"]


def test_relay_to_unknown_address_is_received_then_refused(connect, ledger):
    pump = connect()
    [delivery] = _send(pump, None, address="/amq/queue/nope")
    assert delivery.remote_state == Delivery.REJECTED
    assert ledger.kinds() == ["received", "refused"]
    assert ledger.events[0]["address"] == "/amq/queue/nope"


@pytest.mark.parametrize("state, outcome", [
    (Delivery.ACCEPTED, "accepted"),
    (Delivery.REJECTED, "rejected"),
    (Delivery.RELEASED, "released"),
    (Delivery.MODIFIED, "modified"),
])
def test_outcomes_are_settled_events(connect, ledger, state, outcome):
    pump = connect()
    _send(pump, "/queue/q1")
    receiver = pump.receiver("/queue/q1", name="r", credit=1)
    [(delivery, _)] = pump.take(receiver)
    pump.settle(delivery, state)
    delivered, settled = ledger.of("delivered")[0], ledger.of("settled")[0]
    assert (delivered["proto_in"].value, delivered["proto_out"].value) == ("1.0", "1.0")
    assert (delivered["queue"], delivered["link"], delivered["delivery_count"]) == ("q1", "r", 0)
    assert settled["outcome"].value == outcome
    assert settled["received_at"] == 0.0


def test_presettled_delivery_settles_accepted_at_once(connect, ledger):
    pump = connect()
    _send(pump, "/queue/q1")
    receiver = pump.receiver("/queue/q1", name="r", credit=1, settled=True)
    pump.take(receiver)
    assert ledger.kinds()[2:] == ["delivered", "settled"]
    assert ledger.of("settled")[0]["outcome"].value == "accepted"


def test_detach_releases_unsettled(connect, ledger):
    pump = connect()
    _send(pump, "/queue/q1")
    receiver = pump.receiver("/queue/q1", name="r", credit=1)
    pump.take(receiver)
    receiver.close()
    pump.pump()
    settled = ledger.of("settled")
    assert [(e["outcome"].value, e["reason"]) for e in settled] == [("released", "link closed")]


def test_a_browsed_copy_and_the_acquired_delivery_are_each_recorded_on_their_own_link(connect, broker):
    from gateway.ledger import Ledger
    from tests.support.ledger_files import events_of_lines

    broker.use_ledger(Ledger(container_id="gw"))
    pump = connect()
    _send(pump, "/queue/q1")
    browser = pump.receiver("/queue/q1", name="browser", credit=1, copy=True)
    assert len(pump.take(browser)) == 1
    consumer = pump.receiver("/queue/q1", name="consumer", credit=1)
    [(delivery, _)] = pump.take(consumer)
    pump.settle(delivery, Delivery.ACCEPTED)
    events = [(r["event"], r.get("link"), r.get("outcome"))
              for r in events_of_lines(broker.ledger.take_lines())]
    assert events == [("received", "s-/queue/q1", None), ("routed", "s-/queue/q1", None),
                      ("delivered", "browser", None), ("delivered", "consumer", None),
                      ("settled", "consumer", "accepted")]


def test_a_delivery_shipped_after_its_publish_is_written_with_the_publishs_fields(connect, broker):
    from gateway.ledger import Ledger
    from tests.support.ledger_files import events_of_lines

    ledger = Ledger(container_id="gw")
    broker.use_ledger(ledger)
    pump = connect()
    _send(pump, "/queue/q1", id="m-1")
    shipped = ledger.take_lines()
    receiver = pump.receiver("/queue/q1", name="r", credit=1)
    [(delivery, _)] = pump.take(receiver)
    pump.settle(delivery, Delivery.ACCEPTED)
    later = ledger.take_lines()
    assert b'"m-1"' not in later, "the delivery refers to its message by gateway id"
    written = events_of_lines(shipped + later)
    [received] = [x for x in written if x["event"] == "received"]
    for event in ("delivered", "settled"):
        [line] = [x for x in written if x["event"] == event]
        assert (line["message_id"], line["proto_in"], line["proto_out"], line["size"],
                line["gateway_id"]) == ("m-1", "1.0", "1.0", received["size"],
                                        received["gateway_id"])


def test_a_settlement_long_after_its_delivery_keeps_the_messages_fields(connect, broker):
    """As for 0-9-1: the settlement comes seconds after the delivery, with other
    messages' records shipped meanwhile; it keeps its message's fields."""
    from gateway.ledger import Ledger
    from tests.support.ledger_files import events_of_lines

    broker.vhost("/").declare_queue("q2")
    ledger = Ledger(container_id="gw")
    broker.use_ledger(ledger)
    pump = connect(now=1000.0, engine={"now": 1000.0})
    receiver = pump.receiver("/queue/q1", name="r", credit=1)
    _send(pump, "/queue/q1", id="m-1")
    [(delivery, _)] = pump.take(receiver)
    shipped = ledger.take_lines()
    for _ in range(4):  # later publishes
        pump.advance(2.0)
        _send(pump, "/queue/q2")
        shipped += ledger.take_lines()
    pump.settle(delivery, Delivery.ACCEPTED)
    [settled] = [x for x in events_of_lines(shipped + ledger.take_lines())
                 if x["event"] == "settled"]
    assert (settled["proto_in"], settled["message_id"], settled["outcome"]) == \
        ("1.0", "m-1", "accepted")
    assert settled["latency_us"] == 8_000_000


@pytest.mark.parametrize("settled", [False, True])
def test_a_delivery_caused_by_another_connection_has_the_publish_time(connect, ledger, settled):
    """The consumer's connection last ran at 10.0; a transfer at 50.0 on another
    connection is delivered at 50.0, not at 10.0 (before its receipt)."""
    consumer = connect(now=10.0, engine={"now": 10.0})
    receiver = consumer.receiver("/queue/q1", name="r", credit=1, settled=settled)
    publisher = connect(now=50.0, engine={"now": 50.0})
    _send(publisher, "/queue/q1")
    assert sorted((e.event, e.now) for e in ledger.events) == sorted([
        ("received", 50.0), ("routed", 50.0), ("delivered", 50.0)] + (
        [("settled", 50.0)] if settled else []))
    consumer.pump()
    assert len(consumer.take(receiver)) == 1
