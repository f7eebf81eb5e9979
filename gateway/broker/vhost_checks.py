"""Equivalence checks for redeclared exchanges and queues, and the missing-exchange
error (RabbitMQ's texts).

RabbitMQ compares the flags and a fixed list of arguments; other arguments may differ.
Argument values compare by type class (any integer width equals any other, see
:func:`gateway.broker.headers_match.values_equal`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from translators.field_types import Float32, Int8, Int16, Int32, LongStrBytes, Timestamp, UInt8, UInt16, UInt32

from .errors import NotFound, PreconditionFailed
from .headers_match import values_equal

if TYPE_CHECKING:
    from .exchanges import Exchange
    from .queues import Queue

__all__ = ["check_exchange_equivalence", "check_queue_equivalence", "QUEUE_EQUIVALENCE_ARGS", "no_exchange"]

#: queue arguments that must match on redeclare (RabbitMQ 3.x classic queues)
QUEUE_EQUIVALENCE_ARGS = (
    "x-expires",
    "x-message-ttl",
    "x-max-length",
    "x-max-length-bytes",
    "x-max-priority",
    "x-overflow",
    "x-dead-letter-exchange",
    "x-dead-letter-routing-key",
    "x-queue-type",
    "x-queue-mode",
    "x-single-active-consumer",
)
EXCHANGE_EQUIVALENCE_ARGS = ("alternate-exchange",)

_TYPE_NAMES = (
    (bool, "bool"),
    (Int8, "byte"),
    (UInt8, "unsignedbyte"),
    (Int16, "short"),
    (UInt16, "unsignedshort"),
    (Int32, "signedint"),
    (UInt32, "unsignedint"),
    (Timestamp, "timestamp"),
    (int, "long"),
    (Float32, "float"),
    (float, "double"),
    (LongStrBytes, "longstr"),
    (str, "longstr"),
    (bytes, "binary"),
    (dict, "table"),
    (list, "array"),
)


def _describe(value: Any) -> str:
    if value is None:
        return "none"
    type_name = next((name for cls, name in _TYPE_NAMES if isinstance(value, cls)), type(value).__name__)
    shown = bytes(value).decode("utf-8", "replace") if isinstance(value, (bytes, LongStrBytes)) else value
    return f"the value '{shown}' of type '{type_name}'"


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _inequivalent(field: str, label: str, received: str, current: str) -> PreconditionFailed:
    return PreconditionFailed(f"inequivalent arg '{field}' for {label}: received {received} but current is {current}")


def _check_args(label: str, current: Mapping[str, Any], received: Mapping[str, Any], keys: tuple[str, ...]) -> None:
    for key in keys:
        old = current.get(key)
        new = received.get(key)
        if old is None and new is None:
            continue
        if old is None or new is None or not values_equal(old, new):
            raise _inequivalent(key, label, _describe(new), _describe(old))


def check_exchange_equivalence(
    exchange: "Exchange",
    type_name: str,
    durable: bool,
    auto_delete: bool,
    internal: bool,
    arguments: Mapping[str, Any],
) -> None:
    """Raise PreconditionFailed naming the first field that differs."""
    label = exchange.label
    if exchange.type.value != type_name:
        raise _inequivalent("type", label, f"'{type_name}'", f"'{exchange.type.value}'")
    for field, new, old in (
        ("durable", durable, exchange.durable),
        ("auto_delete", auto_delete, exchange.auto_delete),
        ("internal", internal, exchange.internal),
    ):
        if bool(new) != bool(old):
            raise _inequivalent(field, label, f"'{_flag(new)}'", f"'{_flag(old)}'")
    _check_args(label, exchange.arguments, arguments, EXCHANGE_EQUIVALENCE_ARGS)


def check_queue_equivalence(
    queue: "Queue", durable: bool, exclusive: bool, auto_delete: bool, arguments: Mapping[str, Any]
) -> None:
    """Raise PreconditionFailed naming the first field that differs."""
    label = queue.label
    for field, new, old in (
        ("durable", durable, queue.durable),
        ("exclusive", exclusive, queue.exclusive),
        ("auto_delete", auto_delete, queue.auto_delete),
    ):
        if bool(new) != bool(old):
            raise _inequivalent(field, label, f"'{_flag(new)}'", f"'{_flag(old)}'")
    _check_args(label, queue.arguments, arguments, QUEUE_EQUIVALENCE_ARGS)


def no_exchange(name: str, vhost: str) -> NotFound:
    """RabbitMQ's error for an exchange the vhost does not have (lookup, bind, publish)."""
    return NotFound(f"no exchange '{name}' in vhost '{vhost}'")
