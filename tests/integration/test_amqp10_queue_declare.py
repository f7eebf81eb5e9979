"""``/queue/Q`` (and a bare ``Q``) declare a missing queue, as RabbitMQ's 1.0 plugin does
(issue 29, item 2), with proton's blocking client over a real socket; pika looks at the
queue from the 0-9-1 side. ``/amq/queue/Q`` and ``/queues/Q`` still need the queue
(``test_amqp10_blocking``); the permission refusals are the user's own.
"""
from __future__ import annotations

import pika.exceptions
import pytest
from proton import Message
from proton.utils import LinkDetached

from tests.support.access_config import access_config, write_users_file
from tests.support.amqp10_link_options import DurableTerminus
from tests.support.cross_protocol_clients import (TIMEOUT, pika_channel, pika_get, proton_connection,
                                                  unique)
from tests.support.gateway_process import make_gateway

pytestmark = pytest.mark.integration


@pytest.fixture()
def amqp10(gateway):
    conn = proton_connection(gateway)
    yield conn
    conn.close()


@pytest.fixture()
def channel(gateway):
    connection, ch = pika_channel(gateway)
    yield ch
    if connection.is_open:
        connection.close()


def _exists(gateway, name: str) -> bool:
    connection, ch = pika_channel(gateway)
    try:
        ch.queue_declare(name, passive=True)
        return True
    except pika.exceptions.ChannelClosedByBroker as exc:
        assert exc.reply_code == 404
        return False
    finally:
        if connection.is_open:
            connection.close()


def _durability_is(channel, name: str, durable: bool) -> bool:
    """A 0-9-1 redeclare succeeds only with the queue's own durability (406 otherwise)."""
    channel.queue_declare(name, durable=durable)
    return True


@pytest.mark.parametrize("form", ["/queue/{q}", "{q}"])
def test_sending_to_a_new_queue_declares_it(gateway, amqp10, channel, form):
    name = unique("declared-by-sender")
    sender = amqp10.create_sender(form.format(q=name))
    sender.send(Message(body=b"first", inferred=True), timeout=TIMEOUT)  # a data section
    _, _, body = pika_get(channel, name)
    assert body == b"first"
    assert _durability_is(channel, name, False)  # proton's default terminus: durability none
    channel.queue_delete(name)


@pytest.mark.parametrize("form", ["/queue/{q}", "{q}"])
def test_receiving_from_a_new_queue_declares_it(gateway, amqp10, channel, form):
    name = unique("declared-by-receiver")
    receiver = amqp10.create_receiver(form.format(q=name), credit=1)
    channel.basic_publish("", name, b"from 0-9-1")
    assert receiver.receive(timeout=TIMEOUT).body == b"from 0-9-1"
    receiver.accept()
    receiver.close()
    assert _exists(gateway, name)  # not auto-delete: it stays after the link
    channel.queue_delete(name)


@pytest.mark.parametrize("role", ["sender", "receiver"])
def test_a_durable_terminus_declares_a_durable_queue(gateway, amqp10, channel, role):
    name = unique("durable")
    create = amqp10.create_sender if role == "sender" else amqp10.create_receiver
    create(f"/queue/{name}", options=DurableTerminus())
    assert _durability_is(channel, name, True)
    channel.queue_delete(name)


@pytest.mark.parametrize("durable", [True, False])
def test_an_existing_queue_of_any_durability_is_used_as_it_is(gateway, amqp10, channel, durable):
    name = unique("existing")
    channel.queue_declare(name, durable=durable)
    options = None if durable else DurableTerminus()  # the terminus says the other thing
    receiver = amqp10.create_receiver(f"/queue/{name}", credit=1, options=options)
    amqp10.create_sender(f"/queue/{name}", options=options).send(Message(body="m"), timeout=TIMEOUT)
    assert receiver.receive(timeout=TIMEOUT).body == "m"
    receiver.accept()
    assert _durability_is(channel, name, durable)
    channel.queue_delete(name)


@pytest.fixture(scope="module")
def carol_gateway(tmp_path_factory):
    """``carol`` may configure only ``carol.*`` queues, and write and read everything."""
    users = write_users_file(str(tmp_path_factory.mktemp("carol")), {
        "carol": {"password": "pw", "permissions": {
            "/": {"configure": r"carol\..*", "write": ".*", "read": ".*"}}},
    })
    gw = make_gateway(config_text=access_config(users_file=users)).start()
    yield gw
    gw.stop()


@pytest.mark.parametrize("role", ["sender", "receiver"])
def test_declaring_needs_configure_and_the_refusal_names_it(carol_gateway, role):
    conn = proton_connection(carol_gateway, user="carol", password="pw")
    try:
        create = conn.create_sender if role == "sender" else conn.create_receiver
        name = unique("other")
        with pytest.raises(LinkDetached) as info:
            create(f"/queue/{name}")
        condition = info.value.link.remote_condition
        assert condition.name == "amqp:unauthorized-access"
        assert condition.description == (f"configure access to resource '{name}' in vhost '/' "
                                          "refused for user 'carol'")
        assert not _exists(carol_gateway, name)
        allowed = unique("carol.q")
        create(f"/queue/{allowed}", name="allowed")
        assert _exists(carol_gateway, allowed)
    finally:
        conn.close()


def test_an_existing_queue_needs_no_configure(carol_gateway):
    name = unique("shared")
    connection, ch = pika_channel(carol_gateway)  # guest makes it
    ch.queue_declare(name)
    connection.close()
    conn = proton_connection(carol_gateway, user="carol", password="pw")
    try:
        receiver = conn.create_receiver(f"/queue/{name}", credit=1)
        conn.create_sender(f"/queue/{name}").send(Message(body="ok"), timeout=TIMEOUT)
        assert receiver.receive(timeout=TIMEOUT).body == "ok"
        receiver.accept()
    finally:
        conn.close()
