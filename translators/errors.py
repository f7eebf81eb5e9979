"""The one error type of the translators package.

A translation fails only on input that no peer could have produced correctly: a truncated
or malformed AMQP 1.0 encoding, a reserved ``x-amqp-1.0-*`` header of the wrong shape, or a
value outside the range of both protocols. Callers map it to their own protocol error
(``amqp:decode-error`` for 1.0, a channel error for 0-9-1).
"""
from __future__ import annotations

__all__ = ["TranslationError"]


class TranslationError(ValueError):
    """``field`` names what failed (a section, a property or a header name); ``reason``
    says why in words a peer may see."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason
