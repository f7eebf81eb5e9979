"""A 1.0 client that sends past the credit it was granted, over a real socket: the
gateway detaches the link with ``amqp:link:transfer-limit-exceeded`` (spec 2.6.7), takes
nothing of the transfer beyond the credit, and keeps serving the connection. (Before,
the transfer was taken and proton's credit count went negative.)

The credit is kept small and fixed by a ``reject-publish`` queue of two: the gateway grants
the room left, so after two messages the client has none; proton's own sender then holds
a third, and the test writes it by hand."""
from __future__ import annotations

import socket

import pytest
from proton import Delivery, Message, uint

from gateway.amqp10.conditions import ErrorCondition
from tests.support.amqp10_socket_client import SocketClient, amqp_frame
from tests.support.cross_protocol_clients import TIMEOUT, unique

pytestmark = pytest.mark.integration

TRANSFER = 0x14


def _send(client: SocketClient, sender, body: str) -> Delivery:
    delivery = sender.delivery(body.encode())
    sender.send(Message(body=body).encode())
    sender.advance()
    client.pump(lambda: bool(delivery.remote_state))
    return delivery


def test_a_transfer_past_the_credit_is_a_transfer_limit_exceeded_link_error(gateway, channel):
    queue = unique("two")
    channel.queue_declare(queue, arguments={"x-max-length": 2, "x-overflow": "reject-publish"})
    client = SocketClient(socket.create_connection(("127.0.0.1", gateway.amqp_port), timeout=TIMEOUT)).open()
    try:
        session = client.connection.session()
        session.open()
        sender = session.sender("over-credit")
        sender.target.address = f"/queue/{queue}"
        sender.open()
        client.pump(lambda: sender.credit == 2)
        for body in ("one", "two"):
            assert _send(client, sender, body).remote_state == Delivery.ACCEPTED
        assert sender.credit == 0  # the queue is full: no more credit
        # the third transfer, past the credit: on the session's channel and the link's
        # handle (both the first: 0), with the next delivery id
        client.write_raw(amqp_frame(TRANSFER, [uint(0), uint(2), b"three", uint(0), False],
                                    payload=Message(body="three").encode()))
        client.pump(lambda: bool(sender.state & sender.REMOTE_CLOSED))
        condition = sender.remote_condition
        assert condition is not None and condition.name == ErrorCondition.TRANSFER_LIMIT_EXCEEDED.value
        assert "beyond the link credit" in condition.description
        assert channel.queue_declare(queue, passive=True).method.message_count == 2
        # the connection goes on: another link on it attaches
        again = session.sender("after")
        again.target.address = f"/queue/{queue}"
        again.open()
        client.pump(lambda: bool(again.state & again.REMOTE_ACTIVE))
        assert client.connection.state & client.connection.REMOTE_ACTIVE
    finally:
        client.sock.close()
        channel.queue_delete(queue)
