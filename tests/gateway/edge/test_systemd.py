import os
import socket
import uuid

import pytest
from twisted.internet.task import Clock

from gateway.edge.systemd import SystemdNotifier, Watchdog


@pytest.fixture
def path_socket(tmp_path):
    path = str(tmp_path / "notify.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    s.settimeout(2)
    yield path, s
    s.close()


@pytest.fixture
def abstract_socket():
    name = f"amqp-gateway-test-{uuid.uuid4().hex}"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind("\0" + name)
    s.settimeout(2)
    yield "@" + name, s
    s.close()


def test_absent_notify_socket_is_a_no_op():
    n = SystemdNotifier({})
    assert not n.enabled
    assert n.notify("READY=1") is False
    n.ready()
    n.stopping()


def test_path_socket_receives_ready_and_stopping(path_socket):
    path, s = path_socket
    n = SystemdNotifier({"NOTIFY_SOCKET": path})
    n.ready("listening")
    assert s.recv(1024) == b"READY=1\nSTATUS=listening"
    n.stopping()
    assert s.recv(1024) == b"STOPPING=1"


def test_abstract_socket(abstract_socket):
    name, s = abstract_socket
    n = SystemdNotifier({"NOTIFY_SOCKET": name})
    assert n.notify("READY=1")
    assert s.recv(1024) == b"READY=1"


def _pending(s: socket.socket) -> list[bytes]:
    """Every datagram already queued on ``s``, without waiting (notify is synchronous)."""
    out = []
    timeout = s.gettimeout()
    s.setblocking(False)
    try:
        while True:
            try:
                out.append(s.recv(64))
            except BlockingIOError:
                return out
    finally:
        s.settimeout(timeout)


def test_watchdog_pings_at_half_the_interval(path_socket):
    path, s = path_socket
    n = SystemdNotifier({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "2000000"})
    assert n.watchdog_interval == 2.0
    clock = Clock()
    w = Watchdog(n, clock=clock)
    w.start()
    assert _pending(s) == [b"WATCHDOG=1"]                 # at once
    for tick in range(1, 4):                              # then every 1.0 s, exactly
        (call,) = clock.getDelayedCalls()
        assert call.getTime() == pytest.approx(tick * 1.0)
        clock.advance(0.999)
        assert _pending(s) == []                          # not a moment early
        clock.advance(0.001)
        assert _pending(s) == [b"WATCHDOG=1"]             # once per period, not more
    w.stop()
    assert clock.getDelayedCalls() == []
    clock.advance(5.0)
    assert _pending(s) == []


def test_watchdog_for_another_pid_is_ignored(path_socket):
    path, _ = path_socket
    n = SystemdNotifier({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "2000000",
                         "WATCHDOG_PID": str(os.getpid() + 1)})
    assert n.watchdog_interval is None
