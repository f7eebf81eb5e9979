"""Value checks of single settings, attached to dataclass fields with ``checked``.

Each returns None or a problem for an operator; the schema walker adds key path and line.
``directory_problem`` checks a directory the gateway will write in, after loading.
"""
from __future__ import annotations

import dataclasses
import ipaddress
import os
import re
from dataclasses import field
from typing import Any, Callable, Optional

from gateway.auth.passwords import check_stored


__all__ = [
    "Check", "checked", "directory_problem", "existing_file_problem", "fraction_problem", "frame_max_problem",
    "host_problem", "log_format_problem", "log_level_problem", "mechanisms_problem", "non_negative_problem",
    "one_of", "password_hash_problem", "port_problem", "positive_problem", "regex_problem",
    "sample_rate_problem", "tls_version_problem", "verify_client_problem", "version_text_problem",
]

Check = Callable[[Any], Optional[str]]


def checked(default: Any = dataclasses.MISSING, *, check: Check | None = None,
             factory: Any = dataclasses.MISSING) -> Any:
    meta = {"check": check} if check else {}
    if factory is not dataclasses.MISSING:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def version_text_problem(v: str) -> str | None:
    if v == "" or re.fullmatch(r"\d+(\.\d+){0,3}([-+][0-9A-Za-z.]+)?", v):
        return None
    return f"{v!r} is not a version such as \"4.1.0\" (or \"\" to announce amqp-gateway)"


def port_problem(v: int) -> str | None:
    return None if 0 <= v <= 65535 else f"{v} is not a valid port (0-65535; 0 picks a free port)"


def positive_problem(v: float) -> str | None:
    return None if v > 0 else f"{v} must be greater than 0"


def non_negative_problem(v: float) -> str | None:
    return None if v >= 0 else f"{v} must not be negative"


def host_problem(v: str) -> str | None:
    if not v:
        return "empty host"
    try:
        ipaddress.ip_address(v)
        return None
    except ValueError:
        pass
    if re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,252})", v):
        return None
    return f"{v!r} is neither an IP address nor a host name"


def existing_file_problem(v: str | None) -> str | None:
    if v is None or os.path.isfile(v):
        return None
    return f"file {v!r} does not exist"


def regex_problem(v: str) -> str | None:
    try:
        re.compile(v)
        return None
    except re.error as exc:
        return f"{v!r} is not a valid regular expression: {exc}"


def password_hash_problem(v: str) -> str | None:
    try:
        check_stored(v)
        return None
    except ValueError as exc:
        return (f"not a password hash ({exc}); make one with 'amqp-gateway hash-password'"
                "; clear-text passwords are not accepted")


def tls_version_problem(v: str) -> str | None:
    return None if v in ("1.2", "1.3") else f"{v!r} is not a TLS version this gateway allows (1.2 or 1.3)"


def verify_client_problem(v: str) -> str | None:
    ok = ("none", "optional", "required")
    return None if v in ok else f"{v!r} is not one of: {', '.join(ok)}"


_MECHANISMS = ("SCRAM-SHA-256", "PLAIN", "AMQPLAIN", "EXTERNAL", "ANONYMOUS")


def mechanisms_problem(v: tuple[str, ...]) -> str | None:
    bad = [m for m in v if m not in _MECHANISMS]
    return f"unknown SASL mechanism(s) {', '.join(bad)} (known: {', '.join(_MECHANISMS)})" if bad else None


def frame_max_problem(v: int) -> str | None:
    return None if v == 0 or v >= 4096 else f"{v} is below the AMQP minimum frame size 4096"


def log_level_problem(v: str) -> str | None:
    ok = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
    return None if v.upper() in ok else f"{v!r} is not one of {', '.join(ok)}"


def log_format_problem(v: str) -> str | None:
    return None if v in ("text", "json") else f"{v!r} is not one of text, json"


def fraction_problem(v: float) -> str | None:
    return None if 0.0 < v <= 1.0 else f"{v} is not a fraction above 0.0 and at most 1.0"


def sample_rate_problem(v: float) -> str | None:
    return None if 0.0 <= v <= 1.0 else f"{v} is not a rate between 0.0 and 1.0"


def one_of(*allowed: str) -> Check:
    def check(v: str) -> str | None:
        return None if v in allowed else f"{v!r} is not one of: {', '.join(allowed)}"
    return check


def directory_problem(path: str) -> str | None:
    """Why the gateway could not use ``path`` as a directory to write in, or None.

    Checked by ``check-config`` and before ``run`` starts anything, so a state or ledger
    directory under a regular file, or one this user cannot create or write, is a config
    error naming the key instead of a traceback at start. Nothing is created here."""
    target = os.path.abspath(path)
    probe = target
    while not os.path.lexists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if not os.path.isdir(probe):
        if probe == target:
            return f"{path!r} exists and is not a directory"
        return f"cannot create directory {path!r}: {probe!r} is not a directory"
    if not os.access(probe, os.W_OK | os.X_OK):
        if probe == target:
            return f"directory {path!r} is not writable (uid {os.getuid()})"
        return f"cannot create directory {path!r}: {probe!r} is not writable (uid {os.getuid()})"
    return None
