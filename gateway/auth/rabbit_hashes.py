"""RabbitMQ's own password hashes, so that users exported from a RabbitMQ log in here.

RabbitMQ's internal users carry ``password_hash`` (base64) and ``hashing_algorithm``
(``rabbit_password_hashing_sha256`` by default since 3.6, ``rabbit_password_hashing_sha512``
by choice). The scheme is documented in RabbitMQ's "Credentials and Passwords" guide: 4
random salt bytes, then the hash of the salt followed by the password's UTF-8 bytes, the
two concatenated and base64-encoded::

    password_hash = base64(salt[4] + SHA-256(salt[4] + utf8(password)))

The gateway keeps such a hash as ``ALGORITHM$BASE64`` (``rabbit_password_hashing_sha256$...``),
beside its own SCRAM-SHA-256 strings (``passwords``). It serves PLAIN and AMQPLAIN logins
and HTTP basic authentication; SCRAM-SHA-256 needs keys such a hash cannot give, so a user
with one cannot log in with SCRAM (``passwords.scram_capable``). RabbitMQ's MD5 scheme
(before 3.6) is refused: it is not safe to keep.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets

__all__ = ["RABBIT_ALGORITHMS", "SALT_BYTES", "RabbitHash", "rabbit_stored", "parse_rabbit",
           "verify_rabbit", "hash_rabbit", "GATEWAY_ALGORITHM", "DEFAULT_ALGORITHM",
           "stored_from_rabbit", "rabbit_from_stored"]

#: RabbitMQ's algorithm names -> hashlib's
RABBIT_ALGORITHMS = {
    "rabbit_password_hashing_sha256": "sha256",
    "rabbit_password_hashing_sha512": "sha512",
}
SALT_BYTES = 4
#: RabbitMQ's default, assumed when a ``password_hash`` comes without its algorithm
DEFAULT_ALGORITHM = "rabbit_password_hashing_sha256"
#: the ``hashing_algorithm`` the gateway exports for its own SCRAM-SHA-256 strings (no
#: RabbitMQ knows it; the gateway imports it back as it is)
GATEWAY_ALGORITHM = "amqp_gateway_scram_sha_256"


class RabbitHash:
    """A parsed RabbitMQ hash: its algorithm name and the salt and digest bytes."""

    __slots__ = ("algorithm", "salt", "digest")

    def __init__(self, algorithm: str, salt: bytes, digest: bytes) -> None:
        self.algorithm = algorithm
        self.salt = salt
        self.digest = digest

    @property
    def encoded(self) -> str:
        """The base64 form RabbitMQ exports (``password_hash``)."""
        return base64.b64encode(self.salt + self.digest).decode("ascii")


def rabbit_stored(algorithm: str, encoded: str) -> str:
    """The gateway's stored string for RabbitMQ's ``hashing_algorithm`` and
    ``password_hash``; raises ``ValueError`` naming what is wrong with them."""
    stored = f"{algorithm}${encoded}"
    parse_rabbit(stored)
    return stored


def parse_rabbit(stored: str) -> RabbitHash:
    """Raises ``ValueError`` for an unknown algorithm or a hash of the wrong length
    (never repeating the hash)."""
    algorithm, _, encoded = stored.partition("$")
    name = RABBIT_ALGORITHMS.get(algorithm)
    if name is None:
        known = ", ".join(sorted(RABBIT_ALGORITHMS))
        raise ValueError(f"unknown hashing algorithm {algorithm[:60]!r} (known: {known})")
    try:
        raw = base64.b64decode(encoded.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise ValueError(f"the {algorithm} password hash is not base64") from None
    size = hashlib.new(name).digest_size
    if len(raw) != SALT_BYTES + size:
        raise ValueError(f"a {algorithm} password hash is {SALT_BYTES + size} bytes "
                         f"(salt and digest), not {len(raw)}")
    return RabbitHash(algorithm, raw[:SALT_BYTES], raw[SALT_BYTES:])


def _digest(algorithm: str, salt: bytes, password: str) -> bytes:
    return hashlib.new(RABBIT_ALGORITHMS[algorithm], salt + password.encode("utf-8", "surrogatepass")).digest()


def verify_rabbit(stored: str, password: str) -> bool:
    """True when ``password`` matches (constant-time compare); ``ValueError`` for a
    malformed ``stored``."""
    parsed = parse_rabbit(stored)
    return hmac.compare_digest(_digest(parsed.algorithm, parsed.salt, password), parsed.digest)


def hash_rabbit(password: str, algorithm: str = "rabbit_password_hashing_sha256",
                salt: bytes | None = None) -> str:
    """RabbitMQ's hash of ``password`` as the gateway stores it (for tests and tools)."""
    salt = secrets.token_bytes(SALT_BYTES) if salt is None else salt
    encoded = base64.b64encode(salt + _digest(algorithm, salt, password)).decode("ascii")
    return rabbit_stored(algorithm, encoded)


def stored_from_rabbit(password_hash: str, algorithm: str | None) -> str | None:
    """The stored string for a user's ``password_hash`` and ``hashing_algorithm`` as
    RabbitMQ's API and definitions give them: ``""`` is a user without a password
    (None), the gateway's own algorithm is taken as it is (checked by the caller's
    ``User``), RabbitMQ's are wrapped (``rabbit_stored``). Raises ``ValueError``."""
    if not isinstance(password_hash, str):
        raise ValueError(f"password_hash must be text, not {password_hash!r}")
    if password_hash == "":
        return None
    if algorithm == GATEWAY_ALGORITHM:
        return password_hash
    return rabbit_stored(algorithm or DEFAULT_ALGORITHM, password_hash)


def rabbit_from_stored(stored: str | None) -> tuple[str, str]:
    """``(password_hash, hashing_algorithm)`` to export for a stored string (the
    inverse of ``stored_from_rabbit``)."""
    if stored is None:
        return "", DEFAULT_ALGORITHM
    algorithm, _, encoded = stored.partition("$")
    if algorithm in RABBIT_ALGORITHMS:
        return encoded, algorithm
    return stored, GATEWAY_ALGORITHM
