"""The real gateway driven by proton's blocking client over real sockets.

Most queues are the 1.0 client's own (dynamic sources, which are server-named queues
usable under every queue address form) and exchange sources (temporary queues bound to
``amq.topic``/``amq.direct``). Where a test needs queue arguments (a dead-letter
exchange), another connection deleting the queue, or exact message counts (a 0-9-1
passive declare, which an exclusive queue of the 1.0 connection would refuse), a pika
channel declares a shared queue.
"""
from __future__ import annotations

import platform
import uuid
from importlib.metadata import version

import pytest
from proton import Delivery, Link, Message, Timeout, Transport, symbol
from proton.reactor import AtMostOnce, Copy
from proton import ConnectionException
from proton.utils import BlockingConnection, LinkDetached, SendException

from tests.support.amqp10_link_options import DynamicTarget, ReceiverSettlesSecond
from tests.support.amqp10_outcomes import settle_modified
from tests.support.cross_protocol_clients import pika_get, unique

TIMEOUT = 5
SETTLE = 0.5  # seconds to wait for a message that must NOT arrive


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


def test_open_announces_product_version_and_platform(conn):
    """As RabbitMQ and other brokers do, our open's properties say what we are."""
    properties = conn.conn.remote_properties
    assert properties == {symbol("product"): "amqp-gateway", symbol("version"): version("amqp-gateway"),
                          symbol("platform"): f"Python {platform.python_version()}"}
    assert all(type(key) is symbol for key in properties)


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


@pytest.mark.parametrize("source", ["/queue/{q}", "/amq/queue/{q}", "{q}", "/queues/{q}"])
def test_queue_source_forms(conn, source):
    _, name = _queue(conn)
    receiver = conn.create_receiver(source.format(q=name), credit=1, name=f"by {source}")
    assert receiver.link.remote_source.address == source.format(q=name)
    conn.create_sender(f"/queue/{name}").send(Message(body=source))
    assert receiver.receive(timeout=TIMEOUT).body == source
    receiver.accept()


def test_queue_target_takes_the_subject_as_routing_key(conn):
    receiver, name = _queue(conn)
    sender = conn.create_sender("/queue")
    sender.send(Message(body="by subject", subject=name))
    receiver.flow(1)
    assert receiver.receive(timeout=TIMEOUT).body == "by subject"
    receiver.accept()
    with pytest.raises(SendException) as info:  # no subject: nothing to route by
        sender.send(Message(body="no subject"))
    assert info.value.state == Delivery.REJECTED


@pytest.mark.parametrize("address, description", [
    ("/amq/queue/no-such-queue",
     "no queue 'no-such-queue' in vhost '/' (address '/amq/queue/no-such-queue')"),
    ("/queues/no-such-queue", "no queue 'no-such-queue' in vhost '/' (address '/queues/no-such-queue')"),
    ("/exchange/no-such-exchange/rk",
     "no exchange 'no-such-exchange' in vhost '/' (address '/exchange/no-such-exchange/rk')"),
    ("node@other-container",
     "unknown container 'other-container': no forwarding route to it (address 'node@other-container')"),
])
def test_unresolvable_target_is_not_found(conn, address, description):
    with pytest.raises(LinkDetached) as info:
        conn.create_sender(address)
    condition = info.value.link.remote_condition
    assert (condition.name, condition.description) == ("amqp:not-found", description)


@pytest.mark.parametrize("address, description", [
    ("/amq/queue/no-such-queue",
     "no queue 'no-such-queue' in vhost '/' (address '/amq/queue/no-such-queue')"),
    ("/queues/no-such-queue", "no queue 'no-such-queue' in vhost '/' (address '/queues/no-such-queue')"),
    ("/exchange/no-such-exchange/rk",
     "no exchange 'no-such-exchange' in vhost '/' (address '/exchange/no-such-exchange/rk')"),
])
def test_unresolvable_source_is_not_found(conn, address, description):
    with pytest.raises(LinkDetached) as info:
        conn.create_receiver(address)
    condition = info.value.link.remote_condition
    assert (condition.name, condition.description) == ("amqp:not-found", description)


def test_dynamic_target_is_not_implemented(conn):
    with pytest.raises(LinkDetached) as info:
        conn.create_sender(None, options=DynamicTarget())
    condition = info.value.link.remote_condition
    assert condition.name == "amqp:not-implemented"
    assert condition.description == "dynamic targets are not supported"


