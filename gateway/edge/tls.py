"""TLS termination with pyOpenSSL under Twisted: contexts, SNI, client certificates, reload.

``TlsServer`` holds the current ``SSL.Context`` objects of one listener (a default one
and one per SNI name). Every new TLS connection asks for ``serverConnectionForTLS``, so
``reload()`` (SIGHUP) swaps the contexts for new connections while established ones keep
the material they were made with. A reload that fails keeps the old material and says why.

Policy: TLS 1.2 minimum (configurable to 1.3), a cipher list without anonymous, export,
RC4, 3DES or static-RSA suites, no compression, no renegotiation, server cipher preference.
Client certificates are optional or required per listener and verified against the CA file;
the verified subject is what SASL EXTERNAL maps to a user.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Optional

from OpenSSL import SSL, crypto
from twisted.internet.interfaces import IOpenSSLServerConnectionCreator
from twisted.protocols.tls import TLSMemoryBIOProtocol
from zope.interface import implementer

log = logging.getLogger(__name__)

__all__ = ["TlsSettings", "TlsServer", "TlsError", "peer_subject", "end_connection", "DEFAULT_CIPHERS"]

DEFAULT_CIPHERS = (
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "DHE-RSA-AES256-GCM-SHA384:DHE-RSA-AES128-GCM-SHA256"
)

_VERSIONS = {"1.2": SSL.TLS1_2_VERSION, "1.3": SSL.TLS1_3_VERSION}
_VERIFY = {
    "none": SSL.VERIFY_NONE,
    "optional": SSL.VERIFY_PEER,
    "required": SSL.VERIFY_PEER | SSL.VERIFY_FAIL_IF_NO_PEER_CERT,
}


class TlsError(Exception):
    """TLS material could not be loaded; the text names the file and the reason.

    ``setting`` is the listener setting at fault, relative to the listener entry
    (``tls_cert_file``, ``tls_sni[1].key_file``, ``tls_ciphers`` ...), so a config
    check can point at the key and its line; "" when no single setting is to blame."""

    def __init__(self, message: str, setting: str = "") -> None:
        super().__init__(message)
        self.setting = setting


@dataclass(frozen=True, slots=True)
class TlsSettings:
    cert_file: str
    key_file: str
    ca_file: Optional[str] = None
    verify_client: str = "none"          # none | optional | required
    min_version: str = "1.2"
    ciphers: str = DEFAULT_CIPHERS
    sni: tuple[tuple[str, str, str], ...] = ()   # (server_name, cert_file, key_file)


def _verify_callback(conn, cert, errno, depth, ok) -> bool:
    return bool(ok)


def _build_context(s: TlsSettings, cert_file: str, key_file: str,
                   cert_key: str = "tls_cert_file", key_key: str = "tls_key_file") -> SSL.Context:
    """One server context; ``cert_key``/``key_key`` name the settings the two files came
    from (the listener's own or an SNI entry's) for ``TlsError.setting``."""
    try:
        ctx = SSL.Context(SSL.TLS_SERVER_METHOD)
        ctx.set_min_proto_version(_VERSIONS[s.min_version])
    except SSL.Error as exc:
        raise TlsError(f"cannot create a TLS context: {_ssl_reason(exc)}", "tls_min_version") from None
    ctx.set_options(SSL.OP_NO_COMPRESSION | SSL.OP_CIPHER_SERVER_PREFERENCE
                    | SSL.OP_NO_RENEGOTIATION | SSL.OP_SINGLE_ECDH_USE)
    try:
        ctx.set_cipher_list(s.ciphers.encode())
    except SSL.Error as exc:
        raise TlsError(f"cipher list {s.ciphers!r} selects no usable cipher: {exc}",
                       "tls_ciphers") from None
    for what, path, load, setting in (
            ("certificate", cert_file, ctx.use_certificate_chain_file, cert_key),
            ("private key", key_file, ctx.use_privatekey_file, key_key)):
        try:
            load(path)
        except (SSL.Error, OSError) as exc:
            raise TlsError(f"cannot load {what} {path!r}: {_ssl_reason(exc)}", setting) from None
    try:
        ctx.check_privatekey()
    except SSL.Error:
        raise TlsError(f"private key {key_file!r} does not match certificate {cert_file!r}",
                       key_key) from None
    if s.ca_file:
        try:
            ctx.load_verify_locations(s.ca_file)
        except (SSL.Error, OSError) as exc:
            raise TlsError(f"cannot load CA file {s.ca_file!r}: {_ssl_reason(exc)}",
                           "tls_ca_file") from None
    ctx.set_verify(_VERIFY[s.verify_client], _verify_callback)
    ctx.set_session_id(b"amqp-gateway")
    return ctx


def _ssl_reason(exc: Exception) -> str:
    if isinstance(exc, SSL.Error) and exc.args and isinstance(exc.args[0], list):
        return "; ".join(str(e[-1]) for e in exc.args[0]) or str(exc)
    return str(exc)


@implementer(IOpenSSLServerConnectionCreator)
class TlsServer:
    """The connection creator Twisted's TLS wrapper asks for each new connection."""

    def __init__(self, settings: TlsSettings) -> None:
        self.settings = settings
        self._default: SSL.Context
        self._by_name: dict[str, SSL.Context] = {}
        self._default, self._by_name = self._load(settings)

    def _load(self, s: TlsSettings) -> tuple[SSL.Context, dict[str, SSL.Context]]:
        default = _build_context(s, s.cert_file, s.key_file)
        by_name = {name.lower(): _build_context(s, cert, key, f"tls_sni[{i}].cert_file",
                                                f"tls_sni[{i}].key_file")
                   for i, (name, cert, key) in enumerate(s.sni)}
        if by_name:
            default.set_tlsext_servername_callback(self._pick_by_sni)
        return default, by_name

    def _pick_by_sni(self, conn: SSL.Connection) -> None:
        name = conn.get_servername()
        if name:
            ctx = self._by_name.get(name.decode("ascii", "replace").lower())
            if ctx is not None:
                conn.set_context(ctx)

    def reload(self) -> bool:
        """Re-read every file; keep the old material (and log why) if anything fails."""
        try:
            default, by_name = self._load(self.settings)
        except TlsError as exc:
            log.error("TLS reload failed, keeping the previous certificates: %s", exc)
            return False
        except Exception as exc:  # noqa: BLE001 - OpenSSL/MemoryError: keep serving
            log.error("TLS reload failed, keeping the previous certificates: %s: %s",
                      type(exc).__name__, exc)
            return False
        self._default, self._by_name = default, by_name
        log.info("TLS material reloaded from %s", self.settings.cert_file)
        return True

    def serverConnectionForTLS(self, tlsProtocol) -> SSL.Connection:  # noqa: N802 - Twisted API
        return SSL.Connection(self._default, None)


