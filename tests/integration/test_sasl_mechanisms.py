"""Every SASL mechanism accepting a right and refusing a wrong credential, per protocol.

0-9-1: PLAIN (pika), AMQPLAIN (py-amqp), EXTERNAL (pika ``ExternalCredentials`` over
TLS with a client certificate). 1.0: PLAIN and EXTERNAL (proton, ``SSLDomain``),
ANONYMOUS (allowed and refused), SCRAM-SHA-256 (a raw socket driving our SASL layer
with ``scramp``: proton's bundled SASL has no SCRAM without Cyrus).

The listener serves plain and TLS on one port (``tls: auto``) and verifies client
certificates when given (``optional``); a certificate's CN names the user for EXTERNAL.
"""
from __future__ import annotations

import socket
import ssl

import amqp
import amqp.exceptions
import pika
import pika.credentials
import pika.exceptions
import pytest
import scramp
from proton import ConnectionException, Message, SSLDomain
from proton.utils import BlockingConnection

from gateway.amqp091 import methods as m
from gateway.amqp091.frames import FrameReader, MethodFrame
from gateway.amqp10.sasl import SASL_INIT, SASL_MECHANISMS, SASL_OUTCOME, SASL_CHALLENGE, \
    SASL_RESPONSE, encode_sasl_frame
from gateway.protocol_header import AMQP091_HEADER, AMQP10_SASL_HEADER
from tests.support.access_config import access_config, tls_listener
from tests.support.amqp091_clients import pika_params
from tests.support.amqp10_socket_client import read_exactly, read_sasl_frames
from tests.support.certificates import TestPKI
from tests.support.frame_builder import ClientFrames
from tests.support.gateway_process import make_gateway

pytestmark = pytest.mark.integration

TIMEOUT = 10


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("sasl-pki"))
    ca = TestPKI(d)
    return {
        "ca": ca,
        "server": ca.issue("gateway.test", names=("gateway.test", "localhost")),
        "alice": ca.issue("alice", server=False),
        "nobody": ca.issue("nobody-here", server=False),
        "forged": TestPKI(d, ca_name="Other CA").issue("alice", server=False, tag="forged"),
    }


#: the module's gateways answer wrong passwords at once: the tests of a module share one
#: and their failures add up (to held answers of 2 s, 4 s, ...) in whatever order they run;
#: the throttle is tests/integration/test_login_throttle.py's subject
UNTHROTTLED = {"failed_logins_before_delay": 1_000_000}


@pytest.fixture(scope="module")
def gw(pki):
    gateway = make_gateway(config_text=access_config(
        limits=UNTHROTTLED,
        listener_extra=tls_listener(pki["ca"], pki["server"], mode="auto", verify="optional")
        + "    allow_anonymous: true\n")).start()
    yield gateway
    gateway.stop()


def client_context(pki, cert=None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=pki["ca"].ca_file)
    ctx.check_hostname = False
    if cert is not None:
        ctx.load_cert_chain(cert.cert_file, cert.key_file)
    return ctx


# ---------------------------------------------------------------------- what is offered

def _socket(gw, pki=None, cert=None, tls=False) -> socket.socket:
    """A connection to ``gw``: plain, or TLS (``tls: auto`` sniffs the ClientHello)."""
    sock = socket.create_connection(("127.0.0.1", gw.amqp_port), timeout=TIMEOUT)
    if tls:
        sock = client_context(pki, cert).wrap_socket(sock)
    return sock


def _next_091_method(sock: socket.socket, reader: FrameReader) -> m.Method:
    while True:
        data = sock.recv(65536)
        if not data:
            raise EOFError("the gateway closed the connection")
        methods = [f.method for f in reader.feed(data) if isinstance(f, MethodFrame)]
        if methods:
            return methods[0]


def _offered_091(sock: socket.socket) -> tuple[list[str], FrameReader]:
    """Send the 0-9-1 header; return the mechanisms of ``connection.start`` as sent."""
    sock.sendall(AMQP091_HEADER)
    reader = FrameReader(0)
    start = _next_091_method(sock, reader)
    assert isinstance(start, m.ConnectionStart)
    return bytes(start.mechanisms).decode().split(" "), reader