def test_gateway_attach_says_receiver_settles_first(conn):
    """We only do rcv-settle-mode first: our attach says so even when asked for second."""
    frames: list[str] = []
    transport = conn.conn.transport
    transport.trace(Transport.TRACE_FRM)
    transport.tracer = lambda _transport, frame: frames.append(frame)
    try:
        _, name = _queue(conn)
        sender = conn.create_sender(f"/queue/{name}", options=ReceiverSettlesSecond())
        receiver = conn.create_receiver(f"/queue/{name}", credit=0, options=ReceiverSettlesSecond())
    finally:
        transport.trace(Transport.TRACE_OFF)
    for link in (sender.link, receiver.link):
        assert link.rcv_settle_mode == Link.RCV_SECOND
        assert link.remote_rcv_settle_mode == Link.RCV_FIRST
    ours = [f for f in frames if "<- @attach" in f and "rcv-settle-mode" in f]
    assert len(ours) == 3  # the dynamic queue's receiver, then the sender and the receiver
    assert all("rcv-settle-mode=0x0" in f for f in ours)


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


def _count(channel, queue: str, conn=None) -> int:
    """Available messages in ``queue`` (0-9-1 passive declare). With ``conn``, first a
    round trip on that 1.0 connection (a link attached and detached), so the gateway has
    handled every disposition the connection sent before."""
    if conn is not None:
        conn.create_sender(None, name=f"sync-{uuid.uuid4().hex[:8]}").close()
    return channel.queue_declare(queue, passive=True).method.message_count


def test_outcomes_and_their_effect_on_the_queue(conn, channel):
    name = unique("outcomes")
    channel.queue_declare(name)
    try:
        _outcomes(conn, channel, name)
    finally:
        channel.queue_delete(name)


def _outcomes(conn, channel, name):
    sender = conn.create_sender(f"/queue/{name}")
    bodies = ("rejected", "released", "modified", "failed", "elsewhere", "accepted")
    for body in bodies:
        annotations = {symbol("x-opt-origin"): "sender"} if body == "failed" else None
        sender.send(Message(body=body, annotations=annotations))
    assert _count(channel, name, conn) == 6
    receiver = conn.create_receiver(f"/queue/{name}", credit=0, name="outcomes")
    assert receiver.receive(timeout=TIMEOUT).body == "rejected"
    receiver.reject()  # no dead-letter exchange: discarded
    assert _count(channel, name, conn) == 5
    first = receiver.receive(timeout=TIMEOUT)
    assert (first.body, first.delivery_count) == ("released", 0)
    receiver.release(delivered=False)  # back to the queue, not counted
    assert _count(channel, name, conn) == 5
    again = receiver.receive(timeout=TIMEOUT)
    assert (again.body, again.delivery_count) == ("released", 0)
    receiver.accept()
    modified = receiver.receive(timeout=TIMEOUT)
    assert modified.body == "modified"
    receiver.release(delivered=True)  # proton sends modified without delivery-failed
    back = receiver.receive(timeout=TIMEOUT)
    assert (back.body, back.delivery_count) == ("modified", 0)
    receiver.accept()
    assert _count(channel, name, conn) == 3
    # a real modified: delivery-failed and annotations, merged with the sender's
    failed = receiver.receive(timeout=TIMEOUT)
    # RabbitMQ 4's routing annotations ride along on every message (issue 46)
    routed = {"x-exchange": "", "x-routing-key": name}
    assert (failed.body, failed.annotations) == ("failed", {"x-opt-origin": "sender", **routed})
    settle_modified(receiver, failed=True, annotations={symbol("x-opt-retry"): "busy"})
    counted = receiver.receive(timeout=TIMEOUT)
    assert (counted.body, counted.delivery_count) == ("failed", 1)
    assert counted.annotations == {"x-opt-origin": "sender", "x-opt-retry": "busy", **routed}
    receiver.accept()
    # undeliverable-here: this link never sees it again, another link does
    elsewhere = receiver.receive(timeout=TIMEOUT)
    assert elsewhere.body == "elsewhere"
    settle_modified(receiver, failed=True, undeliverable=True)
    receiver.flow(1)  # credit here first (the attach below comes after): only the
    # exclusion keeps the message from this link
    other = conn.create_receiver(f"/queue/{name}", credit=0, name="other")
    moved = other.receive(timeout=TIMEOUT)
    assert (moved.body, moved.delivery_count) == ("elsewhere", 1)
    other.accept()
    assert receiver.receive(timeout=TIMEOUT).body == "accepted"
    receiver.accept()
    with pytest.raises(Timeout):
        receiver.receive(timeout=SETTLE)
    receiver.close()
    other.close()
    assert _count(channel, name, conn) == 0


