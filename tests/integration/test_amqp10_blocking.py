"""The real gateway driven by proton's blocking client over real sockets.

No 0-9-1 client declares queues here: queues are the 1.0 client's own (dynamic sources,
which are server-named queues usable under every queue address form) and exchange
sources (temporary queues bound to ``amq.topic``/``amq.direct``).
"""
from __future__ import annotations

import uuid

import pytest
from proton import Message, symbol
from proton.reactor import Copy
from proton import ConnectionException
from proton.utils import BlockingConnection, LinkDetached, SendException

TIMEOUT = 5


def _connect(gateway, user="guest", password="guest", vhost="vhost:/") -> BlockingConnection:
    return BlockingConnection(f"amqp://127.0.0.1:{gateway.amqp_port}", user=user,
                              password=password, virtual_host=vhost, allowed_mechs="PLAIN",
                              sasl_enabled=True, allow_insecure_mechs=True, timeout=TIMEOUT)


@pytest.fixture()
def conn(gateway):
    connection = _connect(gateway)
    yield connection
    connection.close()


def _queue(conn):
    """A fresh server-named queue of this connection: (receiver with no credit, name)."""
    receiver = conn.create_receiver(None, dynamic=True, credit=0)
    address = receiver.link.remote_source.address
    assert address.startswith("/queue/amq.gen-")
    return receiver, address[len("/queue/"):]


def test_sasl_plain_success_for_both_users(gateway):
    for user, password in (("guest", "guest"), ("alice", "secret")):
        connection = _connect(gateway, user, password)
        assert connection.conn.remote_container
        connection.close()


def test_sasl_wrong_password_is_refused(gateway):
    with pytest.raises(ConnectionException) as info:
        _connect(gateway, "alice", "wrong")
    assert "unauthorized-access" in str(info.value) or "Authentication failed" in str(info.value)


def test_unknown_vhost_is_not_found(gateway):
    with pytest.raises(ConnectionException) as info:
        _connect(gateway, vhost="vhost:no-such-vhost")
    assert "amqp:not-found" in str(info.value)
    assert "no-such-vhost" in str(info.value)


@pytest.mark.parametrize("form", ["/queue/{q}", "/amq/queue/{q}", "{q}", "/queues/{q}", "{q}@{c}"])
def test_queue_address_forms(conn, form):
    container = conn.conn.remote_container
    if "@" in form and "@" in container:
        pytest.skip(f"container id {container!r} holds '@': node@container cannot name it")
    receiver, name = _queue(conn)
    address = form.format(q=name, c=container)
    sender = conn.create_sender(address)
    sender.send(Message(body=form))
    receiver.flow(1)
    assert receiver.receive(timeout=TIMEOUT).body == form
    receiver.accept()


@pytest.mark.parametrize("source, target, subject", [
    ("/topic/orders.*", "/topic/orders.new", None),
    ("/exchange/amq.direct/k1", "/exchange/amq.direct/k1", None),
    ("/exchanges/amq.direct/k2", "/exchanges/amq.direct/k2", None),
    ("/exchange/amq.direct/k3", "/exchange/amq.direct", "k3"),
])
def test_exchange_address_forms(conn, source, target, subject):
    receiver = conn.create_receiver(source, credit=5)
    sender = conn.create_sender(target)
    sender.send(Message(body="routed", subject=subject))
    assert receiver.receive(timeout=TIMEOUT).body == "routed"
    receiver.accept()


@pytest.mark.parametrize("address", ["/queue/no-such-queue", "/exchange/no-such-exchange/rk"])
def test_unresolvable_target_is_not_found(conn, address):
    with pytest.raises(LinkDetached) as info:
        conn.create_sender(address)
    assert "amqp:not-found" in str(info.value)
    assert "no-such" in str(info.value)


def test_unresolvable_source_is_not_found(conn):
    with pytest.raises(LinkDetached) as info:
        conn.create_receiver("/queue/no-such-queue")
    assert "amqp:not-found" in str(info.value)