def _offered_10(sock: socket.socket) -> list[str]:
    """Send the 1.0 SASL header; return the ``sasl-mechanisms`` list as sent."""
    sock.sendall(AMQP10_SASL_HEADER)
    assert read_exactly(sock, 8) == AMQP10_SASL_HEADER
    ((descriptor, fields),) = read_sasl_frames(sock, 1)
    assert descriptor == SASL_MECHANISMS
    mechs = fields[0]
    return [str(mechs)] if isinstance(mechs, str) else [str(mech) for mech in mechs]


def _login_091_raw(sock: socket.socket, mechanism: str, response: bytes) -> m.Method:
    """Offer ``mechanism`` whatever the server listed; return the server's answer."""
    _, reader = _offered_091(sock)
    sock.sendall(ClientFrames().method(0, m.ConnectionStartOk(
        client_properties={"capabilities": {"authentication_failure_close": True}},
        mechanism=mechanism, response=response, locale="en_US")))
    return _next_091_method(sock, reader)


@pytest.fixture(scope="module")
def plain_only(pki):
    """A listener offering only PLAIN, although TLS client certificates (EXTERNAL) and
    ANONYMOUS would be available on it otherwise."""
    gateway = make_gateway(config_text=access_config(
        limits=UNTHROTTLED,
        listener_extra=tls_listener(pki["ca"], pki["server"], mode="auto", verify="optional")
        + "    allow_anonymous: true\n    mechanisms: [PLAIN]\n")).start()
    yield gateway
    gateway.stop()


def test_default_listener_offers_what_applies_per_protocol(gw, pki):
    with _socket(gw) as s:
        assert _offered_091(s)[0] == ["PLAIN", "AMQPLAIN", "ANONYMOUS"]
    with _socket(gw, pki, pki["alice"], tls=True) as s:
        assert _offered_091(s)[0] == ["PLAIN", "AMQPLAIN", "EXTERNAL", "ANONYMOUS"]
    with _socket(gw) as s:
        assert _offered_10(s) == ["SCRAM-SHA-256", "PLAIN", "ANONYMOUS"]
    with _socket(gw, pki, pki["alice"], tls=True) as s:
        assert _offered_10(s) == ["SCRAM-SHA-256", "PLAIN", "EXTERNAL", "ANONYMOUS"]


@pytest.mark.parametrize("tls", [False, True])
def test_listener_mechanisms_are_exactly_what_091_start_lists(plain_only, pki, tls):
    with _socket(plain_only, pki, pki["alice"] if tls else None, tls=tls) as s:
        assert _offered_091(s)[0] == ["PLAIN"]


@pytest.mark.parametrize("tls", [False, True])
def test_listener_mechanisms_are_exactly_what_10_sasl_mechanisms_lists(plain_only, pki, tls):
    with _socket(plain_only, pki, pki["alice"] if tls else None, tls=tls) as s:
        assert _offered_10(s) == ["PLAIN"]


def test_a_mechanism_the_listener_does_not_offer_is_refused(plain_only):
    pika.BlockingConnection(pika_params(plain_only, user="alice", password="secret")).close()
    with _socket(plain_only) as s:
        answer = _login_091_raw(s, "AMQPLAIN", b"")
    assert isinstance(answer, m.ConnectionClose) and answer.reply_code == 403
    with _socket(plain_only) as s:
        answer = _login_091_raw(s, "ANONYMOUS", b"trace")     # allowed, but not offered here
    assert isinstance(answer, m.ConnectionClose) and answer.reply_code == 403


# ---------------------------------------------------------------------- 0-9-1 ANONYMOUS

class AnonymousCredentials(pika.credentials.PlainCredentials):
    """pika has no ANONYMOUS; this one answers with it when offered (trace text as the
    response) and records the mechanisms the server listed."""

    TYPE = "ANONYMOUS"

    def __init__(self) -> None:
        super().__init__("anonymous", "")
        self.offered: list[str] = []

    def __deepcopy__(self, memo):   # pika copies its credentials; keep recording here
        return self

    def response_for(self, start):
        self.offered = pika.compat.as_bytes(start.mechanisms).decode().split(" ")
        if self.TYPE not in self.offered:
            return None, None
        return self.TYPE, b"integration test"


