"""Read socket options and TCP state of the gateway's sockets, from the test process.

A socket option is a property of the socket, which lives in the gateway process; the
client's end cannot show it, and ``ss -i`` does not print ``TCP_NODELAY``. Linux's
``pidfd_getfd(2)`` (5.6+) copies a descriptor of another process into ours; the copy
refers to the *same* socket, so ``getsockopt`` on it reads what the gateway set. The
gateway is our child, so ptrace permission (which the call needs) is ours.
"""
from __future__ import annotations

import ctypes
import errno
import os
import socket
import struct
from contextlib import contextmanager
from typing import Callable, Iterator, NamedTuple

__all__ = ["PeerSocketUnavailable", "TcpInfo", "gateway_side_socket", "gateway_side_tcp_nodelay",
           "listen_backlog", "tcp_info"]

_SYS_PIDFD_GETFD = 438          # the same number on every Linux architecture

_libc = ctypes.CDLL(None, use_errno=True)


class PeerSocketUnavailable(RuntimeError):
    """The kernel will not let us copy the gateway's descriptor (old kernel, seccomp,
    no ptrace permission): the caller decides whether that is a skip."""


def _copy_fd(pidfd: int, fd: int) -> int:
    copied = _libc.syscall(_SYS_PIDFD_GETFD, pidfd, fd, 0)
    if copied < 0:
        err = ctypes.get_errno()
        if err in (errno.ENOSYS, errno.EPERM, errno.EACCES):
            raise PeerSocketUnavailable(f"pidfd_getfd: {os.strerror(err)}")
        return -1                   # that descriptor closed meanwhile: not ours
    return copied


@contextmanager
def _socket_of(pid: int, wanted: Callable[[socket.socket], bool], what: str) -> Iterator[socket.socket]:
    """A copy of the first socket of process ``pid`` for which ``wanted`` holds."""
    pidfd = os.pidfd_open(pid)
    try:
        for name in os.listdir(f"/proc/{pid}/fd"):
            try:
                if not os.readlink(f"/proc/{pid}/fd/{name}").startswith("socket:"):
                    continue
            except FileNotFoundError:
                continue
            copied = _copy_fd(pidfd, int(name))
            if copied < 0:
                continue
            sock = socket.socket(fileno=copied)
            try:
                found = wanted(sock)
            except OSError:
                found = False
            if found:
                try:
                    yield sock
                finally:
                    sock.close()
                return
            sock.close()
    finally:
        os.close(pidfd)
    raise LookupError(f"process {pid} has no {what}")


def _peer(sock: socket.socket):
    try:
        return sock.getpeername()[:2]
    except OSError:              # a listening socket, or not connected
        return None


@contextmanager
def gateway_side_socket(pid: int, client: socket.socket) -> Iterator[socket.socket]:
    """The gateway's (``pid``) socket of the TCP connection whose client end is ``client``:
    the one whose peer address is the client's local address."""
    me = client.getsockname()[:2]
    with _socket_of(pid, lambda s: s.family == client.family and _peer(s) == me,
                    f"socket connected to {me}") as sock:
        yield sock


def gateway_side_tcp_nodelay(pid: int, client: socket.socket) -> bool:
    """Whether the gateway set ``TCP_NODELAY`` on its end of ``client``'s connection."""
    with gateway_side_socket(pid, client) as sock:
        return bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))


def listen_backlog(pid: int, port: int) -> int:
    """The backlog the kernel gave the listening TCP socket of process ``pid`` on
    ``port`` (what ``listen()`` asked for, capped at ``net.core.somaxconn``): for a
    listening socket ``tcp_info.tcpi_sacked`` holds it."""
    def listening(s: socket.socket) -> bool:
        return (s.type == socket.SOCK_STREAM and s.family in (socket.AF_INET, socket.AF_INET6)
                and s.getsockname()[1] == port and _peer(s) is None
                and s.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == 1)

    with _socket_of(pid, listening, f"socket listening on port {port}") as sock:
        return tcp_info(sock).sacked


class TcpInfo(NamedTuple):
    """The fields of Linux's ``struct tcp_info`` the tests read."""

    state: int
    retransmits: int        # retransmissions of the segment in flight now
    sacked: int             # on a listening socket: its backlog
    total_retrans: int      # every retransmission over the connection's life, SYNs included


def tcp_info(sock: socket.socket) -> TcpInfo:
    """``getsockopt(TCP_INFO)`` of ``sock`` (any process's socket: this one or a copy)."""
    raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
    (sacked,) = struct.unpack_from("=I", raw, 28)        # after 8 octets and 5 u32 fields
    (total_retrans,) = struct.unpack_from("=I", raw, 100)
    return TcpInfo(raw[0], raw[2], sacked, total_retrans)
