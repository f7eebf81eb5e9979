"""Validation of queue ``x-`` arguments, RabbitMQ style.

Unknown arguments are kept and ignored (as RabbitMQ does); known ones must have the right
type and range, else :class:`InvalidArgument` (0-9-1: 406) with a text that names the
argument, the queue and the vhost.

Queue types: ``classic`` (the default) and ``quorum``, with the semantics of a
single-node quorum queue (RabbitMQ 3.10's texts throughout): it must be durable, neither
exclusive nor auto-delete (:func:`check_queue_flags`); ``x-delivery-limit`` counts
failed deliveries (a message returned more often is dead-lettered, reason
``delivery_limit``, or dropped) and is refused on a classic queue; priorities
(``x-max-priority``) and ``x-queue-mode`` are refused. ``stream`` and any other type are
refused (406) with a text naming what is supported.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from translators.field_types import LongStrBytes

from .errors import InvalidArgument, PreconditionFailed

__all__ = ["Overflow", "QueueArguments", "parse_queue_arguments", "check_queue_flags", "MAX_PRIORITY",
           "QUEUE_TYPES", "without_refused_by_type"]

#: the highest ``x-max-priority`` accepted
MAX_PRIORITY = 255


class Overflow(enum.Enum):
    """``x-overflow``: what a full queue does with a new message."""

    DROP_HEAD = "drop-head"
    REJECT_PUBLISH = "reject-publish"
    REJECT_PUBLISH_DLX = "reject-publish-dlx"


_OVERFLOW = {o.value: o for o in Overflow}

#: the ``x-queue-type`` values served
QUEUE_TYPES = ("classic", "quorum")
#: RabbitMQ's module name of each type, as its errors name them
_TYPE_MODULE = {"classic": "rabbit_classic_queue", "quorum": "rabbit_quorum_queue"}
#: arguments a type refuses
_UNSUPPORTED = {"classic": ("x-delivery-limit",), "quorum": ("x-max-priority", "x-queue-mode")}


@dataclass(frozen=True, slots=True)
class QueueArguments:
    """Parsed queue arguments; durations in milliseconds, sizes in messages/bytes."""

    message_ttl_ms: Optional[int] = None
    expires_ms: Optional[int] = None
    max_length: Optional[int] = None
    max_length_bytes: Optional[int] = None
    overflow: Overflow = Overflow.DROP_HEAD
    dead_letter_exchange: Optional[str] = None
    dead_letter_routing_key: Optional[str] = None
    max_priority: Optional[int] = None
    #: ``x-queue-type``: classic | quorum
    queue_type: str = "classic"
    #: quorum ``x-delivery-limit``: failed deliveries a message may have; one more and
    #: it is dead-lettered (reason ``delivery_limit``) or dropped
    delivery_limit: Optional[int] = None
    #: a length or byte limit is set (read on every enqueue: a field, not a property)
    bounded: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "bounded",
                           self.max_length is not None or self.max_length_bytes is not None)

    def room(self, count: int, nbytes: int) -> Optional[int]:
        """How many more messages fit in a queue holding ``count`` messages of ``nbytes``
        before a ``reject-publish`` queue rejects, for 1.0 incoming-link credit (a full
        queue must stop a 1.0 sender, not grow memory); ``None`` when publishes are never
        rejected (no limit, or ``drop-head``).

        ``x-max-length`` gives an exact count. ``x-max-length-bytes`` can only give an
        estimate, since sizes differ: the room in bytes divided by the mean size of the
        messages held (at least 1 while any room is left, 0 once the bytes are used up;
        with nothing to measure, one message per byte of room). The smaller of the two
        counts wins; ``enqueue`` still rejects a message that does not fit.
        """
        if self.overflow is Overflow.DROP_HEAD or not self.bounded:
            return None
        left: Optional[int] = None
        if self.max_length is not None:
            left = max(0, self.max_length - count)
        if self.max_length_bytes is not None:
            room = self.max_length_bytes - nbytes
            if room <= 0:
                by_bytes = 0
            elif nbytes == 0:
                by_bytes = room
            else:
                by_bytes = max(1, room * count // nbytes)
            left = by_bytes if left is None else min(left, by_bytes)
        return left


def _text(value: Any) -> Optional[str]:
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, LongStrBytes)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return None
    return None


def parse_queue_arguments(
    arguments: Optional[Mapping[str, Any]], queue: str, vhost: str
) -> QueueArguments:
    """Check ``arguments`` and return the parsed form.

    Raises :class:`InvalidArgument`, :class:`PreconditionFailed` (a dead-letter routing
    key without a dead-letter exchange, as RabbitMQ) or :class:`FeatureNotImplemented`.
    """
    if not arguments:
        return QueueArguments()
    where = f"for queue '{queue}' in vhost '{vhost}'"

    def bad(name: str, why: str) -> InvalidArgument:
        return InvalidArgument(f"invalid arg '{name}' {where}: {why}")

    def integer(name: str, minimum: int, maximum: Optional[int] = None) -> Optional[int]:
        if name not in arguments:
            return None
        value = arguments[name]
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad(name, f"unacceptable type {type(value).__name__} (integer required)")
        if value < minimum:
            raise bad(name, f"value {value} is below the minimum {minimum}")
        if maximum is not None and value > maximum:
            raise bad(name, f"value {value} is above the maximum {maximum}")
        return int(value)

    def string(name: str) -> Optional[str]:
        if name not in arguments:
            return None
        text = _text(arguments[name])
        if text is None:
            raise bad(name, f"unacceptable type {type(arguments[name]).__name__} (string required)")
        return text

    queue_type = string("x-queue-type") or "classic"
    if queue_type not in QUEUE_TYPES:
        unsupported = "is not supported by amqp-gateway" if queue_type == "stream" else "is unknown"
        raise bad("x-queue-type", f'"queue type \'{queue_type}\' {unsupported}; supported: '
                                  f'{", ".join(QUEUE_TYPES)}"')
    for name in _UNSUPPORTED[queue_type]:
        if name in arguments:
            raise InvalidArgument(f"invalid arg '{name}' {where} of queue type {_TYPE_MODULE[queue_type]}")
    overflow_name = string("x-overflow")
    overflow = Overflow.DROP_HEAD
    if overflow_name is not None:
        if overflow_name not in _OVERFLOW:
            raise bad("x-overflow", f"unknown overflow behaviour '{overflow_name}'")
        overflow = _OVERFLOW[overflow_name]
    dlx = string("x-dead-letter-exchange")
    dlrk = string("x-dead-letter-routing-key")
    if dlrk is not None and dlx is None:
        raise PreconditionFailed(
            f"invalid arg 'x-dead-letter-routing-key' {where}: "
            "x-dead-letter-routing-key requires x-dead-letter-exchange"
        )
    return QueueArguments(
        message_ttl_ms=integer("x-message-ttl", 0),
        expires_ms=integer("x-expires", 1),
        max_length=integer("x-max-length", 0),
        max_length_bytes=integer("x-max-length-bytes", 0),
        overflow=overflow,
        dead_letter_exchange=dlx,
        dead_letter_routing_key=dlrk,
        max_priority=integer("x-max-priority", 1, MAX_PRIORITY),
        queue_type=queue_type,
        delivery_limit=integer("x-delivery-limit", 0),
    )


def without_refused_by_type(merged: Mapping[str, Any], declared: Mapping[str, Any]) -> dict[str, Any]:
    """``merged`` (a queue's ``declared`` arguments with a policy's) without what the
    policy added that the queue's type refuses: RabbitMQ ignores a policy's
    ``queue-mode`` on a quorum queue, where the same argument declared is refused."""
    queue_type = declared.get("x-queue-type", "classic")
    refused = _UNSUPPORTED.get(queue_type if isinstance(queue_type, str) else "classic", ())
    return {k: v for k, v in merged.items() if k in declared or k not in refused}


def check_queue_flags(args: QueueArguments, queue: str, vhost: str, *, durable: bool, exclusive: bool,
                      auto_delete: bool) -> None:
    """A quorum queue is durable, not exclusive, not auto-delete: RabbitMQ's
    :class:`PreconditionFailed` (406) naming the property otherwise."""
    if args.queue_type != "quorum":
        return
    for refused, name in ((not durable, "non-durable"), (exclusive, "exclusive-owner"),
                          (auto_delete, "auto-delete")):
        if refused:
            raise PreconditionFailed(f"invalid property '{name}' for queue '{queue}' in vhost '{vhost}'")
