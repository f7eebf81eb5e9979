"""Proton's private layer (``proton_calls``) against the installed python-qpid-proton: each
name the gateway relies on is there and does what the engine and links expect of it.

Two proton engines (a client and a server transport) pumped in memory, without our
engine: if a proton release moves any of these, this file says which one.
"""
from __future__ import annotations

import pytest
from proton import Collector, Connection, Delivery, Event, LinkException, Message, Transport, TransportException

from gateway.amqp10 import proton_calls as pc


class _Pair:
    """A client and a server proton connection with a collector each, bytes moved by
    :meth:`pump`."""

    def __init__(self) -> None:
        self.sides = []
        for mode in (Transport.CLIENT, Transport.SERVER):
            transport, connection, collector = Transport(mode), Connection(), Collector()
            connection.collect(collector)
            transport.bind(connection)
            self.sides.append((transport, connection, collector))

    def pump(self) -> None:
        moved = True
        while moved:
            moved = False
            for (out, _, _), (into, _, _) in (self.sides, self.sides[::-1]):
                pending = out.pending()
                if pending > 0:
                    into.push(bytes(out.peek(pending)))
                    out.pop(pending)
                    moved = True

    def events(self, side: int) -> list[tuple[int, object]]:
        """(type number, C event's delivery or link) of the side's collected events, read
        and popped through ``proton_calls`` alone."""
        impl = pc.c_pointer(self.sides[side][2])
        seen = []
        while True:
            ev = pc.pn_collector_peek(impl)
            if ev == pc.NULL:
                return seen
            etype = pc.pn_event_type(ev)
            if etype == pc.PN_DELIVERY:
                seen.append((etype, pc.pn_event_delivery(ev)))
            elif etype == pc.PN_LINK_FLOW:
                seen.append((etype, pc.pn_event_link(ev)))
            else:
                seen.append((etype, None))
            pc.pn_collector_pop(impl)


@pytest.fixture
def linked():
    """(pair, client sender, server receiver), the link open both ways."""
    pair = _Pair()
    client = pair.sides[0][1]
    client.open()
    sender = client.session().sender("s")
    sender.session.open()
    sender.target.address = "q"
    sender.open()
    pair.pump()
    server = pair.sides[1][1]
    server.open()
    server.session_head(0).open()
    receiver = server.link_head(0)
    receiver.open()
    pair.pump()
    pair.events(0), pair.events(1)
    return pair, sender, receiver


def test_event_numbers_are_proton_events():
    assert pc.PN_DELIVERY == Event.DELIVERY.number and pc.PN_LINK_FLOW == Event.LINK_FLOW.number
    assert pc.PN_TRANSPORT == Event.TRANSPORT.number


def test_credit_flow_and_a_transfer_through_the_c_calls(linked):
    pair, sender, receiver = linked
    receiver.flow(3)
    pair.pump()
    sender_impl = pc.c_pointer(sender)
    assert pc.pn_link_credit(sender_impl) == 3
    assert (pc.PN_LINK_FLOW, sender_impl) in pair.events(0)  # C links compare by address

    encoded = Message(body="hello").encode()
    d = pc.lib.pn_delivery(sender_impl, (3, pc.ffi.from_buffer(b"t-1")))
    header, rest = encoded[:3], 3  # any split: the parts are sent into one delivery
    assert pc.send_parts(sender_impl, header, encoded, rest) == len(encoded)
    pc.pn_link_advance(sender_impl)
    pair.pump()

    [(etype, got)] = [e for e in pair.events(1) if e[0] == pc.PN_DELIVERY]
    assert pc.pn_delivery_link(got) == pc.c_pointer(receiver)
    assert pc.pn_delivery_tag(got) == "t-1"   # the tag as text (a forwarder's entry id)
    assert not pc.pn_delivery_partial(got) and not pc.pn_delivery_aborted(got)
    pending = pc.pn_delivery_pending(got)
    chunk = bytearray(pending)
    assert pc.lib.pn_link_recv(pc.c_pointer(receiver), pc.ffi.from_buffer(chunk), pending) == pending
    assert bytes(chunk) == encoded
    pc.pn_link_advance(pc.c_pointer(receiver))
    pc.pn_delivery_update(got, Delivery.ACCEPTED)
    pc.pn_delivery_settle(got)
    pair.pump()

    [(_, settled)] = [e for e in pair.events(0) if e[0] == pc.PN_DELIVERY]
    assert settled == d
    assert pc.pn_delivery_updated(d) and pc.pn_delivery_settled(d)
    assert pc.pn_delivery_remote_state(d) == Delivery.ACCEPTED
    pc.pn_delivery_settle(d)


