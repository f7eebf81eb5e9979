"""``ProtonTransport``: input pushed in pieces of proton's capacity, output drained whole."""
from __future__ import annotations

from proton import Connection, Event, Transport

from gateway.amqp10.proton_transport import ProtonTransport


def _server() -> ProtonTransport:
    return ProtonTransport(container_id="server", max_frame_size=65536, channel_max=16, idle_timeout=0)


def _client_sending(server: ProtonTransport, transfers: int) -> bytes:
    """A client's frames up to ``transfers`` pre-settled transfers of 100 B on a link that
    ``server`` gave credit for (the handshake through ``server``); returns the transfers'
    bytes, not yet pushed."""
    transport, connection = Transport(Transport.CLIENT), Connection()
    transport.bind(connection)
    connection.open()
    session = connection.session()
    session.open()
    sender = session.sender("s")
    sender.target.address = "q"
    sender.open()
    assert server.push(bytes(transport.peek(transport.pending()))) is True
    transport.pop(transport.pending())
    server.connection.open()
    while server.collector.peek() is not None:
        event = server.collector.peek()
        if event.type == Event.SESSION_REMOTE_OPEN:
            event.session.open()
        elif event.type == Event.LINK_REMOTE_OPEN:
            event.link.open()
            event.link.flow(transfers)
        server.collector.pop()
    back = bytearray()
    server.drain(back)
    transport.push(bytes(back))
    for i in range(transfers):
        delivery = sender.delivery(b"%d" % i)
        sender.send(b"x" * 100)
        sender.advance()
        delivery.settle()
    out = b""
    while transport.pending() > 0:  # proton encodes the next frames after a pop
        out += bytes(transport.peek(transport.pending()))
        transport.pop(transport.pending())
    return out


def _queued(server: ProtonTransport) -> int:
    """Transfers the server's link holds."""
    return server.connection.link_head(0).queued


def _pushed_by_proton_s_api(data: bytes) -> int:
    """What a server fed ``data`` through ``Transport.capacity``/``push`` holds."""
    server = _server()
    again = _client_sending(server, 300)
    assert again == data  # the same client, the same bytes
    at = 0
    while at < len(data):
        room = server.transport.capacity()
        server.transport.push(data[at:at + room])
        at += room
    return _queued(server)


def test_input_larger_than_proton_s_capacity_goes_in_whole():
    server = _server()
    data = _client_sending(server, 300)
    assert len(data) > server.transport.capacity()  # more than one push's worth
    assert server.push(data) is True
    assert not server.input_waits and server.transport.condition is None
    assert _queued(server) > 100 and _queued(server) == _pushed_by_proton_s_api(data)


def test_input_in_two_reads_split_inside_a_frame():
    server = _server()
    data = _client_sending(server, 20)
    assert server.push(data[:1001]) is True and server.push(data[1001:]) is True
    assert _queued(server) == 20


def test_input_after_the_tail_closed_is_dropped():
    server = _server()
    data = _client_sending(server, 1)
    server.transport.close_tail()
    assert server.push(data) is None


def test_output_is_drained_whole_and_the_closed_head_said():
    server = _server()
    _client_sending(server, 0)
    assert server.drain(bytearray()) is False  # open, nothing more to say for now
    server.connection.close()
    out = bytearray()
    assert server.drain(out) is True  # our close frame, then the head closed
    assert bytes(out[4:]).startswith(b"\x02\x00\x00\x00\x00S\x18")  # an AMQP frame: close (0x18)
