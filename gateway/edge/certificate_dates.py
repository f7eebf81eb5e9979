"""When the certificates in a PEM file expire, for the health check
``certificate-expiration`` (RabbitMQ's): every certificate of the file counts, a chain's
intermediates and a CA bundle's roots included, as RabbitMQ reads them."""
from __future__ import annotations

from typing import Optional

from cryptography import x509

__all__ = ["expiries"]


def expiries(path: Optional[str]) -> Optional[tuple[float, ...]]:
    """The ``notAfter`` of each certificate in ``path`` (seconds since the epoch); ``()``
    for no file, ``None`` for a file that cannot be read or holds no certificate."""
    if not path:
        return ()
    try:
        with open(path, "rb") as f:
            certificates = x509.load_pem_x509_certificates(f.read())
    except (OSError, ValueError):
        return None
    return tuple(c.not_valid_after_utc.timestamp() for c in certificates)
