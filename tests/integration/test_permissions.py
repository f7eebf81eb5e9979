"""RabbitMQ's permission model enforced in both protocols, with real clients.

User ``bob`` may configure, write and read only resources named ``bob.*``; ``stranger``
has permissions on vhost ``other`` only. ``guest`` (everything) sets up ``bob.q`` bound
to the direct exchange ``bob.x`` with key ``k``, and the refusal targets ``other.q`` /
``other.x``. Every permission class is refused with 0-9-1 channel.close 403 (pika) and
1.0 detach ``amqp:unauthorized-access`` (proton), naming the resource and the user.
"""
from __future__ import annotations

import pika
import pika.exceptions
import pytest
from proton import Delivery, Message
from proton.utils import BlockingConnection, LinkDetached

from tests.support.access_config import access_config, write_users_file
from tests.support.amqp091_clients import pika_params
from tests.support.gateway_process import make_gateway

pytestmark = pytest.mark.integration

TIMEOUT = 10
BOB_ONLY = {"configure": r"bob\..*", "write": r"bob\..*", "read": r"bob\..*"}


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("perm-users"))
    users = write_users_file(directory, {
        "bob": {"password": "bobpw", "permissions": {"/": BOB_ONLY}},
        "stranger": {"password": "pw", "permissions": {"other": {"configure": ".*", "write": ".*",
                                                                 "read": ".*"}}},
    })
    gateway = make_gateway(config_text=access_config(
        users_file=users, extra='vhosts: ["/", "other"]\n')).start()
    setup = pika.BlockingConnection(pika_params(gateway))
    ch = setup.channel()
    ch.exchange_declare("bob.x", "direct")
    ch.exchange_declare("other.x", "direct")
    ch.queue_declare("bob.q")
    ch.queue_declare("other.q")
    ch.queue_bind("bob.q", "bob.x", "k")
    ch.queue_declare("bob.q10")
    ch.queue_bind("bob.q10", "bob.x", "k10")
    setup.close()
    yield gateway
    gateway.stop()


def refusal(action: str, resource: str, user: str = "bob") -> str:
    return f"{action} access to resource '{resource}' in vhost '/' refused for user '{user}'"


# ---------------------------------------------------------------------- 0-9-1


@pytest.fixture()
def bob091(gw):
    conn = pika.BlockingConnection(pika_params(gw, user="bob", password="bobpw"))
    yield conn
    if conn.is_open:
        conn.close()


def assert_403(info, action: str, resource: str) -> None:
    assert info.value.reply_code == 403
    assert info.value.reply_text == "ACCESS_REFUSED - " + refusal(action, resource)


def test_091_allowed_operations_work(bob091):
    ch = bob091.channel()
    ch.exchange_declare("bob.x2", "fanout")
    ch.queue_declare("bob.q2")
    ch.queue_bind("bob.q2", "bob.x2")
    ch.confirm_delivery()
    ch.basic_publish("bob.x2", "", b"hello")
    method, _, body = ch.basic_get("bob.q2", auto_ack=True)
    assert body == b"hello"
    ch.queue_purge("bob.q2")
    ch.queue_delete("bob.q2")
    ch.exchange_delete("bob.x2")


def test_091_exchange_declare_needs_configure(bob091):
    ch = bob091.channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
        ch.exchange_declare("other.x2", "direct")
    assert_403(info, "configure", "other.x2")


def test_091_passive_declare_needs_nothing(bob091):
    ch = bob091.channel()
    assert ch.exchange_declare("other.x", passive=True)
    assert ch.queue_declare("other.q", passive=True)


def test_091_exchange_delete_needs_configure(bob091):
    ch = bob091.channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
        ch.exchange_delete("other.x")
    assert_403(info, "configure", "other.x")


def test_091_queue_declare_needs_configure(bob091):
    ch = bob091.channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
        ch.queue_declare("other.q2")
    assert_403(info, "configure", "other.q2")


