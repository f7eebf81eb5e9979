"""Management's view of a 1.0 connection, built from a real engine pumped in memory."""
from __future__ import annotations

from gateway.auth import ConnectionRegistry
from gateway.broker.connection_views import AMQP10_PROTOCOL


def test_registry_lists_the_engine_with_its_sessions_and_links(connect) -> None:
    registry = ConnectionRegistry()
    pump = connect(engine=dict(connection_registry=registry, connection_id=7, peer_port=4242, now=12.5))
    session = pump.session()
    pump.receiver("q1", name="rx", credit=5, session=session)
    pump.sender("q1", name="tx", session=session)
    pump.session()
    pump.pump()
    (engine,) = registry.connections()
    view = engine.view()
    assert (view.name, view.protocol, view.user, view.vhost, view.peer_port, view.connected_at) == (
        "127.0.0.1:4242 #7", AMQP10_PROTOCOL, "guest", "/", 4242, 12.5)
    assert len(view.channels) == 2
    links = {link.name: link for link in view.links}
    assert (links["rx"].role, links["rx"].queue, links["rx"].credit) == ("sender", "q1", 5)
    assert (links["tx"].role, links["tx"].address) == ("receiver", "q1")
    assert view.channels[0].consumers == 1
    engine.shutdown("closed by operator")
    pump.pump()
    assert registry.connections() == []
    assert pump.connection.remote_condition.description == "closed by operator"
