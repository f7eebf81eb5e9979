"""What every TCP connection of the gateway gets, and how many the process may hold.

``prepare_connection`` is the one rule for a connected socket, accepted by a listener
(plain, ``tls: on`` or ``tls: auto``) or opened by the gateway (a forwarder's, from its
``connectionMade``): it turns Nagle's algorithm off (``TCP_NODELAY``).

Why: AMQP answers are small frames written as soon as they are known (a 0-9-1
``basic.ack`` confirm, a 1.0 ``disposition``, a ``flow``). With Nagle on, such a frame
waits while an earlier one is unacknowledged, and clients delay their ACK (40 ms or
more on Linux) until they have something to send: a publisher with a window of unconfirmed
messages then waits on the timers instead of the gateway. Measured with 4 KiB messages and
500 in flight: 11-14k msgs/s with the gateway at 15-25% of a core, 48-51k msgs/s with
``TCP_NODELAY``. RabbitMQ's listeners set it by default too. Frames do not become a
packet each: Twisted sends what one reactor turn wrote in one ``send``.

``raise_open_files_limit`` lifts the process's soft limit on open files to its hard
limit at start, as Go and the JVM do: each connection is a file descriptor, and a
shell's default soft limit (1024 on Debian) runs out first: beyond it ``accept`` fails
with ``EMFILE`` and Twisted closes each further connection at once (measured: 990 of
2,000 clients connecting together closed without a byte). A systemd unit sets its own
limit (``deploy/amqp-gateway.service``). The reactor polls with epoll, which has no
limit of 1024 descriptors the way ``select`` has.
"""
from __future__ import annotations

import logging
import resource

from twisted.internet.interfaces import ITCPTransport

log = logging.getLogger(__name__)

__all__ = ["prepare_connection", "raise_open_files_limit"]

#: where the kernel says how many descriptors a process may have at most
NR_OPEN_PATH = "/proc/sys/fs/nr_open"


def prepare_connection(transport: object) -> None:
    """Set the socket options of one connection. A TLS wrapper (Twisted's
    ``TLSMemoryBIOProtocol``) provides the interfaces of the TCP transport beneath it and
    passes the call on; a transport that is not TCP (a memory transport) has no options."""
    if ITCPTransport.providedBy(transport):
        transport.setTcpNoDelay(True)


def raise_open_files_limit() -> int:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit; returns the soft limit now.

    An unlimited hard limit is taken as the kernel's ``fs.nr_open``. Never raises: a
    limit that cannot be changed stays as it is (and is logged)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard
    if hard == resource.RLIM_INFINITY:
        try:
            with open(NR_OPEN_PATH) as f:
                want = int(f.read())
        except (OSError, ValueError):
            return soft
    if soft != resource.RLIM_INFINITY and soft >= want:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    except (OSError, ValueError) as exc:
        log.warning("open files limit stays at %d (could not raise it to %d: %s)", soft, want, exc)
        return soft
    log.info("open files limit raised from %d to %d", soft, want)
    return want
