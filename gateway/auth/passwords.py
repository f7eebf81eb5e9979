"""Password hashing: one stored format for PLAIN checks and SCRAM-SHA-256.

The stored string is PostgreSQL's SCRAM verifier format::

    SCRAM-SHA-256$<iterations>:<b64 salt>$<b64 StoredKey>:<b64 ServerKey>

It holds no clear password and nothing a client could replay, yet it is
all a server needs for both uses:

* PLAIN / AMQPLAIN: derive the salted password from the offered password
  and compare both keys in constant time (``verify_password``);
* SCRAM-SHA-256 (RFC 5802 / 7677): hand salt, StoredKey, ServerKey and the
  iteration count to ``scramp``'s server (``parse_stored``).

Passwords are normalised with SASLprep (RFC 4013) as SCRAM requires. A
password SASLprep refuses is used as it is (UTF-8), as PostgreSQL does, so
any password can be stored; such a password then only works with PLAIN.
``hash_password`` is the implementation of ``amqp-gateway hash-password``.

A stored string may also be one of RabbitMQ's own hashes (``rabbit_hashes``),
imported with a RabbitMQ export: ``check_stored`` and ``verify_password`` take
either; only SCRAM strings serve SCRAM-SHA-256 (``scram_capable``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass

from scramp.utils import ScramException, saslprep

from gateway.auth.rabbit_hashes import RABBIT_ALGORITHMS, parse_rabbit, verify_rabbit

__all__ = [
    "SCHEME",
    "DEFAULT_ITERATIONS",
    "MIN_ITERATIONS",
    "MAX_ITERATIONS",
    "SALT_BYTES",
    "MIN_SALT_BYTES",
    "StoredPassword",
    "hash_password",
    "verify_password",
    "parse_stored",
    "check_stored",
    "scram_capable",
]

SCHEME = "SCRAM-SHA-256"
DEFAULT_ITERATIONS = 4096
# scramp's server refuses counts outside these bounds and salts shorter than
# 12 bytes, so a stored string outside them could never be used for SCRAM.
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 10_000_000
SALT_BYTES = 16
MIN_SALT_BYTES = 12
_KEY_BYTES = 32  # SHA-256 digest size


@dataclass(frozen=True, slots=True)
class StoredPassword:
    """The parsed parts of a stored password string (all raw bytes)."""

    iterations: int
    salt: bytes
    stored_key: bytes
    server_key: bytes


def _normalise(password: str) -> bytes:
    """SASLprep the password; fall back to the raw UTF-8 bytes if refused."""
    try:
        prepared = saslprep(password)
    except ScramException:
        prepared = password
    return prepared.encode("utf-8", "surrogatepass")


def _derive_keys(password: str, salt: bytes, iterations: int) -> tuple[bytes, bytes]:
    """Return (StoredKey, ServerKey) per RFC 5802 section 3."""
    salted = hashlib.pbkdf2_hmac("sha256", _normalise(password), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
    return stored_key, server_key


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def hash_password(password: str, *, iterations: int = DEFAULT_ITERATIONS,
                  salt: bytes | None = None) -> str:
    """Return the stored string for ``password``.

    ``salt`` defaults to 16 random bytes; pass one only for reproducible
    output (tests). Raises ``ValueError`` if ``iterations`` is outside
    [4096, 10 000 000] or ``salt`` is shorter than 12 bytes (the bounds
    ``scramp`` enforces, so every stored string also works for SCRAM).
    """
    if isinstance(iterations, bool) or not isinstance(iterations, int):
        raise ValueError(f"iterations must be an int, got {iterations!r}")
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(
            f"iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}, "
            f"got {iterations}")
    if salt is None:
        salt = secrets.token_bytes(SALT_BYTES)
    elif len(salt) < MIN_SALT_BYTES:
        raise ValueError(f"salt must be at least {MIN_SALT_BYTES} bytes, got {len(salt)}")
    stored_key, server_key = _derive_keys(password, salt, iterations)
    return f"{SCHEME}${iterations}:{_b64(salt)}${_b64(stored_key)}:{_b64(server_key)}"


def _decode_b64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise ValueError(f"malformed stored password: {what} is not base64") from None


def parse_stored(stored: str) -> StoredPassword:
    """Parse a stored password string.

    Raises ``ValueError`` naming the malformed part (the message never
    repeats the key material). Checks the scheme, the iteration bounds, the
    salt length and that both keys are 32 bytes.
    """
    if not isinstance(stored, str):
        raise ValueError("malformed stored password: not a string")
    parts = stored.split("$")
    if len(parts) != 3:
        raise ValueError(
            f"malformed stored password: expected '{SCHEME}$<iterations>:<salt>$"
            "<StoredKey>:<ServerKey>'")
    scheme, params, keys = parts
    if scheme != SCHEME:
        raise ValueError(f"malformed stored password: unknown scheme {scheme[:40]!r}, "
                         f"expected {SCHEME!r}")
    params_parts = params.split(":")
    keys_parts = keys.split(":")
    if len(params_parts) != 2 or len(keys_parts) != 2:
        raise ValueError("malformed stored password: expected '<iterations>:<salt>' and "
                         "'<StoredKey>:<ServerKey>'")
    iter_text, salt_text = params_parts
    if not (iter_text.isascii() and iter_text.isdigit()) or iter_text.startswith("0"):
        raise ValueError("malformed stored password: iteration count is not a positive integer")
    iterations = int(iter_text)
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(
            f"malformed stored password: iteration count {iterations} outside "
            f"[{MIN_ITERATIONS}, {MAX_ITERATIONS}]")
    salt = _decode_b64(salt_text, "salt")
    if len(salt) < MIN_SALT_BYTES:
        raise ValueError(f"malformed stored password: salt shorter than {MIN_SALT_BYTES} bytes")
    stored_key = _decode_b64(keys_parts[0], "StoredKey")
    server_key = _decode_b64(keys_parts[1], "ServerKey")
    if len(stored_key) != _KEY_BYTES or len(server_key) != _KEY_BYTES:
        raise ValueError(f"malformed stored password: keys must be {_KEY_BYTES} bytes")
    return StoredPassword(iterations, salt, stored_key, server_key)


def _is_rabbit(stored: str) -> bool:
    return isinstance(stored, str) and stored.partition("$")[0] in RABBIT_ALGORITHMS


def scram_capable(stored: str) -> bool:
    """Whether ``stored`` can serve SCRAM-SHA-256 (a SCRAM string, not RabbitMQ's hash)."""
    return not _is_rabbit(stored)


def check_stored(stored: str) -> None:
    """Raise ``ValueError`` naming the problem unless ``stored`` is a SCRAM string or
    one of RabbitMQ's hashes."""
    if _is_rabbit(stored):
        parse_rabbit(stored)
    else:
        parse_stored(stored)


def verify_password(stored: str, password: str) -> bool:
    """Return True if ``password`` matches the stored string.

    Both keys are compared with ``hmac.compare_digest``, so the time taken
    does not depend on how much of a key matched. Raises ``ValueError`` if
    ``stored`` is malformed (a configuration error, not a wrong password).
    """
    if _is_rabbit(stored):
        return verify_rabbit(stored, password)
    parsed = parse_stored(stored)
    stored_key, server_key = _derive_keys(password, parsed.salt, parsed.iterations)
    return hmac.compare_digest(stored_key + server_key,
                               parsed.stored_key + parsed.server_key)