def test_invalid_address_is_invalid_field(conn):
    with pytest.raises(LinkDetached) as info:
        conn.create_sender("/bogus/form")
    assert "amqp:invalid-field" in str(info.value)


def test_request_response_with_dynamic_reply_queue(gateway, conn):
    service = conn.create_receiver("/topic/rpc.echo", credit=1)
    replies, name = _queue(conn)
    client = _connect(gateway)
    try:
        request = client.create_sender("/topic/rpc.echo")
        request.send(Message(body="ping", reply_to=f"/queue/{name}", correlation_id="c1"))
        got = service.receive(timeout=TIMEOUT)
        service.accept()
        relay = conn.create_sender(None)
        relay.send(Message(address=got.reply_to, body=got.body + "-pong",
                           correlation_id=got.correlation_id))
        replies.flow(1)
        answer = replies.receive(timeout=TIMEOUT)
        assert (answer.body, answer.correlation_id) == ("ping-pong", "c1")
        replies.accept()
    finally:
        client.close()
    replies.close()
    with pytest.raises(SendException):  # the reply queue went with its link
        conn.create_sender(None).send(Message(address=f"/queue/{name}", body="late"))


def test_outcomes_and_their_effect_on_the_queue(conn):
    receiver, name = _queue(conn)
    sender = conn.create_sender(f"/queue/{name}")
    for body in ("rejected", "released", "modified", "accepted"):
        sender.send(Message(body=body))
    receiver.flow(1)
    assert receiver.receive(timeout=TIMEOUT).body == "rejected"
    receiver.reject()  # no dead-letter exchange: discarded
    receiver.flow(1)
    first = receiver.receive(timeout=TIMEOUT)
    assert (first.body, first.delivery_count) == ("released", 0)
    receiver.release(delivered=False)  # back to the queue, not counted
    receiver.flow(1)
    again = receiver.receive(timeout=TIMEOUT)
    assert (again.body, again.delivery_count) == ("released", 0)
    receiver.accept()
    receiver.flow(1)
    modified = receiver.receive(timeout=TIMEOUT)
    assert modified.body == "modified"
    receiver.release(delivered=True)  # proton sends modified without delivery-failed
    receiver.flow(1)
    back = receiver.receive(timeout=TIMEOUT)
    assert (back.body, back.delivery_count) == ("modified", 0)
    receiver.accept()
    receiver.flow(1)
    assert receiver.receive(timeout=TIMEOUT).body == "accepted"
    receiver.accept()


def test_ten_mib_message_round_trip(conn):
    receiver, name = _queue(conn)
    body = uuid.uuid4().bytes * (10 * 1024 * 1024 // 16)
    conn.create_sender(f"/queue/{name}").send(Message(body=body))
    receiver.flow(1)
    got = receiver.receive(timeout=30)
    assert got.body == body
    receiver.accept()


def test_browse_then_consume(conn):
    receiver, name = _queue(conn)
    sender = conn.create_sender(f"/queue/{name}")
    for i in range(3):
        sender.send(Message(body=i))
    browser = conn.create_receiver(f"/queue/{name}", credit=10, options=Copy(), name="browser")
    assert [browser.receive(timeout=TIMEOUT).body for _ in range(3)] == [0, 1, 2]
    browser.close()
    receiver.flow(3)
    assert [receiver.receive(timeout=TIMEOUT).body for _ in range(3)] == [0, 1, 2]
    receiver.accept()


def test_link_loss_returns_unsettled_messages(conn):
    receiver, name = _queue(conn)
    browse_address = f"/queue/{name}"
    sender = conn.create_sender(browse_address)
    for i in range(4):
        sender.send(Message(body=i))
    # a second link of the same connection takes two and never settles them
    taker = conn.create_receiver(browse_address, credit=2, name="taker")
    taken = [taker.receive(timeout=TIMEOUT).body for _ in range(2)]
    assert taken == [0, 1]
    taker.close()  # link loss: both come back
    receiver.flow(4)
    assert sorted(receiver.receive(timeout=TIMEOUT).body for _ in range(4)) == [0, 1, 2, 3]
