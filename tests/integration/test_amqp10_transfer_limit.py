"""A 1.0 client that sends past the credit it was granted, over a real socket: the
gateway detaches the link with ``amqp:link:transfer-limit-exceeded`` (spec 2.6.7), takes
nothing of the transfer beyond the credit, and keeps serving the connection. (Before,
the transfer was taken and proton's credit count went negative.)

The credit is kept small and fixed by a ``reject-publish`` queue of two: the gateway grants
the room left, so after two messages the client has none; proton's own sender then holds
a third, and the test writes it by hand. The dropped transfer is in the ledger as refused
(the client sent it: the reconciliation report must count it)."""
from __future__ import annotations

import socket

import pytest
from proton import Delivery, Message, uint

from gateway.amqp10.conditions import ErrorCondition
from tests.support.amqp10_socket_client import SocketClient, amqp_frame
from tests.support.cross_protocol_clients import TIMEOUT, pika_channel, unique
from tests.support.gateway_process import default_config
from tests.support.ledger_files import read_events

pytestmark = pytest.mark.integration

TRANSFER = 0x14


def _send(client: SocketClient, sender, body: str) -> Delivery:
    delivery = sender.delivery(body.encode())
    sender.send(Message(body=body).encode())
    sender.advance()
    client.pump(lambda: bool(delivery.remote_state))
    return delivery


def _send_past_the_credit(gateway, channel) -> str:
    """Two transfers in, a third past the credit: the link error is checked, the queue
    holds two and the connection goes on; returns the queue's name."""
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
    return queue


def test_a_transfer_past_the_credit_is_a_transfer_limit_exceeded_link_error(gateway, channel):
    queue = _send_past_the_credit(gateway, channel)
    channel.queue_delete(queue)


def test_the_transfer_past_the_credit_is_in_the_ledger_as_refused(fresh_gateway, tmp_path):
    directory = str(tmp_path / "ledger")
    gw = fresh_gateway(config_text=default_config(
        extra=f"ledger:\n  directory: {directory}\n  flush_interval: 0.2\n"))
    connection, channel = pika_channel(gw)
    try:
        queue = _send_past_the_credit(gw, channel)
    finally:
        connection.close()
    assert gw.stop() == 0
    events = [e for e in read_events(directory) if e.get("address") == f"/queue/{queue}"]
    assert [e["event"] for e in events if e["event"] in ("received", "refused")] == [
        "received", "received", "refused"]
    [refused] = [e for e in events if e["event"] == "refused"]
    assert "beyond the link credit" in refused["reason"] and refused.get("gateway_id") is None