def test_091_anonymous_where_allowed_is_the_configured_user(fresh_gateway):
    gw = fresh_gateway(config_text=access_config(
        listener_extra="    allow_anonymous: true\n", extra="amqp10:\n  default_user: alice\n"))
    creds = AnonymousCredentials()
    conn = pika.BlockingConnection(pika.ConnectionParameters(
        host="127.0.0.1", port=gw.amqp_port, credentials=creds, socket_timeout=TIMEOUT,
        stack_timeout=TIMEOUT, connection_attempts=1))
    assert "ANONYMOUS" in creds.offered
    _is_alice_only_091(conn)                                # amqp10.default_user


def test_091_anonymous_refused_where_not_allowed(fresh_gateway):
    strict = fresh_gateway(config_text=access_config())
    with _socket(strict) as s:
        assert "ANONYMOUS" not in _offered_091(s)[0]
    with _socket(strict) as s:
        answer = _login_091_raw(s, "ANONYMOUS", b"trace")
    assert isinstance(answer, m.ConnectionClose)
    assert answer.reply_code == 403 and "ACCESS_REFUSED" in answer.reply_text
    creds = AnonymousCredentials()
    with pytest.raises(pika.exceptions.AuthenticationError):  # pika: nothing it can do
        pika.BlockingConnection(pika.ConnectionParameters(
            host="127.0.0.1", port=strict.amqp_port, credentials=creds, socket_timeout=TIMEOUT,
            stack_timeout=TIMEOUT, connection_attempts=1))
    assert creds.offered and "ANONYMOUS" not in creds.offered


# ---------------------------------------------------------------------- 0-9-1

def test_091_plain_right_and_wrong(gw):
    conn = pika.BlockingConnection(pika_params(gw, user="alice", password="secret"))
    assert conn.is_open
    conn.close()
    with pytest.raises(pika.exceptions.ProbableAuthenticationError) as info:
        pika.BlockingConnection(pika_params(gw, user="alice", password="wrong"))
    assert "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN" in str(info.value)


def test_091_amqplain_right_and_wrong(gw):
    conn = amqp.Connection(host=f"127.0.0.1:{gw.amqp_port}", userid="alice", password="secret",
                           login_method="AMQPLAIN", connect_timeout=TIMEOUT)
    conn.connect()
    assert conn.connected
    conn.close()
    bad = amqp.Connection(host=f"127.0.0.1:{gw.amqp_port}", userid="alice", password="wrong",
                          login_method="AMQPLAIN", connect_timeout=TIMEOUT)
    with pytest.raises(amqp.exceptions.AccessRefused) as info:
        bad.connect()
    assert "mechanism AMQPLAIN" in str(info.value)


def _pika_external(gw, pki, cert) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters(
        host="127.0.0.1", port=gw.amqp_port, credentials=pika.credentials.ExternalCredentials(),
        ssl_options=pika.SSLOptions(client_context(pki, cert), "localhost"),
        socket_timeout=TIMEOUT, stack_timeout=TIMEOUT, connection_attempts=1))


def _whoami_091(conn: pika.BlockingConnection, user: str) -> None:
    """Publishing with user_id=<user> succeeds only when logged in as that user."""
    ch = conn.channel()
    q = ch.queue_declare("", exclusive=True).method.queue
    ch.confirm_delivery()
    ch.basic_publish("", q, b"x", pika.BasicProperties(user_id=user))


def _is_alice_only_091(conn: pika.BlockingConnection) -> None:
    """Logged in as alice: her user_id is accepted, another's refused; closes ``conn``."""
    _whoami_091(conn, "alice")
    ch = conn.channel()
    ch.confirm_delivery()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
        ch.basic_publish("", "nowhere", b"x", pika.BasicProperties(user_id="guest"))
    assert "authenticated user was 'alice'" in info.value.reply_text
    conn.close()


