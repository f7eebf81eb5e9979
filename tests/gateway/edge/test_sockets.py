"""``edge.sockets`` with the real reactor: the gateway's service listening on a real port,
a client connecting over a real TCP socket, and ``TCP_NODELAY`` read back with
``getsockopt`` from the socket the gateway accepted (plain, ``tls: on``, ``tls: auto``)
and from the socket a forwarder opened to its remote."""
from __future__ import annotations

import resource
import socket
import ssl
import struct
import threading

import pytest
import pytest_twisted
from twisted.internet import protocol, reactor, task, threads
from twisted.internet.tcp import Connection

from gateway.amqp091.outbound_client import OutboundAmqp091
from gateway.config import load_config_text
from gateway.edge.outbound import RemoteLink
from gateway.edge.sockets import raise_open_files_limit
from gateway.forward.outbound import RemoteSettings
from gateway.protocol_header import AMQP091_HEADER
from gateway.service import GatewayService
from tests.support.access_config import tls_listener
from tests.support.certificates import TestPKI
from tests.support.gateway_process import default_config
from tests.support.minimal_forwarder import MinimalForwarder

TIMEOUT = 10.0


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("sockets-pki"))
    ca = TestPKI(d)
    return ca, ca.issue("gateway.test", names=("gateway.test", "localhost"))


def _tcp_socket(transport) -> socket.socket:
    """The OS socket under ``transport`` (below a TLS wrapper, if there is one)."""
    while not isinstance(transport, Connection):
        transport = transport.transport
    return transport.getHandle()


def _client(port: int, context: ssl.SSLContext | None, answered: threading.Event,
            release: threading.Event, errors: list) -> None:
    """A 0-9-1 client up to the gateway's ``connection.start``; holds the connection
    until ``release``. Runs in a thread: the reactor serves it meanwhile."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as raw:
            sock = context.wrap_socket(raw, server_hostname="localhost") if context else raw
            sock.sendall(AMQP091_HEADER)
            head = b""
            while len(head) < 7:
                chunk = sock.recv(7 - len(head))
                assert chunk, "closed before connection.start"
                head += chunk
            assert struct.unpack("!BHI", head)[:2] == (1, 0)
            answered.set()
            release.wait(TIMEOUT)
    except Exception as exc:  # noqa: BLE001 - reported by the test
        errors.append(exc)
        answered.set()


async def _until(predicate, timeout: float = TIMEOUT) -> bool:
    for _ in range(int(timeout / 0.02)):
        if predicate():
            return True
        await task.deferLater(reactor, 0.02, lambda: None)
    return predicate()


@pytest.mark.parametrize("mode", ["off", "on", "auto"])
@pytest_twisted.ensureDeferred
async def test_accepted_sockets_have_tcp_nodelay(tmp_path, pki, mode):
    ca, server = pki
    listener = tls_listener(ca, server, mode=mode) if mode != "off" else ""
    extra = f"state_dir: {tmp_path}\nledger:\n  enabled: false\n"
    svc = GatewayService(load_config_text(default_config(listener_extra=listener, extra=extra)),
                         reactor, environ={})
    await svc.start()
    answered, release, errors = threading.Event(), threading.Event(), []
    context = None
    if mode != "off":   # on "auto" a TLS ClientHello on the shared port
        context = ssl.create_default_context(cafile=ca.ca_file)
    client = threads.deferToThread(_client, svc.bound_addresses()[0][1], context, answered,
                                   release, errors)
    try:
        assert await _until(answered.is_set)
        assert not errors, errors
        [proto] = svc.factories[0].connections
        if mode == "auto":
            assert proto.inner is not None         # served inside TLS, on the plain listener
        sock = _tcp_socket(proto.transport)
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    finally:
        release.set()
        await client
        await svc.stop()


@pytest_twisted.ensureDeferred
async def test_a_forwarders_socket_has_tcp_nodelay():
    """With Nagle on, a forwarder's publish written after an unacknowledged one waited for
    the remote's delayed ACK (issue 45)."""
    accepted: list[protocol.Protocol] = []

    class Remote(protocol.Protocol):
        def connectionMade(self) -> None:
            accepted.append(self)

    port = reactor.listenTCP(0, protocol.Factory.forProtocol(Remote), interface="127.0.0.1")
    settings = RemoteSettings(container="org-b", host="127.0.0.1", port=port.getHost().port, kind="amqp091",
                              address="/queue/{node}")
    link = RemoteLink(reactor, settings, MinimalForwarder(), "org-a", OutboundAmqp091)
    try:
        link.start()
        assert await _until(lambda: link.protocol is not None and accepted)
        assert _tcp_socket(link.protocol.transport).getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    finally:
        link.close("test over")
        for remote in accepted:
            remote.transport.abortConnection()
        await port.stopListening()


def test_open_files_soft_limit_is_raised_to_the_hard_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard < 64:
        pytest.skip(f"hard limit {hard}: nothing to lower the soft limit below")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard // 2, hard))
    try:
        assert raise_open_files_limit() == hard
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (hard, hard)
        assert raise_open_files_limit() == hard      # already there: unchanged
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
