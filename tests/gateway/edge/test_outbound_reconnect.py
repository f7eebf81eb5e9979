"""The connector's attempts and reconnects, on Twisted's memory reactor."""
from __future__ import annotations

from twisted.internet.error import ConnectionRefusedError
from twisted.internet.testing import MemoryReactorClock
from twisted.python.failure import Failure

from gateway.edge.outbound_reconnect import OutboundLinkState, ReconnectingConnector
from gateway.forward.outbound import RemoteSettings
from tests.support.minimal_forwarder import MinimalForwarder


def test_refused_attempts_are_reported_and_retried_on_the_schedule(tmp_path):
    reactor = MemoryReactorClock()
    remote = RemoteSettings(container="org-b", host="127.0.0.1", port=5999, kind="amqp091",
                            reconnect_initial=1.0, reconnect_max=4.0)
    forwarder = MinimalForwarder()
    connector = ReconnectingConnector(remote, forwarder, reactor, uniform=lambda low, high: high)
    connector.start()
    assert len(reactor.tcpClients) == 1 and connector.state is OutboundLinkState.CONNECTING
    # HostnameEndpoint resolves first; fail the attempt the way a refused connect does
    connector._connect_failed(Failure(ConnectionRefusedError("refused")))
    assert connector.state is OutboundLinkState.BACKING_OFF
    assert forwarder.downs == ["cannot connect to remote 'org-b' (127.0.0.1:5999): Connection was refused "
                               "by other side: refused."]
    reactor.advance(0.99)
    assert len(reactor.tcpClients) == 1
    reactor.advance(0.02)
    assert len(reactor.tcpClients) == 2           # the second attempt, about 1 s later
    connector.close("shutdown")
    assert connector.state is OutboundLinkState.CLOSED
    connector._connect_failed(Failure(ConnectionRefusedError("late")))
    assert len(forwarder.downs) == 1
    assert not [c for c in reactor.getDelayedCalls() if getattr(c.func, "__name__", "") == "_connect"]


def test_an_unreadable_password_file_is_named_and_retried(tmp_path):
    reactor = MemoryReactorClock()
    remote = RemoteSettings(container="org-b", host="gw.example", password_file=str(tmp_path / "none"))
    forwarder = MinimalForwarder()
    connector = ReconnectingConnector(remote, forwarder, reactor, uniform=lambda low, high: low)
    connector.start()
    assert "cannot read password_file" in forwarder.downs[0] and str(tmp_path / "none") in forwarder.downs[0]
    assert [call.getTime() for call in reactor.getDelayedCalls()] == [0.5]