def test_091_external_logs_in_as_the_certificate_cn(gw, pki):
    _is_alice_only_091(_pika_external(gw, pki, pki["alice"]))


def test_091_external_with_a_cn_that_is_no_user_is_refused(gw, pki):
    with pytest.raises(pika.exceptions.ProbableAuthenticationError) as info:
        _pika_external(gw, pki, pki["nobody"])
    assert "mechanism EXTERNAL" in str(info.value)


class RecordingExternal(pika.credentials.ExternalCredentials):
    """pika's EXTERNAL, recording the mechanisms the server listed."""

    def __init__(self) -> None:
        super().__init__()
        self.offered: list[str] = []

    def __deepcopy__(self, memo):   # pika copies its credentials; keep recording here
        return self

    def response_for(self, start):
        self.offered = pika.compat.as_bytes(start.mechanisms).decode().split(" ")
        return super().response_for(start)


def test_091_external_without_a_certificate_is_not_offered(gw, pki):
    creds = RecordingExternal()
    params = pika.ConnectionParameters(
        host="127.0.0.1", port=gw.amqp_port, credentials=creds,
        ssl_options=pika.SSLOptions(client_context(pki, None), "localhost"),
        socket_timeout=TIMEOUT, stack_timeout=TIMEOUT, connection_attempts=1)
    with pytest.raises(pika.exceptions.AuthenticationError) as info:
        pika.BlockingConnection(params)
    assert not isinstance(info.value, pika.exceptions.ProbableAuthenticationError)
    assert creds.offered == ["PLAIN", "AMQPLAIN", "ANONYMOUS"]   # over TLS, no certificate
    with _socket(gw) as s:                                          # nor without TLS
        assert "EXTERNAL" not in _offered_091(s)[0]
    with_cert = RecordingExternal()
    conn = pika.BlockingConnection(pika.ConnectionParameters(
        host="127.0.0.1", port=gw.amqp_port, credentials=with_cert,
        ssl_options=pika.SSLOptions(client_context(pki, pki["alice"]), "localhost"),
        socket_timeout=TIMEOUT, stack_timeout=TIMEOUT, connection_attempts=1))
    assert "EXTERNAL" in with_cert.offered
    conn.close()


def test_091_certificate_from_another_ca_fails_the_handshake(gw, pki):
    with pytest.raises(pika.exceptions.AMQPConnectionError):
        _pika_external(gw, pki, pki["forged"])


# ---------------------------------------------------------------------- 1.0

def _connect10(gw, **kwargs) -> BlockingConnection:
    kwargs.setdefault("sasl_enabled", True)
    kwargs.setdefault("allow_insecure_mechs", True)
    url = kwargs.pop("url", f"amqp://127.0.0.1:{gw.amqp_port}")
    return BlockingConnection(url, timeout=TIMEOUT, virtual_host="vhost:/", **kwargs)


def _whoami_10(conn: BlockingConnection, user: str) -> None:
    receiver = conn.create_receiver(None, dynamic=True)
    sender = conn.create_sender(receiver.link.remote_source.address)
    sender.send(Message(body=b"me", user_id=user.encode()))  # raises unless accepted
    assert bytes(receiver.receive(timeout=TIMEOUT).body) == b"me"
    receiver.accept()


def test_10_plain_right_and_wrong(gw):
    conn = _connect10(gw, user="alice", password="secret", allowed_mechs="PLAIN")
    _whoami_10(conn, "alice")
    conn.close()
    with pytest.raises(ConnectionException) as info:
        _connect10(gw, user="alice", password="wrong", allowed_mechs="PLAIN")
    assert "Authentication failed" in str(info.value) or "unauthorized-access" in str(info.value)


def test_10_anonymous_where_allowed(gw):
    conn = _connect10(gw, allowed_mechs="ANONYMOUS")
    _whoami_10(conn, "guest")  # amqp10.default_user is the anonymous user
    conn.close()


def test_10_anonymous_refused_where_not_allowed(fresh_gateway):
    strict = fresh_gateway(config_text=access_config())
    with pytest.raises(ConnectionException):
        _connect10(strict, allowed_mechs="ANONYMOUS")


