"""TLS connections on a ``tls: auto`` listener end cleanly: real clients (pika, proton
TLS-first, proton after the ``AMQP 2 1 0 0`` header) close, or the gateway stops
gracefully, and the gateway logs no traceback, counts the connections closed in its
metrics, and a SIGTERM finishes its drain without aborting anything.

Each test has a gateway of its own: what is asserted is the gateway's log and exit.
"""
from __future__ import annotations

import signal
import socket
import ssl

import pika
import pytest
from proton import Endpoint, SSLDomain
from proton.utils import BlockingConnection, ConnectionClosed

from gateway.protocol_header import AMQP10_TLS_HEADER
from tests.support.access_config import access_config, tls_listener
from tests.support.amqp10_socket_client import SocketClient, read_exactly
from tests.support.certificates import TestPKI
from tests.support.connection_storm import reset_socket
from tests.support.gateway_metrics import wait_open_connections
from tests.support.gateway_process import Gateway

pytestmark = [pytest.mark.integration, pytest.mark.process]

TIMEOUT = 10
#: what the gateway logs when a drain did not finish in ``shutdown_timeout``
_ABORTING = "connections still open after"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("tls-auto-pki"))
    ca = TestPKI(d)
    return {"ca": ca, "server": ca.issue("gateway.test", names=("gateway.test", "localhost"))}


@pytest.fixture
def gw(pki, fresh_gateway) -> Gateway:
    # a long shutdown_timeout: a drain that waits for it is not hidden by a quick abort
    config = access_config(listener_extra=tls_listener(pki["ca"], pki["server"], mode="auto"))
    return fresh_gateway(process=True,  # SIGTERM
                         config_text=config.replace("shutdown_timeout: 5.0", "shutdown_timeout: 60.0"))


def _client_context(pki) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=pki["ca"].ca_file)
    ctx.check_hostname = False
    return ctx


def _pika(gw, pki) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters(
        host="127.0.0.1", port=gw.amqp_port, credentials=pika.PlainCredentials("guest", "guest"),
        ssl_options=pika.SSLOptions(_client_context(pki), "localhost"), socket_timeout=TIMEOUT,
        stack_timeout=TIMEOUT, connection_attempts=1))


def _proton(gw, pki) -> BlockingConnection:
    domain = SSLDomain(SSLDomain.MODE_CLIENT)
    domain.set_trusted_ca_db(pki["ca"].ca_file)
    domain.set_peer_authentication(SSLDomain.VERIFY_PEER)
    return BlockingConnection(f"amqps://127.0.0.1:{gw.amqp_port}", ssl_domain=domain,
                              user="guest", password="guest", allowed_mechs="PLAIN",
                              sasl_enabled=True, timeout=TIMEOUT)


def _proton_socket_client(gw, pki, *, upgrade: bool) -> SocketClient:
    """proton's engine over a TLS socket: TLS from the first byte, or after the 1.0
    ``AMQP 2 1 0 0`` header (which proton's own I/O never sends)."""
    raw = socket.create_connection(("127.0.0.1", gw.amqp_port), timeout=TIMEOUT)
    if upgrade:
        raw.sendall(AMQP10_TLS_HEADER)
        assert read_exactly(raw, 8) == AMQP10_TLS_HEADER
    return SocketClient(_client_context(pki).wrap_socket(raw)).open()


def _assert_clean_log(gw) -> None:
    for bad in ("Traceback", "KeyError", "Unhandled", "CRITICAL"):
        assert bad not in gw.log, f"{bad} in the gateway log:\n{gw.log[-4000:]}"


def _assert_prompt_graceful_stop(gw) -> None:
    """SIGTERM: the drain finishes without the abort, the gateway exits 0."""
    gw.signal(signal.SIGTERM)
    assert gw.proc.wait(90) == 0, gw.log[-4000:]
    assert gw.wait_for_log(r"(?m)INFO gateway\.service: stopped$"), gw.log[-4000:]   # the whole log is read
    assert _ABORTING not in gw.log, gw.log[-4000:]
    _assert_clean_log(gw)


@pytest.mark.parametrize("reset", [False, True], ids=["close", "reset"])
def test_client_ends_are_clean_and_counted_then_sigterm_drains_at_once(gw, pki, reset):
    p091 = _pika(gw, pki)
    p091.channel().queue_declare("", exclusive=True)
    proton_clients = [_proton_socket_client(gw, pki, upgrade=False),
                      _proton_socket_client(gw, pki, upgrade=True)]
    for client in proton_clients:                      # a session each, for something to end
        session = client.connection.session()
        session.open()
        client.pump(lambda: bool(session.state & session.REMOTE_ACTIVE))
    assert wait_open_connections(gw, 3) == 3
    if reset:
        for sock in [p091._impl._transport._sock] + [c.sock for c in proton_clients]:
            reset_socket(sock)
    else:
        p091.close()
        for client in proton_clients:
            client.connection.close()                   # close, then wait for the answer
            client.wait_closed()
            client.close()
    assert wait_open_connections(gw, 0) == 0
    _assert_clean_log(gw)
    _assert_prompt_graceful_stop(gw)


def test_graceful_stop_closes_tls_connections_of_both_protocols_at_once(gw, pki):
    p091 = _pika(gw, pki)
    p091.channel()
    p10 = _proton(gw, pki)
    upgraded = _proton_socket_client(gw, pki, upgrade=True)
    assert wait_open_connections(gw, 3) == 3
    gw.signal(signal.SIGTERM)
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as info:
        p091.process_data_events(time_limit=TIMEOUT)
        p091.sleep(TIMEOUT)
    assert info.value.reply_code == 320
    try:
        p10.wait(lambda: bool(p10.conn.state & Endpoint.REMOTE_CLOSED), timeout=TIMEOUT)
    except ConnectionClosed:
        pass
    assert p10.conn.remote_condition.name == "amqp:connection:forced"
    upgraded.pump(lambda: bool(upgraded.connection.state & Endpoint.REMOTE_CLOSED))
    assert upgraded.connection.remote_condition.name == "amqp:connection:forced"
    assert gw.proc.wait(90) == 0, gw.log[-4000:]
    assert gw.wait_for_log(r"(?m)INFO gateway\.service: stopped$"), gw.log[-4000:]   # the whole log is read
    assert _ABORTING not in gw.log, gw.log[-4000:]
    _assert_clean_log(gw)
