"""Where a forwarded message goes at a 0-9-1 partner: our address grammar read as a target
there (the whole connection against RabbitMQ: tests/integration/test_forward_amqp091.py)."""
from __future__ import annotations

import pytest

from addressing import AddressError, LocalPublish, SubjectPublish
from gateway.amqp091.outbound_client import partner_route


@pytest.mark.parametrize("address, route", [
    ("/exchange/in/orders", LocalPublish("in", "orders")),
    ("/exchanges/in/orders", LocalPublish("in", "orders")),
    ("/queue/orders", LocalPublish("", "orders")),
    ("/queues/orders", LocalPublish("", "orders")),
    ("orders", LocalPublish("", "orders")),
    ("/topic/a.b", LocalPublish("amq.topic", "a.b")),
    ("/exchange/in", SubjectPublish("in")),
])
def test_exchange_and_queue_addresses(address, route):
    assert partner_route(address) == route


@pytest.mark.parametrize("address, text", [
    ("/exchange/in/a/b", "/exchange/in/a/b"),
    ("orders@elsewhere", "no service 'amqp$transfer'"),
    ("amqp$transfer", "no service 'amqp$transfer'"),
])
def test_what_a_0_9_1_broker_cannot_take_is_refused_with_the_reason(address, text):
    with pytest.raises(AddressError) as caught:
        partner_route(address)
    assert text in caught.value.text


# ---- the outbound connection's mapping of the client's events, without sockets -------------

from gateway.amqp091 import methods as m  # noqa: E402
from gateway.amqp091.outbound_client import WINDOW_BYTES, WINDOW_MAX, OutboundAmqp091  # noqa: E402
from gateway.forward.outbound import ForwardOutcome, OutboundMessage, RemoteSettings  # noqa: E402
from tests.support.frame_builder import ClientFrames, methods_of, parse_frames  # noqa: E402
from tests.support.minimal_forwarder import MinimalForwarder, container_091  # noqa: E402

F = ClientFrames()


def _connected(credit: int = 3) -> tuple[OutboundAmqp091, MinimalForwarder]:
    forwarder = MinimalForwarder()
    remote = RemoteSettings(container="partner", host="mq", kind="amqp091", address="/queue/{node}",
                            user="org-a", credit=credit)
    engine = OutboundAmqp091(remote, "pw", "org-a", forwarder)
    forwarder.connection = engine
    engine.tick(50.0)
    engine.receive_data(F.method(0, m.ConnectionStart(version_major=0, version_minor=9, server_properties={},
                                                      mechanisms=b"PLAIN", locales=b"en_US")))
    engine.receive_data(F.method(0, m.ConnectionTune(channel_max=0, frame_max=131072, heartbeat=60)))
    engine.receive_data(F.method(0, m.ConnectionOpenOk()))
    engine.receive_data(F.method(1, m.ChannelOpenOk()))
    engine.receive_data(F.method(1, m.ConfirmSelectOk()))
    engine.data_to_send()
    return engine, forwarder


def test_up_credit_settlements_and_refusals_reach_the_forwarder():
    engine, forwarder = _connected(credit=3)
    assert forwarder.ups == 1 and forwarder.available == 3
    forwarder.submit(OutboundMessage(7, "orders", "/queue/orders", container_091(b"\x00\x00", b"a")),
                     OutboundMessage(8, "x", "/exchange/a/b/c", container_091(b"\x00\x00", b"b")))
    publish = methods_of(parse_frames(engine.data_to_send()))[0]
    assert (publish.exchange, publish.routing_key, publish.mandatory) == ("", "orders", True)
    assert 8 not in forwarder.final             # refused on the next tick, not inside send
    engine.tick(51.0)
    assert forwarder.final[8].outcome is ForwardOutcome.REJECTED and "/exchange/a/b/c" in forwarder.final[8].error
    engine.receive_data(F.method(1, m.BasicAck(delivery_tag=1, multiple=False)))
    assert forwarder.outcome(7) is ForwardOutcome.ACCEPTED and forwarder.available == 3
    engine.receive_data(F.method(0, m.ConnectionBlocked(reason="disk")))
    assert forwarder.available == 0
    engine.report_down("connection to mq:5672 lost: reset")
    engine.receive_eof()
    assert forwarder.downs == ["remote 'partner' (mq:5672): connection to mq:5672 lost: reset"]


def test_a_close_of_ours_is_not_reported_as_down():
    engine, forwarder = _connected()
    engine.close("shutdown")
    assert type(methods_of(parse_frames(engine.data_to_send()))[0]) is m.ConnectionClose
    engine.receive_data(F.method(0, m.ConnectionCloseOk()))
    assert engine.closed and forwarder.downs == []


def _fill(engine: OutboundAmqp091, forwarder: MinimalForwarder, first: int, count: int,
          body: bytes = b"m") -> None:
    forwarder.submit(*(OutboundMessage(i, "orders", "/queue/orders", container_091(b"\x00\x00", body))
                       for i in range(first, first + count)))
    engine.data_to_send()


def test_the_window_grows_by_what_a_confirm_accepts_while_it_was_full_up_to_its_ceiling():
    engine, forwarder = _connected(credit=2)
    _fill(engine, forwarder, 1, 5)
    assert engine.client.unconfirmed == 2 and forwarder.available == 0    # the window (2) is full
    engine.receive_data(F.method(1, m.BasicAck(delivery_tag=2, multiple=True)))
    assert engine.window == 4 and engine.client.unconfirmed == 3          # 2 more than before went out
    engine.receive_data(F.method(1, m.BasicAck(delivery_tag=3, multiple=False)))
    assert engine.window == 4                                             # 3 of 4 in flight: not full
    engine, forwarder = _connected(credit=WINDOW_MAX - 1)
    _fill(engine, forwarder, 1, WINDOW_MAX + 100)
    engine.receive_data(F.method(1, m.BasicAck(delivery_tag=100, multiple=True)))
    assert engine.window == WINDOW_MAX and engine.client.unconfirmed == WINDOW_MAX


def test_a_new_channel_starts_again_from_the_credit_setting():
    engine, forwarder = _connected(credit=2)
    _fill(engine, forwarder, 1, 2)
    engine.receive_data(F.method(1, m.BasicAck(delivery_tag=2, multiple=True)))
    assert engine.window == 4
    engine.receive_data(F.method(1, m.ChannelClose(reply_code=406, reply_text="PRECONDITION_FAILED",
                                                   class_id=0, method_id=0)))
    engine.receive_data(F.method(2, m.ChannelOpenOk()) + F.method(2, m.ConfirmSelectOk()))
    assert forwarder.ups == 2 and engine.window == 2 and forwarder.available == 2


def test_the_window_does_not_grow_past_its_octets_for_large_bodies():
    engine, forwarder = _connected(credit=4)
    _fill(engine, forwarder, 1, 8, body=b"x" * (WINDOW_BYTES // 4))       # 4 of these: the octets' limit
    engine.receive_data(F.method(1, m.BasicAck(delivery_tag=2, multiple=True)))
    assert engine.window == 4 and forwarder.available == 0                # 2 more sent, no more room
    engine, forwarder = _connected(credit=4)
    _fill(engine, forwarder, 1, 8, body=b"x" * (WINDOW_BYTES // 8))
    engine.receive_data(F.method(1, m.BasicAck(delivery_tag=2, multiple=True)))
    assert engine.window == 6
