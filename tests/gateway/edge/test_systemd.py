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


def test_watchdog_pings_at_half_the_interval(path_socket):
    path, s = path_socket
    n = SystemdNotifier({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "2000000"})
    assert n.watchdog_interval == 2.0
    clock = Clock()
    w = Watchdog(n, clock=clock)
    w.start()
    assert s.recv(64) == b"WATCHDOG=1"
    clock.advance(1.0)
    assert s.recv(64) == b"WATCHDOG=1"
    w.stop()
    clock.advance(5.0)
    s.settimeout(0.1)
    with pytest.raises(socket.timeout):
        s.recv(64)


def test_watchdog_for_another_pid_is_ignored(path_socket):
    path, _ = path_socket
    n = SystemdNotifier({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "2000000",
                         "WATCHDOG_PID": str(os.getpid() + 1)})
    assert n.watchdog_interval is None
