"""The one error type of the address grammar and resolver."""

from __future__ import annotations

import enum

__all__ = ["AddressErrorKind", "AddressError"]


class AddressErrorKind(enum.StrEnum):
    """Protocol-neutral kinds; each protocol maps them to its own code.

    1.0: INVALID -> ``amqp:invalid-field``, NOT_FOUND -> ``amqp:not-found``.
    0-9-1: INVALID -> 406 PRECONDITION_FAILED, NOT_FOUND -> 404 NOT_FOUND.
    A StrEnum, so ``kind == "invalid"`` holds as well.
    """

    INVALID = "invalid"
    NOT_FOUND = "not_found"


class AddressError(Exception):
    """An address is malformed (INVALID) or names nothing (NOT_FOUND).

    ``kind`` accepts the enum or its string value (``"invalid"``,
    ``"not_found"``); ``text`` is meant for the peer and names the address
    and, for INVALID, the offending segment.
    """

    def __init__(self, kind: AddressErrorKind | str, text: str) -> None:
        self.kind = AddressErrorKind(kind)
        self.text = text
        super().__init__(text)

    def __repr__(self) -> str:
        return f"AddressError(kind={self.kind.value!r}, text={self.text!r})"
