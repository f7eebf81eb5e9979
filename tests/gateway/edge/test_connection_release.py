"""A closed connection is freed at once: by reference counting, not by the rare full
garbage collection.

The real ``GatewayService`` runs in this process (on the reactor thread) with a plain,
a ``tls: on`` and a ``tls: auto`` listener; real clients (pika; proton's engine over a
plain or TLS socket, also after the ``AMQP 2 1 0 0`` header) run in threads over real
sockets, do some work (channels, an exclusive queue, publish and consume; 1.0 sessions
and links, a dynamic queue, transfers, one left unsettled), and end with the protocol's
close or a TCP reset. While they are open, the test takes weak references to every
object the edge made for each connection: the sniffing protocols, Twisted's transports
and TLS wrappers, the engine drivers and the engines.

Why: the gateway collects the old generation rarely (``interpreter_tuning.tune_garbage_collector``),
and a served connection's objects are old by the time it closes, so a connection caught
in a reference cycle stays in memory long after it closed (issue 30: 27 KB per 1.0
connection and 4.7 KB per 0-9-1 connection left after each round of 3,000). The test
makes the connections' objects old (a full collection while they are open, with the
collector off), closes them, then runs only the young generations' collection (what the
gateway does all the time, which frees Twisted's own short-lived cycles, such as a TLS
close's traceback): every weak reference must be dead. A full collection afterwards must
not find one alive either, and proton's transports, connections, sessions and links
must all be freed (``cproton.retained_count``, the Python values their C records hold).
"""
from __future__ import annotations

import gc
import socket
import ssl
import weakref
from typing import Any, Callable

import cproton
import pika
import pytest
import pytest_twisted
from proton import Connection, Message
from twisted.internet import reactor, task, threads

from gateway.config import load_config_text
from gateway.protocol_header import AMQP10_TLS_HEADER
from gateway.service import GatewayService
from tests.support.amqp10_socket_client import SocketClient, read_exactly
from tests.support.certificates import TestPKI
from tests.support.connection_storm import reset_socket
from tests.support import reactor_thread
from tests.support.gateway_process import password_hash

TIMEOUT = 10
MODES = ("off", "on", "auto")


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("release-pki"))
    ca = TestPKI(d)
    return {"ca": ca, "server": ca.issue("gateway.test", names=("gateway.test", "localhost"))}


def _config(pki, state_dir: str) -> str:
    server = pki["server"]
    listeners = "".join(
        f"  - {{name: 'tls-{mode}', host: 127.0.0.1, port: 0, tls: '{mode}'"
        + (f", tls_cert_file: {server.cert_file}, tls_key_file: {server.key_file}"
           if mode != "off" else "") + "}\n"
        for mode in MODES)
    return (f"state_dir: {state_dir}\nlisteners:\n{listeners}"
            "metrics: {enabled: false}\nledger: {enabled: false}\n"
            "users:\n  - name: guest\n"
            f"    password_hash: \"{password_hash('guest')}\"\n"
            "    permissions:\n      /: {configure: '.*', write: '.*', read: '.*'}\n")


@pytest.fixture
def service(pki, tmp_path):
    config = load_config_text(_config(pki, str(tmp_path)))
    svc = reactor_thread.call(GatewayService, config, reactor)
    reactor_thread.call(svc.start)
    yield svc
    reactor_thread.call(svc.stop)


def _port(svc: GatewayService, mode: str) -> int:
    return svc.ports[MODES.index(mode)].getHost().port


def _client_context(pki) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=pki["ca"].ca_file)
    ctx.check_hostname = False
    return ctx


# -- clients (each runs in a thread; returns a callable that ends it) -------------------
def _pika_client(port: int, pki, tls: bool) -> Callable[[bool], None]:
    ssl_options = pika.SSLOptions(_client_context(pki), "localhost") if tls else None
    conn = pika.BlockingConnection(pika.ConnectionParameters(
        host="127.0.0.1", port=port, credentials=pika.PlainCredentials("guest", "guest"),
        ssl_options=ssl_options, socket_timeout=TIMEOUT, stack_timeout=TIMEOUT,
        connection_attempts=1))
    ch = conn.channel()
    q = ch.queue_declare("", exclusive=True).method.queue
    ch.confirm_delivery()
    ch.basic_publish("", q, b"one")
    ch.basic_publish("", q, b"two")
    got: list[bytes] = []
    ch.basic_consume(q, lambda c, m, p, body: got.append(body))
    while len(got) < 2:
        conn.process_data_events(time_limit=1)
    conn.channel()                                   # a second channel, left open

    def end(reset: bool) -> None:
        if reset:
            reset_socket(conn._impl._transport._sock)
        else:
            conn.close()
    return end


def _proton_client(port: int, pki, how: str) -> Callable[[bool], None]:
    raw = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    if how == "upgrade":
        raw.sendall(AMQP10_TLS_HEADER)
        assert read_exactly(raw, 8) == AMQP10_TLS_HEADER
    sock = _client_context(pki).wrap_socket(raw) if how in ("tls", "upgrade") else raw
    client = SocketClient(sock).open()
    assert client.connection.state & Connection.REMOTE_ACTIVE
    _session, _receiver, sender = client.dynamic_round_trip(b"through a dynamic queue")
    sender.delivery(b"t2")                           # left unsettled at the end
    sender.send(Message(body=b"in flight").encode())
    sender.advance()
    client.pump(lambda: True)                        # written, not waited for

    def end(reset: bool) -> None:
        if reset:
            reset_socket(client.sock)
        else:
            client.connection.close()
            client.wait_closed()
            client.close()
    return end


# -- what the edge made for a connection ------------------------------------------------
def _edge_objects(svc: GatewayService) -> list[tuple[str, Any]]:
    """(what, object) for every per-connection object of every open connection."""
    found: list[tuple[str, Any]] = []
    for factory in svc.factories:
        for proto in factory.connections:
            chain = [proto] + ([proto.inner] if proto.inner is not None else [])
            for p in chain:
                found.append(("sniffer", p))
                found.append((f"transport {type(p.transport).__name__}", p.transport))
            served = proto.effective
            assert served.driver is not None, "a client's connection has no engine"
            found.append(("driver", served.driver))
            found.append((f"engine {type(served.driver.engine).__name__}", served.driver.engine))
    return found


async def _until(predicate: Callable[[], bool], timeout: float = TIMEOUT) -> bool:
    for _ in range(int(timeout / 0.05)):
        if predicate():
            return True
        await task.deferLater(reactor, 0.05, lambda: None)
    return predicate()


def _open_count(svc: GatewayService) -> int:
    return sum(len(f.connections) for f in svc.factories)


def _survivors(refs: list[tuple[str, weakref.ref]]) -> list[str]:
    out = []
    for what, ref in refs:
        obj = ref()
        if obj is not None:
            holders = [type(r).__name__ for r in gc.get_referrers(obj)
                       if r is not refs and not isinstance(r, list)][:6]
            out.append(f"{what} (held by {holders})")
    return out


CLIENTS = [
    ("0-9-1 plain", "off", lambda port, pki: _pika_client(port, pki, tls=False)),
    ("0-9-1 tls on", "on", lambda port, pki: _pika_client(port, pki, tls=True)),
    ("0-9-1 tls auto", "auto", lambda port, pki: _pika_client(port, pki, tls=True)),
    ("1.0 plain", "off", lambda port, pki: _proton_client(port, pki, "plain")),
    ("1.0 tls on", "on", lambda port, pki: _proton_client(port, pki, "tls")),
    ("1.0 tls auto", "auto", lambda port, pki: _proton_client(port, pki, "tls")),
    ("1.0 AMQP 2 1 0 0", "auto", lambda port, pki: _proton_client(port, pki, "upgrade")),
]


@pytest.mark.parametrize("reset", [False, True], ids=["close", "reset"])
@pytest_twisted.ensureDeferred
async def test_closed_connections_are_freed_without_a_full_collection(service, pki, reset):
    gc.collect()
    proton_objects = cproton.retained_count()     # Python values proton's C objects hold
    gc.disable()
    try:
        ends = []
        for _name, mode, open_client in CLIENTS:
            ends.append(await threads.deferToThread(open_client, _port(service, mode), pki))
        assert await _until(lambda: _open_count(service) == len(CLIENTS))
        refs = [(what, weakref.ref(obj)) for what, obj in _edge_objects(service)]
        assert len({what for what, _ in refs}) >= 6
        gc.collect()                       # what serves a connection is old now
        for end in ends:
            await threads.deferToThread(end, reset)
        del ends, end                      # the clients, proton objects included
        assert await _until(lambda: _open_count(service) == 0), "connections still open"
        await task.deferLater(reactor, 0.1, lambda: None)      # pending flushes run
        gc.collect(1)                      # the young generations only
        alive = _survivors(refs)
        assert not alive, "kept by a reference cycle, or worse: " + "; ".join(alive)
    finally:
        gc.enable()
    gc.collect()
    assert not _survivors(refs), "alive even after a full collection"
    assert cproton.retained_count() == proton_objects, "proton objects of the engines not freed"