@pytest.mark.parametrize("body", [pc.JOIN_MAX, pc.JOIN_MAX + 1], ids=["joined", "two-sends"])
def test_a_header_and_a_body_either_side_of_join_max_arrive_as_one_delivery(linked, body):
    pair, sender, receiver = linked
    receiver.flow(1)
    pair.pump()
    impl = pc.c_pointer(sender)
    data = b"old-header" + bytes(range(256)) * (body // 256) + b"\x07" * (body % 256)
    pc.lib.pn_delivery(impl, (1, pc.ffi.from_buffer(b"1")))
    assert pc.send_parts(impl, b"new", data, 10) == 3 + body
    pc.pn_link_advance(impl)
    pair.pump()
    [(_, got)] = [e for e in pair.events(1) if e[0] == pc.PN_DELIVERY]
    chunk = bytearray(pc.pn_delivery_pending(got))
    pc.lib.pn_link_recv(pc.c_pointer(receiver), pc.ffi.from_buffer(chunk), len(chunk))
    assert bytes(chunk) == b"new" + data[10:]


def test_a_send_without_header_sends_the_data_whole(linked):
    pair, sender, receiver = linked
    receiver.flow(1)
    pair.pump()
    impl = pc.c_pointer(sender)
    pc.lib.pn_delivery(impl, (1, pc.ffi.from_buffer(b"1")))
    assert pc.send_parts(impl, b"", b"whole", 0) == 5


def test_a_negative_result_raises_proton_s_link_exception(linked):
    _, sender, receiver = linked
    chunk = bytearray(8)
    got = pc.lib.pn_link_recv(pc.c_pointer(receiver), pc.ffi.from_buffer(chunk), 8)
    assert got < 0 and got != pc.PN_EOS  # no current delivery: an error code
    with pytest.raises(LinkException):
        pc.raise_proton_error(receiver, got)


def _opened_client(container: str) -> Transport:
    """A client transport whose connection is open: its header and ``open`` pending."""
    transport, connection = Transport(Transport.CLIENT), Connection()
    connection.container = container
    transport.bind(connection)
    connection.open()
    return transport


def test_transport_drain_takes_what_pending_peek_and_pop_take():
    drained, peeked = _opened_client("c"), _opened_client("c")
    out = bytearray(b"before:")
    assert pc.transport_drain(drained, out) == 0 and drained.pending() == 0
    expected = bytes(peeked.peek(peeked.pending()))
    assert expected.startswith(b"AMQP") and bytes(out) == b"before:" + expected


def test_transport_drain_says_the_head_closed():
    transport = _opened_client("c")
    transport.close_head()
    assert pc.transport_drain(transport, bytearray()) < 0


def test_transport_push_takes_the_input_from_an_offset():
    server = Transport(Transport.SERVER)
    server.bind(Connection())
    client = _opened_client("c")
    data = b"junk" + bytes(client.peek(client.pending()))
    assert pc.transport_push(server, data, 4) == len(data)
    assert server.condition is None and pc.transport_capacity(server) > 0


def test_transport_push_into_a_closed_tail_takes_nothing():
    server = Transport(Transport.SERVER)
    server.bind(Connection())
    server.close_tail()
    assert pc.transport_capacity(server) < 0
    assert pc.transport_push(server, b"AMQP\x00\x01\x00\x00", 0) == -1


def test_a_negative_transport_result_raises_proton_s_exception():
    transport = Transport(Transport.SERVER)
    with pytest.raises(TransportException) as raised:
        pc.raise_proton_error(transport, -2)
    assert "[-2]" in str(raised.value)
