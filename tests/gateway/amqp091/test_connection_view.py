"""Management's view of a 0-9-1 connection: channels and consumers of a real connection."""
from __future__ import annotations

from gateway.amqp091 import methods as m
from gateway.auth import ConnectionRegistry
from gateway.broker.connection_views import AMQP091_PROTOCOL
from tests.support.broker_channel_driver import BrokerClient, make_broker
from tests.support.frame_builder import methods_of


def test_registry_lists_the_connection_with_channels_and_consumers() -> None:
    broker = make_broker()
    registry = ConnectionRegistry()
    client = BrokerClient(broker, connection_registry=registry, connection_id=3, peer_port=5000,
                          now=50.0, tls=True)
    client.open(1)
    client.open(2)
    client.declare(1, "work")
    client.call(1, m.BasicQos(prefetch_count=10))
    client.call(1, m.BasicConsume(queue="work", consumer_tag="ctag"))
    client.call(2, m.ConfirmSelect())
    (conn,) = registry.connections()
    view = conn.view()
    assert (view.name, view.protocol, view.user, view.vhost, view.peer_port, view.connected_at,
            view.ssl) == ("127.0.0.1:5000 #3", AMQP091_PROTOCOL, "guest", "/", 5000, 50.0, True)
    assert [(c.number, c.consumers, c.prefetch_count, c.mode) for c in view.channels] == [
        (1, 1, 10, ""), (2, 0, 0, "confirm")]
    (link,) = view.links
    assert (link.name, link.queue, link.channel, link.ack_required, link.credit) == ("ctag", "work", 1, True, 10)
    conn.shutdown("closed by operator")
    (close,) = [x for x in methods_of(client.received()) if isinstance(x, m.ConnectionClose)]
    assert (close.reply_code, close.reply_text) == (320, "CONNECTION_FORCED - closed by operator")