def test_091_server_named_queue_needs_configure(bob091):
    ch = bob091.channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
        ch.queue_declare("", exclusive=True)
    assert info.value.reply_code == 403
    assert info.value.reply_text.startswith(
        "ACCESS_REFUSED - configure access to resource 'amq.gen-")
    assert info.value.reply_text.endswith("in vhost '/' refused for user 'bob'")


def test_091_queue_delete_needs_configure(bob091):
    ch = bob091.channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
        ch.queue_delete("other.q")
    assert_403(info, "configure", "other.q")


def test_091_queue_bind_needs_write_on_the_queue(bob091):
    ch = bob091.channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
        ch.queue_bind("other.q", "bob.x", "k")
    assert_403(info, "write", "other.q")


def test_091_queue_bind_needs_read_on_the_exchange(bob091):
    ch = bob091.channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
        ch.queue_bind("bob.q", "other.x", "k")
    assert_403(info, "read", "other.x")


def test_091_queue_unbind_needs_write_and_read(bob091):
    ch = bob091.channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
        ch.queue_unbind("bob.q", "other.x", "k")
    assert_403(info, "read", "other.x")


def test_091_exchange_bind_needs_write_on_destination_and_read_on_source(bob091):
    ch = bob091.channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
        ch.exchange_bind(destination="other.x", source="bob.x", routing_key="k")
    assert_403(info, "write", "other.x")
    ch = bob091.channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
        ch.exchange_bind(destination="bob.x", source="other.x", routing_key="k")
    assert_403(info, "read", "other.x")


def test_091_publish_needs_write_on_the_exchange(bob091):
    ch = bob091.channel()
    ch.confirm_delivery()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
        ch.basic_publish("other.x", "k", b"x")
    assert_403(info, "write", "other.x")


def test_091_publish_to_the_default_exchange_is_checked_as_amq_default(bob091):
    ch = bob091.channel()
    ch.confirm_delivery()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
        ch.basic_publish("", "bob.q", b"x")
    assert_403(info, "write", "amq.default")


@pytest.mark.parametrize("operation", ["consume", "get", "purge"])
def test_091_consume_get_purge_need_read(bob091, operation):
    ch = bob091.channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
        if operation == "consume":
            ch.basic_consume("other.q", lambda *a: None)
        elif operation == "get":
            ch.basic_get("other.q")
        else:
            ch.queue_purge("other.q")
    assert_403(info, "read", "other.q")


def test_091_refusal_closes_only_the_channel(bob091):
    ch = bob091.channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker):
        ch.queue_delete("other.q")
    assert bob091.is_open
    assert bob091.channel().queue_declare("bob.q", passive=True)


def test_091_user_id_must_match_the_login(bob091):
    ch = bob091.channel()
    ch.confirm_delivery()
    ch.basic_publish("bob.x", "k", b"mine", pika.BasicProperties(user_id="bob"))
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
        ch.basic_publish("bob.x", "k", b"forged", pika.BasicProperties(user_id="guest"))
    assert info.value.reply_code == 406
    assert info.value.reply_text == ("PRECONDITION_FAILED - user_id property set to 'guest' "
                                     "but authenticated user was 'bob'")


def test_091_vhost_without_permissions_is_530(gw):
    with pytest.raises(pika.exceptions.ProbableAccessDeniedError) as info:
        pika.BlockingConnection(pika_params(gw, user="stranger", password="pw"))
    assert "(530)" in str(info.value)
    assert "access to vhost '/' refused for user 'stranger'" in str(info.value)
    conn = pika.BlockingConnection(pika_params(gw, user="stranger", password="pw",
                                               virtual_host="other"))
    assert conn.is_open
    conn.close()


# ---------------------------------------------------------------------- 1.0


def connect10(gw, user="bob", password="bobpw", vhost="vhost:/") -> BlockingConnection:
    return BlockingConnection(f"amqp://127.0.0.1:{gw.amqp_port}", user=user, password=password,
                              virtual_host=vhost, allowed_mechs="PLAIN", sasl_enabled=True,
                              allow_insecure_mechs=True, timeout=TIMEOUT)


@pytest.fixture()
def bob10(gw):
    conn = connect10(gw)
    yield conn
    try:
        conn.close()
    except Exception:  # noqa: BLE001 - the test may have broken it on purpose
        pass


