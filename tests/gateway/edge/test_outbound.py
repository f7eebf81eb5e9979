"""RemoteLink's attempts on Twisted's memory reactor: a refused connect is reported and
retried on the backoff, bad TLS settings or password files are named, close stops it."""
from __future__ import annotations

from twisted.internet.error import ConnectionRefusedError
from twisted.internet.testing import MemoryReactorClock
from twisted.python.failure import Failure

from gateway.amqp091.outbound_client import OutboundAmqp091
from gateway.edge.outbound import RemoteLink
from gateway.forward.backoff import Backoff
from gateway.forward.outbound import RemoteSettings
from tests.support.minimal_forwarder import MinimalForwarder


def _link(reactor, **settings) -> tuple[MinimalForwarder, RemoteLink]:
    options = dict(container="org-b", host="127.0.0.1", port=5999, kind="amqp091", address="/queue/{node}",
                   reconnect_initial=1.0, reconnect_max=4.0)
    options.update(settings)
    forwarder = MinimalForwarder()
    link = RemoteLink(reactor, RemoteSettings(**options), forwarder, "org-a", OutboundAmqp091)
    return forwarder, link


def test_a_refused_connect_is_reported_and_retried_after_the_backoff():
    reactor = MemoryReactorClock()
    forwarder, link = _link(reactor)
    link.backoff = Backoff(link.backoff.initial, link.backoff.maximum, uniform=lambda low, high: high)
    link.start()
    assert len(reactor.tcpClients) == 1
    factory = reactor.tcpClients[0][2]
    factory.clientConnectionFailed(None, Failure(ConnectionRefusedError("refused")))
    # an IP address: a plain TCP endpoint, whose refusal is reported at once
    assert len(forwarder.downs) == 1 and "cannot connect to 127.0.0.1:5999" in forwarder.downs[0]
    retries = [c for c in reactor.getDelayedCalls() if getattr(c.func, "__name__", "") == "start"]
    assert [round(c.getTime() - reactor.seconds(), 6) for c in retries] == [1.0]   # the first backoff
    reactor.advance(1.0)
    assert len(reactor.tcpClients) == 2           # the next attempt
    link.close("shutdown")
    reactor.tcpClients[1][2].clientConnectionFailed(None, Failure(ConnectionRefusedError("late")))
    reactor.advance(10)
    assert len(forwarder.downs) == 1 and len(reactor.tcpClients) == 2


def test_unusable_tls_settings_and_password_files_are_named(tmp_path):
    reactor = MemoryReactorClock()
    forwarder, link = _link(reactor, tls=True, tls_ca_file=str(tmp_path / "no-ca.pem"))
    link.start()
    assert forwarder.downs == [f"TLS settings of remote 'org-b': cannot read tls_ca_file "
                               f"'{tmp_path / 'no-ca.pem'}': No such file or directory"]
    assert not reactor.tcpClients
    forwarder, link = _link(reactor, tls=True, tls_cert_file=str(tmp_path / "c.pem"))
    link.start()
    assert "tls_cert_file needs tls_key_file" in forwarder.downs[0]
    forwarder, link = _link(reactor, password_file=str(tmp_path / "none"))
    link.start()
    assert "cannot read password_file" in forwarder.downs[0]
