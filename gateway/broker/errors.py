"""Protocol-neutral broker errors.

The broker model never knows a reply code or a condition symbol. It raises one of these
classes; each protocol maps the :class:`ErrorKind` to its own code (0-9-1 in
``amqp091/errors.py``, 1.0 in ``amqp10/conditions.py``). The text is what the peer should
see and, like RabbitMQ's, names the entity and the vhost.
"""
from __future__ import annotations

import enum
from typing import ClassVar

__all__ = [
    "ErrorKind",
    "BrokerError",
    "NotFound",
    "AccessRefused",
    "PreconditionFailed",
    "ResourceLocked",
    "ResourceLimitExceeded",
    "NotAllowed",
    "FeatureNotImplemented",
    "InvalidArgument",
    "CommandInvalid",
]


class ErrorKind(enum.Enum):
    """What went wrong, independent of any wire protocol."""

    NOT_FOUND = "not-found"
    ACCESS_REFUSED = "access-refused"
    PRECONDITION_FAILED = "precondition-failed"
    RESOURCE_LOCKED = "resource-locked"
    RESOURCE_LIMIT_EXCEEDED = "resource-limit-exceeded"
    NOT_ALLOWED = "not-allowed"
    NOT_IMPLEMENTED = "not-implemented"
    #: a bad ``x-`` argument; RabbitMQ answers 406 in 0-9-1
    INVALID_ARGUMENT = "invalid-argument"
    #: e.g. an unknown exchange type; RabbitMQ answers 503 in 0-9-1
    COMMAND_INVALID = "command-invalid"


class BrokerError(Exception):
    """Base class: ``kind`` (class attribute) and ``text`` (the peer-visible message)."""

    kind: ClassVar[ErrorKind]

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.text!r})"


class NotFound(BrokerError):
    """A named exchange, queue or node does not exist."""

    kind = ErrorKind.NOT_FOUND


class AccessRefused(BrokerError):
    """Reserved names, pre-declared exchanges, internal exchanges."""

    kind = ErrorKind.ACCESS_REFUSED


class PreconditionFailed(BrokerError):
    """Inequivalent redeclare, if-unused / if-empty failures."""

    kind = ErrorKind.PRECONDITION_FAILED


class ResourceLocked(BrokerError):
    """Another owner's exclusive queue, or an exclusive consumer conflict."""

    kind = ErrorKind.RESOURCE_LOCKED


class ResourceLimitExceeded(BrokerError):
    """A configured limit (queues, consumers, memory) would be exceeded."""

    kind = ErrorKind.RESOURCE_LIMIT_EXCEEDED


class NotAllowed(BrokerError):
    """The operation is not allowed in this state (e.g. an unknown vhost)."""

    kind = ErrorKind.NOT_ALLOWED


class FeatureNotImplemented(BrokerError):
    """A feature we do not offer (e.g. ``x-queue-type: quorum``).

    Named so that it does not shadow the builtin ``NotImplemented``.
    """

    kind = ErrorKind.NOT_IMPLEMENTED


class InvalidArgument(BrokerError):
    """A malformed ``x-`` argument on a queue, exchange or binding."""

    kind = ErrorKind.INVALID_ARGUMENT


class CommandInvalid(BrokerError):
    """A command that cannot be carried out as given (unknown exchange type)."""

    kind = ErrorKind.COMMAND_INVALID
