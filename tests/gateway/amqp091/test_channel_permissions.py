"""BrokerChannel permission checks that need the generated name: server-named queues."""
from __future__ import annotations

from gateway.amqp091 import methods as m
from gateway.amqp091.spec import ReplyCode
from tests.support.broker_channel_driver import BrokerClient, make_broker


def test_server_named_queue_needs_configure_on_the_generated_name():
    broker = make_broker()
    bob = BrokerClient(broker, user="bob")
    bob.open(1)
    (close,) = bob.declare(1, "", exclusive=True)
    assert isinstance(close, m.ChannelClose)
    assert close.reply_code == ReplyCode.ACCESS_REFUSED
    assert close.reply_text.startswith("ACCESS_REFUSED - configure access to resource 'amq.gen-")
    assert close.reply_text.endswith("in vhost '/' refused for user 'bob'")
    assert (close.class_id, close.method_id) == (50, 10)
    assert not [name for name in broker.vhost("/").queues if name.startswith("amq.gen-")]


def test_server_named_queue_for_a_permitted_user():
    broker = make_broker()
    guest = BrokerClient(broker)
    guest.open(1)
    (ok,) = guest.declare(1, "", exclusive=True)
    assert isinstance(ok, m.QueueDeclareOk) and ok.queue.startswith("amq.gen-")
    assert ok.queue in broker.vhost("/").queues
