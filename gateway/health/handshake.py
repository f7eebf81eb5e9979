"""``amqp-gateway ping``: does the gateway answer AMQP on its listener?

"Answers" means what a client needs first: the TCP connection is accepted, the 0-9-1
protocol header (``AMQP 0 0 9 1``) gets ``connection.start`` back within the timeout
(after a TLS handshake on a TLS listener), and that frame decodes. That proves the
listener, the sniffer, the reactor and the 0-9-1 engine are alive, with no credentials:
a load balancer or a systemd ``ExecStartPost`` has none. The probe then closes the socket,
as the 0-9-1 specification lets a client do before ``connection.start-ok``.

TLS: nothing secret is sent, so the server certificate is verified only when a CA file
is given (``--cacert``); the probe checks liveness, not identity.
"""
from __future__ import annotations

import socket
import ssl
import time
from dataclasses import dataclass
from typing import Optional

from gateway.amqp091.errors import ConnectionException
from gateway.amqp091.frames import FrameReader, MethodFrame
from gateway.amqp091.methods import method_class
from gateway.health.target import Target
from gateway.product import PRODUCT
from gateway.protocol_header import AMQP091_HEADER

__all__ = ["HandshakeReply", "ProbeFailed", "amqp_handshake"]

_CONNECTION_START = method_class("connection.start")


class ProbeFailed(Exception):
    """The gateway did not answer; the text is the one line for the operator."""


@dataclass(frozen=True, slots=True)
class HandshakeReply:
    """What ``connection.start`` said, and how long it took (seconds)."""

    product: str
    version: str
    platform: str
    mechanisms: tuple[str, ...]
    elapsed: float
    tls_version: Optional[str] = None
    #: the ``information`` property (a gateway announcing RabbitMQ's name keeps ours here)
    information: str = ""

    @property
    def who(self) -> str:
        """``product version`` as announced, for one line of output; a gateway announcing
        RabbitMQ's name (``rabbitmq_version``) is named as itself, announcing that."""
        announced = f"{self.product} {self.version}".strip() or "an AMQP 0-9-1 server"
        if self.product != PRODUCT and self.information.startswith(PRODUCT + " "):
            return f"{self.information.split(',', 1)[0]} (announcing {announced})"
        return announced


def _text(value: object) -> str:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    return "" if value is None else str(value)


def _tls_context(cafile: Optional[str]) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if cafile:
        ctx.load_verify_locations(cafile)
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def amqp_handshake(target: Target, timeout: float = 5.0, cafile: Optional[str] = None) -> HandshakeReply:
    """Send the 0-9-1 header to ``target`` and read ``connection.start``; raises
    ``ProbeFailed`` naming the address and what went wrong."""
    where = target.address
    started = time.monotonic()
    try:
        sock = socket.create_connection((target.host, target.port), timeout=timeout)
    except socket.gaierror as exc:
        raise ProbeFailed(f"cannot resolve {target.host}: {exc.strerror}") from None
    except ConnectionRefusedError:
        raise ProbeFailed(f"nothing listens on {where} (connection refused): "
                          "is the gateway running, on this address?") from None
    except socket.timeout:
        raise ProbeFailed(f"no TCP connection to {where} within {timeout:g} s") from None
    except OSError as exc:
        raise ProbeFailed(f"cannot connect to {where}: {exc.strerror or exc}") from None
    tls_version = None
    try:
        if target.tls:
            try:
                sock = _tls_context(cafile).wrap_socket(
                    sock, server_hostname=None if target.is_ip and not cafile else target.host)
            except (ssl.SSLError, ssl.CertificateError) as exc:
                raise ProbeFailed(f"TLS handshake with {where} failed: {exc}") from None
            tls_version = sock.version()
        sock.sendall(AMQP091_HEADER)
        start = _read_connection_start(sock, where, timeout)
    except socket.timeout:
        raise ProbeFailed(f"{where} accepted the connection but sent no connection.start "
                          f"within {timeout:g} s") from None
    except OSError as exc:
        raise ProbeFailed(f"{where}: {exc.strerror or exc} during the AMQP handshake") from None
    finally:
        sock.close()
    props = start.server_properties or {}
    return HandshakeReply(
        product=_text(props.get("product")), version=_text(props.get("version")),
        platform=_text(props.get("platform")),
        mechanisms=tuple(_text(start.mechanisms).split()), elapsed=time.monotonic() - started,
        tls_version=tls_version, information=_text(props.get("information")))


def _read_connection_start(sock: socket.socket, where: str, timeout: float):
    """The first frame, which must be ``connection.start``. A server that does not speak
    0-9-1 answers with its own protocol header (``AMQP`` and 4 version bytes); a frame
    starts with its type octet (1), never ``A``."""
    reader = FrameReader()
    deadline = time.monotonic() + timeout
    received = b""
    while True:
        sock.settimeout(max(0.001, deadline - time.monotonic()))
        data = sock.recv(4096)
        if not data:
            raise ProbeFailed(f"{where} closed the connection without answering the "
                              "AMQP 0-9-1 header")
        received += data
        if received[:1] == b"A":
            if len(received) < 8:
                continue
            raise ProbeFailed(f"{where} does not speak AMQP 0-9-1 (it answered with the "
                              f"protocol header {received[:4]!r} {' '.join(map(str, received[4:8]))})")
        try:
            frames = reader.feed(data)
        except ConnectionException as exc:
            raise ProbeFailed(f"{where} answered with something other than AMQP 0-9-1 "
                              f"frames ({exc})") from None
        if frames:
            first = frames[0]
            if isinstance(first, MethodFrame) and isinstance(first.method, _CONNECTION_START):
                return first.method
            raise ProbeFailed(f"{where} answered with {type(first).__name__} instead of "
                              "connection.start")
