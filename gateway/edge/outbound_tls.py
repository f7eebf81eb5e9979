"""TLS and endpoints for outbound connections to remotes (every ``kind``).

``outbound_endpoint(reactor, remote)`` is the client endpoint a forwarder's connection is
made with: TCP to ``host:port``, wrapped in TLS when ``tls: on``. The TLS side follows
what users of broker links asked for (RabbitMQ's shovel issues #10439, #4005): the
certificate *and* the host name are verified by default, against ``tls_ca_file`` or the
system's trust store; SNI carries ``tls_server_name`` (else ``host``), which is also the
name verified, so a remote reached by IP address can still be checked against its DNS
name; ``tls_cert_file``/``tls_key_file`` are the client certificate (for EXTERNAL);
``tls_verify: false`` turns verification off (SNI is still sent) and says so in the log.
TLS 1.2 is the minimum, as on our listeners.

Verification and host-name checks are Twisted's (``optionsForClientTLS``, with
``service_identity``), not ours. ``describe_tls_failure`` turns what a failed handshake
leaves in ``connectionLost`` into one line naming the remote and the reason.
"""
from __future__ import annotations

import ipaddress
import logging
from typing import Any

from OpenSSL import SSL
from twisted.internet import ssl
from twisted.internet.endpoints import (HostnameEndpoint, TCP4ClientEndpoint, TCP6ClientEndpoint,
                                        wrapClientTLS)
from twisted.internet.interfaces import IOpenSSLClientConnectionCreator, IStreamClientEndpoint
from twisted.python.failure import Failure
from zope.interface import implementer

from gateway.forward.outbound import RemoteSettings

log = logging.getLogger(__name__)

__all__ = ["OutboundTlsError", "client_tls_creator", "describe_tls_failure", "outbound_endpoint",
           "tls_server_name"]

_MIN_VERSION = ssl.TLSVersion.TLSv1_2
CONNECT_TIMEOUT = 30.0


class OutboundTlsError(Exception):
    """The TLS settings of a remote cannot be used (a file is missing or unreadable); the
    text names the setting and the reason (the caller names the remote)."""


def tls_server_name(remote: RemoteSettings) -> str:
    """The name sent as SNI and verified: ``tls_server_name``, else ``host``."""
    return remote.tls_server_name or remote.host


def _read(remote: RemoteSettings, setting: str) -> bytes:
    path = getattr(remote, setting)
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise OutboundTlsError(f"cannot read {setting} {path!r}: {exc.strerror or exc}") from None


def _client_certificate(remote: RemoteSettings) -> Any:
    if not remote.tls_cert_file:
        return None
    if not remote.tls_key_file:
        raise OutboundTlsError("tls_cert_file needs tls_key_file")
    pem = _read(remote, "tls_cert_file") + b"\n" + _read(remote, "tls_key_file")
    try:
        return ssl.PrivateCertificate.loadPEM(pem)
    except Exception as exc:  # noqa: BLE001 - OpenSSL's errors are many; name the files
        raise OutboundTlsError(f"cannot load the client certificate {remote.tls_cert_file!r} with key "
                               f"{remote.tls_key_file!r}: {exc}") from None


def _trust_root(remote: RemoteSettings) -> Any:
    if not remote.tls_ca_file:
        return ssl.platformTrust()
    pem = _read(remote, "tls_ca_file")
    blocks = [b"-----BEGIN CERTIFICATE-----" + part for part in pem.split(b"-----BEGIN CERTIFICATE-----")[1:]]
    try:
        certificates = [ssl.Certificate.loadPEM(block) for block in blocks]
    except Exception as exc:  # noqa: BLE001
        raise OutboundTlsError(f"cannot load tls_ca_file {remote.tls_ca_file!r}: {exc}") from None
    if not certificates:
        raise OutboundTlsError(f"tls_ca_file {remote.tls_ca_file!r} holds no PEM certificate")
    return ssl.trustRootFromCertificates(certificates)


@implementer(IOpenSSLClientConnectionCreator)
class _UnverifiedCreator:
    """``tls_verify: false``: TLS without checking the remote's certificate; SNI still sent."""

    def __init__(self, remote: RemoteSettings, client_certificate: Any) -> None:
        options: dict[str, Any] = {"raiseMinimumTo": _MIN_VERSION, "verify": False}
        if client_certificate is not None:
            options.update(certificate=client_certificate.original,
                           privateKey=client_certificate.privateKey.original)
        self._context = ssl.CertificateOptions(**options).getContext()
        self._name = tls_server_name(remote).encode("idna")

    def clientConnectionForTLS(self, tlsProtocol: Any) -> SSL.Connection:  # noqa: N802 - Twisted API
        connection = SSL.Connection(self._context, None)
        connection.set_app_data(tlsProtocol)
        connection.set_tlsext_host_name(self._name)
        return connection


def client_tls_creator(remote: RemoteSettings) -> Any:
    """The ``IOpenSSLClientConnectionCreator`` for ``remote`` (see the module docstring).
    Raises ``OutboundTlsError`` naming the setting at fault."""
    client_certificate = _client_certificate(remote)
    if not remote.tls_verify:
        log.warning("remote %r: TLS without certificate verification (tls_verify: false)", remote.container)
        return _UnverifiedCreator(remote, client_certificate)
    return ssl.optionsForClientTLS(tls_server_name(remote), trustRoot=_trust_root(remote),
                                   clientCertificate=client_certificate,
                                   extraCertificateOptions={"raiseMinimumTo": _MIN_VERSION})


def outbound_endpoint(reactor: Any, remote: RemoteSettings,
                      timeout: float = CONNECT_TIMEOUT) -> IStreamClientEndpoint:
    """TCP to the remote, in TLS when ``remote.tls``. Raises ``OutboundTlsError``.

    A host name goes through ``HostnameEndpoint`` (every address it resolves to, happy
    eyeballs); an IP address straight to a TCP endpoint, whose refusal is reported at
    once (``HostnameEndpoint`` reports it only after its next attempt delay, 0.3 s)."""
    try:
        address = ipaddress.ip_address(remote.host)
    except ValueError:
        endpoint: Any = HostnameEndpoint(reactor, remote.host, remote.port, timeout=timeout)
    else:
        kind = TCP4ClientEndpoint if address.version == 4 else TCP6ClientEndpoint
        endpoint = kind(reactor, remote.host, remote.port, timeout=timeout)
    if remote.tls:
        return wrapClientTLS(client_tls_creator(remote), endpoint)
    return endpoint


def describe_tls_failure(remote: RemoteSettings, reason: Failure | BaseException) -> str | None:
    """One line for a TLS handshake that failed (certificate not trusted, wrong host name,
    refused client certificate), or None when ``reason`` is no TLS failure."""
    exc = reason.value if isinstance(reason, Failure) else reason
    name = tls_server_name(remote)
    where = f"TLS (server name {name!r})"   # the caller names the remote and its address
    if type(exc).__name__ == "VerificationError":  # service_identity: the name does not match
        return f"{where} refused: the certificate is not valid for {name!r} ({exc})"
    if isinstance(exc, SSL.Error):
        reasons = [str(item[-1]) for item in (exc.args[0] if exc.args and isinstance(exc.args[0], list) else [])]
        text = "; ".join(r for r in reasons if r) or str(exc)
        if "certificate verify failed" in text:
            return f"{where} refused: certificate verify failed (not signed by a trusted CA: {text})"
        return f"{where} failed: {text}"
    return None
