"""Read a socket option on the gateway's side of a connection, from the test process.

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
from contextlib import contextmanager
from typing import Iterator

__all__ = ["PeerSocketUnavailable", "gateway_side_socket", "gateway_side_tcp_nodelay"]

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
def gateway_side_socket(pid: int, client: socket.socket) -> Iterator[socket.socket]:
    """The gateway's (``pid``) socket of the TCP connection whose client end is ``client``:
    the one whose peer address is the client's local address."""
    wanted = client.getsockname()
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
                peer = sock.getpeername() if sock.type == socket.SOCK_STREAM else None
            except OSError:          # a listening socket, or not connected
                peer = None
            if peer is not None and peer[:2] == wanted[:2]:
                try:
                    yield sock
                finally:
                    sock.close()
                return
            sock.close()
    finally:
        os.close(pidfd)
    raise LookupError(f"process {pid} has no socket connected to {wanted}")


def gateway_side_tcp_nodelay(pid: int, client: socket.socket) -> bool:
    """Whether the gateway set ``TCP_NODELAY`` on its end of ``client``'s connection."""
    with gateway_side_socket(pid, client) as sock:
        return bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
