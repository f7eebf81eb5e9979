"""The one table from broker error kinds (and auth refusals) to 0-9-1 reply codes.

The broker raises protocol-neutral :class:`~gateway.broker.errors.BrokerError` kinds; the
0-9-1 channel turns them into a :class:`ChannelException` (soft, closes the channel) or a
:class:`ConnectionException` (hard) according to the level of the reply code in
``spec.ReplyCode``. Choices follow RabbitMQ 3.x:

* RESOURCE_LIMIT_EXCEEDED -> 406 PRECONDITION_FAILED (RabbitMQ's wording for vhost queue
  and consumer limits), not 506 (which would close the whole connection).
* INVALID_ARGUMENT (a bad ``x-`` argument) -> 406 PRECONDITION_FAILED.
* COMMAND_INVALID (unknown exchange type) -> 503, NOT_ALLOWED -> 530 and NOT_IMPLEMENTED ->
  540 are connection errors, as the specification says for those codes.
"""
from __future__ import annotations

from gateway.amqp091.errors import AmqpException, ChannelException, ConnectionException
from gateway.amqp091.methods import Method
from gateway.amqp091.spec import ReplyCode
from gateway.broker.errors import BrokerError, ErrorKind

__all__ = ["REPLY_CODES", "amqp_error", "access_refused", "exception_for", "broker_error_for"]

REPLY_CODES: dict[ErrorKind, ReplyCode] = {
    ErrorKind.NOT_FOUND: ReplyCode.NOT_FOUND,
    ErrorKind.ACCESS_REFUSED: ReplyCode.ACCESS_REFUSED,
    ErrorKind.PRECONDITION_FAILED: ReplyCode.PRECONDITION_FAILED,
    ErrorKind.RESOURCE_LOCKED: ReplyCode.RESOURCE_LOCKED,
    ErrorKind.RESOURCE_LIMIT_EXCEEDED: ReplyCode.PRECONDITION_FAILED,
    ErrorKind.NOT_ALLOWED: ReplyCode.NOT_ALLOWED,
    ErrorKind.NOT_IMPLEMENTED: ReplyCode.NOT_IMPLEMENTED,
    ErrorKind.INVALID_ARGUMENT: ReplyCode.PRECONDITION_FAILED,
    ErrorKind.COMMAND_INVALID: ReplyCode.COMMAND_INVALID,
}
"""Broker error kind -> reply code; the code's level decides channel vs connection."""


def exception_for(code: ReplyCode, text: str, method: Method | None) -> AmqpException:
    """A channel or connection exception for ``code`` (by its level), naming ``method``."""
    class_id, method_id = (method.CLASS_ID, method.METHOD_ID) if method is not None else (0, 0)
    if code.is_hard():
        return ConnectionException(code, text, class_id, method_id)
    return ChannelException(code, text, class_id, method_id)


def amqp_error(exc: BrokerError, method: Method | None) -> AmqpException:
    """The exception to raise from a channel handler for broker error ``exc`` raised while
    handling ``method``. The reply text becomes ``"<CODE NAME> - <broker text>"`` on the
    wire (``AmqpException.reply_text``)."""
    return exception_for(REPLY_CODES[exc.kind], exc.text, method)


def access_refused(text: str, method: Method | None) -> ChannelException:
    """403 for a permission refusal from ``gateway.auth`` (a channel error)."""
    exc = exception_for(ReplyCode.ACCESS_REFUSED, text, method)
    assert isinstance(exc, ChannelException)
    return exc


#: reply code -> broker error class, the table read backwards (a backend's channel error,
#: carried to a 1.0 client in edge mode); 406 is PRECONDITION_FAILED
_CLASSES = {cls.kind: cls for cls in BrokerError.__subclasses__()}
_BY_CODE: dict[int, type[BrokerError]] = {}
for _kind, _code in REPLY_CODES.items():
    _BY_CODE.setdefault(int(_code), _CLASSES[_kind])
del _kind, _code


def broker_error_for(code: int, text: str) -> BrokerError:
    """A broker error of the kind ``code`` stands for (other codes: precondition-failed)."""
    return _BY_CODE.get(int(code), _CLASSES[ErrorKind.PRECONDITION_FAILED])(text)