def _ssl_domain(pki, cert) -> SSLDomain:
    domain = SSLDomain(SSLDomain.MODE_CLIENT)
    domain.set_trusted_ca_db(pki["ca"].ca_file)
    domain.set_peer_authentication(SSLDomain.VERIFY_PEER)
    if cert is not None:
        domain.set_credentials(cert.cert_file, cert.key_file, None)
    return domain


def test_10_external_logs_in_as_the_certificate_cn(gw, pki):
    conn = _connect10(gw, url=f"amqps://127.0.0.1:{gw.amqp_port}",
                      ssl_domain=_ssl_domain(pki, pki["alice"]), allowed_mechs="EXTERNAL")
    _whoami_10(conn, "alice")
    conn.close()


def test_10_external_with_a_cn_that_is_no_user_is_refused(gw, pki):
    with pytest.raises(ConnectionException) as info:
        _connect10(gw, url=f"amqps://127.0.0.1:{gw.amqp_port}",
                   ssl_domain=_ssl_domain(pki, pki["nobody"]), allowed_mechs="EXTERNAL")
    assert "Authentication failed" in str(info.value) or "auth" in str(info.value).lower()


def test_10_external_is_not_offered_without_a_verified_certificate(gw, pki):
    with _socket(gw, pki, None, tls=True) as s:
        assert "EXTERNAL" not in _offered_10(s)
    with _socket(gw) as s:
        assert "EXTERNAL" not in _offered_10(s)
    with _socket(gw, pki, pki["alice"], tls=True) as s:
        assert "EXTERNAL" in _offered_10(s)
    with pytest.raises(ConnectionException):
        _connect10(gw, url=f"amqps://127.0.0.1:{gw.amqp_port}", ssl_domain=_ssl_domain(pki, None),
                   allowed_mechs="EXTERNAL")


def test_10_certificate_from_another_ca_fails_the_handshake(gw, pki):
    with pytest.raises(ConnectionException) as info:
        _connect10(gw, url=f"amqps://127.0.0.1:{gw.amqp_port}",
                   ssl_domain=_ssl_domain(pki, pki["forged"]), allowed_mechs="EXTERNAL")
    assert "ssl" in str(info.value).lower() or "tls" in str(info.value).lower()


def _scram_login(gw, user: str, password: str) -> tuple[int, list]:
    """Run SCRAM-SHA-256 against our SASL layer; return (outcome code, outcome fields)
    after checking the server's signature when the login succeeded."""
    client = scramp.ScramClient(["SCRAM-SHA-256"], user, password)
    with socket.create_connection(("127.0.0.1", gw.amqp_port), timeout=TIMEOUT) as sock:
        sock.sendall(AMQP10_SASL_HEADER)
        assert read_exactly(sock, 8) == AMQP10_SASL_HEADER
        ((descriptor, fields),) = read_sasl_frames(sock, 1)
        assert descriptor == SASL_MECHANISMS
        assert "SCRAM-SHA-256" in [str(mech) for mech in fields[0]]
        from proton import symbol
        sock.sendall(encode_sasl_frame(SASL_INIT, [symbol("SCRAM-SHA-256"),
                                                   client.get_client_first().encode()]))
        ((descriptor, fields),) = read_sasl_frames(sock, 1)
        assert descriptor == SASL_CHALLENGE
        client.set_server_first(bytes(fields[0]).decode())
        sock.sendall(encode_sasl_frame(SASL_RESPONSE, [client.get_client_final().encode()]))
        ((descriptor, fields),) = read_sasl_frames(sock, 1)
        assert descriptor == SASL_OUTCOME
        code = int(fields[0])
        if code == 0:
            client.set_server_final(bytes(fields[1]).decode())  # raises on a bad signature
        return code, fields


def test_10_scram_sha_256_right_and_wrong(gw):
    code, fields = _scram_login(gw, "alice", "secret")
    assert code == 0 and bytes(fields[1]).startswith(b"v=")
    code, _ = _scram_login(gw, "alice", "wrong")
    assert code == 1  # auth
    code, _ = _scram_login(gw, "no-such-user", "secret")
    assert code == 1
