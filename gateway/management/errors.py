"""Management errors: each carries an HTTP-like status and a text naming the problem.

The three faces of management (AMQP Management's ``statusCode``, RabbitMQ 4's
``/management`` node, the HTTP API) all answer with these statuses, so a refusal reads
the same everywhere. Broker and auth errors become these in :func:`from_broker` (the one
mapping). ``EntityNotFound`` is not called ``NotFound``: that name is the broker's.
"""
from __future__ import annotations

from typing import Any, ClassVar

from gateway.auth.errors import PermissionRefused
from gateway.broker.errors import BrokerError, ErrorKind
from gateway.broker.store_marks import not_saved_text, store_full

__all__ = ["BadRequest", "Conflict", "EntityNotFound", "Forbidden", "InsufficientStorage", "ManagementError",
           "NotImplementedHere", "NotSaved", "from_broker", "not_saved", "translated"]


class ManagementError(Exception):
    """Base class: ``status`` (class attribute, an HTTP status) and ``text``."""

    status: ClassVar[int] = 500

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.status}, {self.text!r})"


class BadRequest(ManagementError):
    """Malformed or invalid input: a missing field, a bad argument, an unknown type."""

    status = 400


class Forbidden(ManagementError):
    """The user lacks a tag or a permission; the text names which."""

    status = 403


class EntityNotFound(ManagementError):
    """The named vhost, queue, exchange, binding or connection does not exist."""

    status = 404


class Conflict(ManagementError):
    """A redeclare with other properties, or a precondition (if-unused, if-empty,
    another connection's exclusive queue) that does not hold."""

    status = 409


class NotImplementedHere(ManagementError):
    """An operation the gateway does not offer."""

    status = 501


class NotSaved(ManagementError):
    """A change the store could not commit (an I/O error, a read-only file system)."""

    status = 500


class InsufficientStorage(NotSaved):
    """A change the store could not commit for lack of space."""

    status = 507


def not_saved(what: str, error: Exception) -> NotSaved:
    """The error for change ``what`` whose commit failed with ``error``."""
    cls = InsufficientStorage if store_full(error) else NotSaved
    return cls(not_saved_text(what, error))


_BY_KIND: dict[ErrorKind, type[ManagementError]] = {
    ErrorKind.NOT_FOUND: EntityNotFound,
    ErrorKind.ACCESS_REFUSED: Forbidden,
    ErrorKind.PRECONDITION_FAILED: Conflict,
    ErrorKind.RESOURCE_LOCKED: Conflict,
    ErrorKind.RESOURCE_LIMIT_EXCEEDED: Conflict,
    ErrorKind.NOT_ALLOWED: BadRequest,
    ErrorKind.NOT_IMPLEMENTED: NotImplementedHere,
    ErrorKind.INVALID_ARGUMENT: BadRequest,
    ErrorKind.COMMAND_INVALID: BadRequest,
}


def from_broker(exc: BrokerError | PermissionRefused) -> ManagementError:
    """The management error for a broker or auth error (its text kept)."""
    if isinstance(exc, PermissionRefused):
        return Forbidden(exc.text)
    return _BY_KIND[exc.kind](exc.text)


class _Translated:
    """A ``with`` block in which broker and auth errors become management errors."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> bool:
        if isinstance(exc, (BrokerError, PermissionRefused)):
            raise from_broker(exc) from None
        return False


#: ``with translated: vhost.declare_queue(...)`` raises a ``ManagementError``
translated = _Translated()