def peer_subject(transport) -> Optional[str]:
    """The verified client certificate's subject in RFC 4514 form, or None."""
    get = getattr(transport, "getPeerCertificate", None)
    cert = get() if get else None
    if cert is None:
        return None
    if isinstance(cert, crypto.X509):
        cert = cert.to_cryptography()
    return cert.subject.rfc4514_string()


def tls_session(transport) -> tuple[Optional[str], Optional[str]]:
    """The negotiated TLS version (``TLSv1.3``) and the client's SNI name of a TLS
    transport, for the connection's open line; (None, None) without TLS."""
    get = getattr(transport, "getHandle", None)
    conn = get() if get is not None else None
    if not isinstance(conn, SSL.Connection):
        return None, None
    name = conn.get_servername()
    return conn.get_protocol_version_name(), name.decode("ascii", "replace") if name else None


def end_connection(transport) -> None:
    """Close a connection once what was written to it is sent; over TLS, our close_notify
    and then the TCP connection under it at once.

    Why: Twisted's TLS layer keeps the socket open until the peer answers with its own
    close_notify, which a client that got the protocol's close need never send (TLS 1.2
    7.2.1 and 1.3 6.1 let the closing side not wait): such a connection would stay open,
    and a graceful stop would wait for it until ``shutdown_timeout``. Our close_notify is
    written synchronously (the handshake is done before an engine writes; before it,
    Twisted aborts the connection instead).
    """
    transport.loseConnection()
    if isinstance(transport, TLSMemoryBIOProtocol):
        transport.transport.loseConnection()


CreatorFactory = Callable[[], TlsServer]