def assert_unauthorized(info, text: str) -> None:
    condition = info.value.link.remote_condition
    assert condition.name == "amqp:unauthorized-access"
    assert condition.description == text


def test_10_allowed_links_work(bob10):
    receiver = bob10.create_receiver("/queue/bob.q10")
    sender = bob10.create_sender("/exchange/bob.x/k10")
    sender.send(Message(body=b"via bob.x", user_id=b"bob"))
    assert bytes(receiver.receive(timeout=TIMEOUT).body) == b"via bob.x"
    receiver.accept()


def test_10_receiving_needs_read_on_the_queue(bob10):
    with pytest.raises(LinkDetached) as info:
        bob10.create_receiver("/queue/other.q")
    assert_unauthorized(info, refusal("read", "other.q"))


def test_10_sending_needs_write_on_the_exchange(bob10):
    with pytest.raises(LinkDetached) as info:
        bob10.create_sender("/exchange/other.x/k")
    assert_unauthorized(info, refusal("write", "other.x"))


def test_10_sending_to_a_queue_needs_write_on_the_default_exchange(bob10):
    with pytest.raises(LinkDetached) as info:
        bob10.create_sender("/queue/bob.q")
    assert_unauthorized(info, refusal("write", "amq.default"))


def test_10_dynamic_source_needs_configure(bob10):
    with pytest.raises(LinkDetached) as info:
        bob10.create_receiver(None, dynamic=True)
    condition = info.value.link.remote_condition
    assert condition.name == "amqp:unauthorized-access"
    assert condition.description.startswith("configure access to resource 'amq.gen-")
    assert condition.description.endswith("refused for user 'bob'")


def test_10_exchange_source_needs_read_on_the_exchange(bob10):
    with pytest.raises(LinkDetached) as info:
        bob10.create_receiver("/exchange/other.x/k")
    assert_unauthorized(info, refusal("read", "other.x"))


def test_10_exchange_source_needs_configure_on_its_temporary_queue(bob10):
    with pytest.raises(LinkDetached) as info:
        bob10.create_receiver("/exchange/bob.x/k")
    condition = info.value.link.remote_condition
    assert condition.name == "amqp:unauthorized-access"
    assert condition.description.startswith("configure access to resource 'amq.gen-")


def _send_unchecked(conn: BlockingConnection, sender, message: Message) -> Delivery:
    """Send without BlockingSender's raise-on-rejection, to look at the outcome."""
    delivery = sender.link.send(message)
    conn.wait(lambda: bool(delivery.settled or delivery.remote_state),
              msg="waiting for the disposition")
    return delivery


def test_10_anonymous_relay_checks_each_message(bob10):
    sender = bob10.create_sender(None)
    allowed = _send_unchecked(bob10, sender, Message(body="ok", address="/exchange/bob.x/k"))
    assert allowed.remote_state == Delivery.ACCEPTED
    refused = _send_unchecked(bob10, sender, Message(body="no", address="/exchange/other.x/k"))
    assert refused.remote_state == Delivery.REJECTED
    assert refused.remote.condition.name == "amqp:unauthorized-access"
    assert refused.remote.condition.description == refusal("write", "other.x")


def test_10_user_id_must_match_the_login(bob10):
    sender = bob10.create_sender("/exchange/bob.x/k")
    refused = _send_unchecked(bob10, sender, Message(body="forged", user_id=b"guest"))
    assert refused.remote_state == Delivery.REJECTED
    assert refused.remote.condition.name == "amqp:unauthorized-access"
    assert "'guest'" in refused.remote.condition.description
    assert "'bob'" in refused.remote.condition.description


def test_10_vhost_without_permissions_is_refused(gw):
    from proton import ConnectionException

    with pytest.raises(ConnectionException) as info:
        connect10(gw, user="stranger", password="pw")
    assert "amqp:unauthorized-access" in str(info.value)
    assert "access to vhost '/' refused for user 'stranger'" in str(info.value)
    connect10(gw, user="stranger", password="pw", vhost="vhost:other").close()