def test_rejected_message_goes_to_the_dead_letter_exchange(conn, channel):
    work, dead = unique("work"), unique("dead")
    channel.queue_declare(dead)
    channel.queue_declare(work, arguments={"x-dead-letter-exchange": "",
                                           "x-dead-letter-routing-key": dead})
    try:
        conn.create_sender(f"/queue/{work}").send(Message(body="poison", id="m-dlx"))
        receiver = conn.create_receiver(f"/queue/{work}", credit=1)
        assert receiver.receive(timeout=TIMEOUT).body == "poison"
        receiver.reject()
        dead_letters = conn.create_receiver(f"/queue/{dead}", credit=1)
        got = dead_letters.receive(timeout=TIMEOUT)
        assert (got.body, got.id) == ("poison", "m-dlx")
        dead_letters.release(delivered=False)
        dead_letters.close()
        method, properties, _ = pika_get(channel, dead)
        [death] = properties.headers["x-death"]
        assert (death["queue"], death["reason"]) == (work, "rejected")
        assert _count(channel, work) == 0
    finally:
        channel.queue_delete(work)
        channel.queue_delete(dead)


def test_queue_deleted_under_a_receiver_detaches_it(conn, channel):
    name = unique("doomed")
    channel.queue_declare(name)
    receiver = conn.create_receiver(f"/queue/{name}", credit=1)
    channel.queue_delete(name)
    with pytest.raises(LinkDetached) as info:
        receiver.receive(timeout=TIMEOUT)
    condition = info.value.link.remote_condition
    assert condition.name == "amqp:link:detach-forced"
    assert condition.description == f"queue '{name}' in vhost '/' was deleted"


def test_presettled_send_and_presettled_receive(conn, channel):
    name = unique("settled")
    channel.queue_declare(name)
    try:
        sender = conn.create_sender(f"/queue/{name}", options=AtMostOnce())
        assert sender.link.remote_snd_settle_mode == Link.SND_SETTLED
        for i in range(3):
            delivery = sender.send(Message(body=i))  # returns at once: nothing to wait for
            assert not delivery.remote_state
        assert _count(channel, name, conn) == 3
        receiver = conn.create_receiver(f"/queue/{name}", credit=3, options=AtMostOnce())
        assert receiver.link.remote_snd_settle_mode == Link.SND_SETTLED
        assert [receiver.receive(timeout=TIMEOUT).body for _ in range(3)] == [0, 1, 2]
        assert not receiver.fetcher.unsettled  # they came settled
        receiver.close()  # nothing unsettled to give back
        assert _count(channel, name, conn) == 0
    finally:
        channel.queue_delete(name)


def test_ten_mib_message_round_trip(conn):
    receiver, name = _queue(conn)
    body = uuid.uuid4().bytes * (10 * 1024 * 1024 // 16)
    conn.create_sender(f"/queue/{name}").send(Message(body=body))
    receiver.flow(1)
    got = receiver.receive(timeout=30)
    assert got.body == body
    receiver.accept()


def test_browse_leaves_the_messages_to_a_consumer_while_the_browser_is_open(conn):
    receiver, name = _queue(conn)
    sender = conn.create_sender(f"/queue/{name}")
    for i in range(3):
        sender.send(Message(body=i))
    browser = conn.create_receiver(f"/queue/{name}", credit=10, options=Copy(), name="browser")
    assert browser.link.remote_source.distribution_mode == browser.link.source.DIST_MODE_COPY
    assert [browser.receive(timeout=TIMEOUT).body for _ in range(3)] == [0, 1, 2]
    # the browser stays attached and never settles: had it acquired the messages, the
    # consumer would get nothing until it let them go
    receiver.flow(3)
    assert [receiver.receive(timeout=TIMEOUT).body for _ in range(3)] == [0, 1, 2]
    receiver.accept()
    sender.send(Message(body=3))
    assert browser.receive(timeout=TIMEOUT).body == 3  # browsing goes on at the tail
    browser.close()


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
