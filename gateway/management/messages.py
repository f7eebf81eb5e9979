"""Request and reply messages of the management nodes, and where replies go.

A request arrives as a broker ``MessageContainer`` in either encoding; it is read as a
1.0 message (a 0-9-1 one through the translators, headers becoming
application-properties). A reply is a 1.0 message published like any other: to the
request's ``reply-to`` address, resolved in the caller's vhost with the caller's WRITE
permission on the exchange (a reply is a publish on the caller's behalf), or, for
``$me``, to the queue of the caller's link pair.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Optional

from proton import Message

from addressing import AddressError, AddressErrorKind, LocalPublish, resolve_target
from gateway.auth import Action, User
from gateway.broker import Broker, BrokerError, Encoding, MessageContainer
from gateway.broker.amqp10_form import amqp10_bytes
from gateway.broker.service_calls import ServiceCaller
from translators.amqp10_sections import inspect_amqp10

from .access import require_permission
from .errors import ManagementError

__all__ = ["Request", "caller_user", "decode_request", "deliver_reply", "event_container", "read_request",
           "reply_container"]

log = logging.getLogger(__name__)

#: the reply-to of RabbitMQ 4's link pair: "the receiving link paired with mine"
REPLY_TO_ME = "$me"


@dataclass
class Request:
    """One decoded request: the 1.0 message and its application-properties with text
    keys."""

    message: Message
    properties: dict[str, Any]

    @property
    def reply_to(self) -> Optional[str]:
        return self.message.reply_to

    @property
    def correlation(self) -> Any:
        """What the reply's correlation-id carries: the request's message-id, else its
        correlation-id (both conventions are in use)."""
        return self.message.id if self.message.id is not None else self.message.correlation_id


def read_request(container: MessageContainer) -> Request:
    """Decode a request; raises ``BadRequest``-worthy ``ValueError`` on bad bytes."""
    message = Message()
    message.decode(bytes(amqp10_bytes(container)))
    if isinstance(message.body, (bytes, bytearray, memoryview, str)) and not message.body:
        message.body = None  # a 0-9-1 request has a body, if only an empty one
    props = {str(k): v for k, v in (message.properties or {}).items()}
    return Request(message, props)


def reply_container(body: Any, *, correlation: Any, properties: dict[str, Any], now: float,
                    subject: Optional[str] = None) -> MessageContainer:
    """A 1.0 reply as a broker container."""
    message = Message(body=body, correlation_id=correlation, properties=properties, subject=subject)
    encoded = message.encode()
    summary = inspect_amqp10(encoded)
    return MessageContainer(
        Encoding.AMQP10, encoded, "", "", summary.application_properties or None, False, 4, None,
        now, summary.body_size, None, summary.correlation_id)


def event_container(headers: dict[str, Any], now: float) -> MessageContainer:
    """A broker event: empty body, ``headers`` as application-properties."""
    message = Message(body=None, properties=headers)
    encoded = message.encode()
    summary = inspect_amqp10(encoded)
    return MessageContainer(Encoding.AMQP10, encoded, "", "", summary.application_properties or None,
                            False, 4, None, now, summary.body_size)


class _ReplyDirectory:
    """The resolver's view of the caller's vhost for a reply: nothing is declared."""

    def __init__(self, vhost: Any) -> None:
        self._vhost = vhost

    def has_exchange(self, name: str) -> bool:
        return self._vhost.exchange(name) is not None

    def has_queue(self, name: str) -> bool:
        return self._vhost.queue(name) is not None

    def has_service(self, name: str) -> bool:
        return False

    def declare_queue(self, name: str) -> None:
        raise AddressError(AddressErrorKind.NOT_FOUND, f"no queue '{name}' in vhost '{self._vhost.name}'")


def deliver_reply(broker: Broker, caller: ServiceCaller, user: Optional[User], reply_to: Optional[str],
                  reply: MessageContainer, now: float) -> bool:
    """Publish ``reply`` to ``reply_to``; False (logged) when it cannot go anywhere."""
    vhost = broker.vhost(caller.vhost)
    if not reply_to or vhost is None:
        log.info("management request from %s without reply-to: no reply sent", caller.connection or "?")
        return False
    try:
        if reply_to == REPLY_TO_ME:
            if caller.reply_queue is None:
                raise ValueError("reply-to '$me' needs a paired receiving link")
            exchange, key = "", caller.reply_queue
        else:
            route = resolve_target(reply_to, our_container=broker.container_id,
                                   directory=_ReplyDirectory(vhost), subject=None, vhost=vhost.name)
            if not isinstance(route, LocalPublish):
                raise ValueError(f"reply-to '{reply_to}' is not a local queue or exchange")
            exchange, key = route.exchange, route.routing_key
            if user is not None:
                require_permission(user, vhost.name, Action.WRITE, exchange)
        if not vhost.publish(exchange, key, reply, now).routed:
            raise ValueError(f"reply-to '{reply_to}' routes to no queue")
        return True
    except (AddressError, BrokerError, ManagementError, ValueError) as exc:
        log.warning("management reply to %r for %s not delivered: %s", reply_to,
                    caller.connection or "?", getattr(exc, "text", exc))
        return False


def decode_request(container: MessageContainer, caller: ServiceCaller, users: Any,
                   node: str) -> Optional[tuple[Optional[User], Request]]:
    """The acting user and the decoded request to ``node``; None (logged) when the
    message does not decode (there is no reply-to to answer then)."""
    try:
        request = read_request(container)
    except Exception as exc:  # noqa: BLE001 - proton's decoder raises several kinds
        log.info("undecodable %s request from %s: %s", node, caller.connection or "?", exc)
        return None
    return caller_user(caller, container, users), request


def caller_user(caller: ServiceCaller, container: MessageContainer, users: Any) -> Optional[User]:
    """The acting user: the protocol's authenticated user, else the message's validated
    ``user_id`` (a 0-9-1 publish routed by the broker), else None."""
    if caller.user is not None:
        return caller.user
    if container.user_id and users is not None:
        return users.get(container.user_id)
    return None
