"""The one table of AMQP 1.0 error conditions and SASL codes, and the broker mapping.

Every condition symbol the 1.0 engine sends is a member of :class:`ErrorCondition`; nothing
else in the package spells one. (Proton's ``Condition`` is the error a peer is sent: a
symbol from here, a description and info.) :func:`from_broker_error` turns the broker's neutral
error kinds into a condition and a description, so a broker ``NotFound("no queue 'q'
in vhost '/'")`` reaches the peer as ``amqp:not-found`` with that very text.

:class:`Amqp10Error` is the typed exception the link and session code raise; the engine
catches it at the one dispatch boundary and turns it into a detach, end or close with
the carried condition (see ``Scope``).
"""
from __future__ import annotations

import enum

from gateway.broker.errors import BrokerError, ErrorKind

__all__ = [
    "ErrorCondition",
    "SaslCode",
    "Scope",
    "Amqp10Error",
    "from_broker_error",
    "error_from_broker",
]


class ErrorCondition(enum.StrEnum):
    """AMQP 1.0 error condition symbols (spec 2.8.15 - 2.8.18, 4.5.8)."""

    INTERNAL_ERROR = "amqp:internal-error"
    NOT_FOUND = "amqp:not-found"
    UNAUTHORIZED_ACCESS = "amqp:unauthorized-access"
    DECODE_ERROR = "amqp:decode-error"
    RESOURCE_LIMIT_EXCEEDED = "amqp:resource-limit-exceeded"
    NOT_ALLOWED = "amqp:not-allowed"
    INVALID_FIELD = "amqp:invalid-field"
    NOT_IMPLEMENTED = "amqp:not-implemented"
    RESOURCE_LOCKED = "amqp:resource-locked"
    PRECONDITION_FAILED = "amqp:precondition-failed"
    RESOURCE_DELETED = "amqp:resource-deleted"
    ILLEGAL_STATE = "amqp:illegal-state"
    FRAME_SIZE_TOO_SMALL = "amqp:frame-size-too-small"
    # connection
    CONNECTION_FORCED = "amqp:connection:forced"
    FRAMING_ERROR = "amqp:connection:framing-error"
    REDIRECT = "amqp:connection:redirect"
    # session
    WINDOW_VIOLATION = "amqp:session:window-violation"
    ERRANT_LINK = "amqp:session:errant-link"
    HANDLE_IN_USE = "amqp:session:handle-in-use"
    UNATTACHED_HANDLE = "amqp:session:unattached-handle"
    # link
    DETACH_FORCED = "amqp:link:detach-forced"
    TRANSFER_LIMIT_EXCEEDED = "amqp:link:transfer-limit-exceeded"
    MESSAGE_SIZE_EXCEEDED = "amqp:link:message-size-exceeded"
    LINK_REDIRECT = "amqp:link:redirect"
    STOLEN = "amqp:link:stolen"
    # transactions (spec 4.5.8)
    TRANSACTION_UNKNOWN_ID = "amqp:transaction:unknown-id"
    TRANSACTION_ROLLBACK = "amqp:transaction:rollback"
    TRANSACTION_TIMEOUT = "amqp:transaction:timeout"


class SaslCode(enum.IntEnum):
    """``sasl-outcome`` codes (spec 5.3.3.6)."""

    OK = 0
    AUTH = 1
    SYS = 2
    SYS_PERM = 3
    SYS_TEMP = 4


class Scope(enum.Enum):
    """What an :class:`Amqp10Error` ends: the link, the session or the connection."""

    LINK = "link"
    SESSION = "session"
    CONNECTION = "connection"


class Amqp10Error(Exception):
    """A peer-facing 1.0 error: ``condition`` and ``description`` go on the wire.

    ``scope`` says which endpoint the engine closes with this error. Raised by the link
    code (attach refused, bad disposition ...) and caught by the engine's dispatcher.
    """

    def __init__(self, condition: ErrorCondition, description: str, scope: Scope = Scope.LINK) -> None:
        super().__init__(f"{condition.value}: {description}")
        self.condition = condition
        self.description = description
        self.scope = scope


_BY_KIND: dict[ErrorKind, ErrorCondition] = {
    ErrorKind.NOT_FOUND: ErrorCondition.NOT_FOUND,
    ErrorKind.ACCESS_REFUSED: ErrorCondition.UNAUTHORIZED_ACCESS,
    ErrorKind.PRECONDITION_FAILED: ErrorCondition.PRECONDITION_FAILED,
    ErrorKind.RESOURCE_LOCKED: ErrorCondition.RESOURCE_LOCKED,
    ErrorKind.RESOURCE_LIMIT_EXCEEDED: ErrorCondition.RESOURCE_LIMIT_EXCEEDED,
    ErrorKind.NOT_ALLOWED: ErrorCondition.NOT_ALLOWED,
    ErrorKind.NOT_IMPLEMENTED: ErrorCondition.NOT_IMPLEMENTED,
    ErrorKind.INVALID_ARGUMENT: ErrorCondition.INVALID_FIELD,
    ErrorKind.COMMAND_INVALID: ErrorCondition.NOT_ALLOWED,
}


def from_broker_error(error: BrokerError) -> tuple[ErrorCondition, str]:
    """The condition and description for a broker error (unknown kinds: internal-error)."""
    return _BY_KIND.get(error.kind, ErrorCondition.INTERNAL_ERROR), error.text


def error_from_broker(error: BrokerError, scope: Scope = Scope.LINK) -> Amqp10Error:
    """An :class:`Amqp10Error` carrying the mapped condition and the broker's text."""
    condition, text = from_broker_error(error)
    return Amqp10Error(condition, text, scope)
