"""What a filtered consumer takes: a message's selector view and the predicate a link's
filters compile to (``MessageFilter``), both protocol-neutral.

The view maps JMS header names to the fields as Qpid JMS and Qpid Broker-J map them onto
AMQP (JMSDeliveryMode: durable -> 'PERSISTENT' / 'NON_PERSISTENT'; JMSPriority: priority,
4 when absent; JMSMessageID, JMSCorrelationID: message-id, correlation-id; JMSTimestamp:
creation-time in ms; JMSType: subject; for a 0-9-1 message its ``timestamp`` x 1000 and
its ``type``); every other name is an application property (a 0-9-1 header). The 1.0
properties section is decoded only when a filter reads a field of it, once per message
and filter.

A ``MessageFilter`` is the conjunction of the link's applied filters: a selector, no-local
(the message came from the consumer's own connection), RabbitMQ 4's
``application-properties`` and ``properties`` filters (exact values; a string value
``&p:X`` matches a prefix, ``&s:X`` a suffix).
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

from translators.amqp10_sections import inspect_amqp10
from translators.errors import TranslationError

from .message import Encoding, MessageContainer
from .selector import Selector

__all__ = ["MessageFilter", "selector_lookup", "PROPERTY_FIELDS"]

#: RabbitMQ 4 ``properties`` filter keys -> our summary's field names
PROPERTY_FIELDS: dict[str, str] = {
    "message-id": "message_id",
    "user-id": "user_id",
    "to": "to",
    "subject": "subject",
    "reply-to": "reply_to",
    "correlation-id": "correlation_id",
    "absolute-expiry-time": "absolute_expiry_time",
    "creation-time": "creation_time",
}

_DEFAULT_PRIORITY = 4


def _plain(value: Any) -> Any:
    """A selector value: bytes as text (when it is text), everything else as it is."""
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return None
    return value


def _id_text(value: Any) -> Any:
    """A message or correlation id as a selector sees it: text (a uuid or ulong as its
    string form)."""
    if value is None:
        return None
    return _plain(value) if isinstance(value, (str, bytes)) else str(value)


def _properties(message: MessageContainer) -> dict:
    """The message's 1.0 properties fields (``PROPERTY_FIELDS`` values), from either
    encoding."""
    if message.origin is Encoding.AMQP10 and message.payload is not None:
        try:
            s = inspect_amqp10(message.payload)
        except TranslationError:
            return {}
        return {"message_id": s.message_id, "user_id": _plain(s.user_id), "to": s.to,
                "subject": s.subject, "reply_to": s.reply_to,
                "correlation_id": s.correlation_id,
                "absolute_expiry_time": s.absolute_expiry_time,
                "creation_time": s.creation_time}
    p = message.properties
    if p is None:
        return {"message_id": message.message_id, "correlation_id": message.correlation_id}
    return {"message_id": p.message_id, "user_id": p.user_id, "to": None,
            "subject": None, "reply_to": p.reply_to, "correlation_id": p.correlation_id,
            "absolute_expiry_time": None,
            "creation_time": None if p.timestamp is None else int(p.timestamp) * 1000,
            "type": p.type}


def selector_lookup(message: MessageContainer) -> Callable[[str], Any]:
    """``lookup(name)`` for a selector over ``message`` (see the module docstring)."""
    decoded: list = []

    def field(name: str) -> Any:
        if not decoded:
            decoded.append(_properties(message))
        return decoded[0].get(name)

    def lookup(name: str) -> Any:
        if name.startswith("JMS"):
            if name == "JMSDeliveryMode":
                return "PERSISTENT" if message.durable else "NON_PERSISTENT"
            if name == "JMSPriority":
                return _DEFAULT_PRIORITY if message.priority is None else int(message.priority)
            if name == "JMSMessageID":
                return _id_text(message.message_id)
            if name == "JMSCorrelationID":
                return _id_text(message.correlation_id)
            if name == "JMSTimestamp":
                v = field("creation_time")
                return None if v is None else int(v)
            if name == "JMSType":
                return field("type") if message.origin is Encoding.AMQP091 else field("subject")
        headers = message.headers
        return None if headers is None else _plain(headers.get(name))

    return lookup


def _value_matches(wanted: Any, actual: Any) -> bool:
    actual = _plain(actual)
    if isinstance(wanted, str) and isinstance(actual, str):
        if wanted.startswith("&p:"):
            return actual.startswith(wanted[3:])
        if wanted.startswith("&s:"):
            return actual.endswith(wanted[3:])
    if isinstance(wanted, bool) or isinstance(actual, bool):
        return type(wanted) is type(actual) and wanted == actual
    return wanted == actual and actual is not None


class MessageFilter:
    """The predicate of one link's applied filters; ``accepts(message)``."""

    __slots__ = ("selector", "no_local_connection", "application_properties", "properties",
                 "drops")

    def __init__(self, *, selector: Optional[Selector] = None, no_local_connection: Any = None,
                 application_properties: Optional[Mapping[str, Any]] = None,
                 properties: Optional[Mapping[str, Any]] = None, drops: bool = False) -> None:
        self.selector = selector
        #: the consumer is its queue's only one (a temporary queue): a refused message
        #: is dropped rather than left for others that will never come
        self.drops = drops
        #: the consumer's connection id when no-local applies, else None
        self.no_local_connection = no_local_connection
        self.application_properties = dict(application_properties or {})
        #: keys are ``PROPERTY_FIELDS`` keys
        self.properties = dict(properties or {})

    def accepts(self, message: MessageContainer) -> bool:
        if self.no_local_connection is not None and message.publisher == self.no_local_connection:
            return False
        if self.application_properties:
            headers = message.headers or {}
            for key, wanted in self.application_properties.items():
                if key not in headers or not _value_matches(wanted, headers[key]):
                    return False
        if self.properties:
            fields = _properties(message)
            for key, wanted in self.properties.items():
                if not _value_matches(wanted, fields.get(PROPERTY_FIELDS[key])):
                    return False
        return self.selector is None or self.selector.matches(selector_lookup(message))
