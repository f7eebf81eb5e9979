"""Address resolution: ``Address`` + where we are -> a ``Route``.

The resolver asks a ``NodeDirectory`` (a ``typing.Protocol``, implemented
by the broker's vhost, so this package imports no broker code) whether the
named exchange, queue or service exists, and returns what the link should
do:

* ``LocalPublish(exchange, routing_key)``: publish to a local exchange;
* ``SubjectPublish(exchange)``: publish to a local exchange with each
  message's subject as the routing key (targets ``/exchange/X`` and
  ``/queue``); turn it into a ``LocalPublish`` per message with
  ``route_message``;
* ``LocalConsume(queue)``: consume from a queue (existing, or just declared);
* ``TemporaryBinding(exchange, routing_key)``: consume from a temporary
  queue bound to the exchange (sources ``/exchange/X/RK``, ``/topic/RK``);
  the link owner deletes that queue on detach;
* ``Forward(container, node)``: hand the message to ``amqp$transfer`` for
  another container;
* ``ServiceRoute(name)``: a service node of this gateway.

Global addresses: ``node@container`` whose container is ``our_container``
resolves as the address ``node`` would (a queue name, or a service name),
except that a missing queue is never declared (a forwarded message does not
create one either). Any other container becomes ``Forward`` if the
``amqp$transfer`` service is registered and the directory knows a service for
the whole ``node@container`` name (the transfer service answers for the
containers it has a route to); else NOT_FOUND, naming the service or the
unknown container. As a source, a
remote container is INVALID: one cannot consume from another broker through
us.

Missing queues: ``/queue/Q`` and a bare ``Q`` (``QueueAddress.declare``) ask
the directory to ``declare_queue(Q)``, as a target, as a source and as a
relayed message's ``to``, the way RabbitMQ's 1.0 plugin and its STOMP
``/queue/`` do; the directory decides the queue's properties and checks the
permission, and raises its own errors (a refusal propagates unchanged).
``/amq/queue/Q``, ``/queues/Q`` and ``node@us`` require the queue to exist
and raise ``AddressError(kind=NOT_FOUND, text="no queue 'q' in vhost '/'")``
otherwise; likewise for exchanges and services. A per-message subject key
(``/queue`` with a subject) is not checked against the directory and never
declares: the broker routes it, and an unroutable message is handled by the
protocol's unroutable policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from addressing.address import (
    DEFAULT_EXCHANGE,
    TOPIC_EXCHANGE,
    TRANSFER_SERVICE,
    Address,
    ExchangeAddress,
    GlobalAddress,
    QueueAddress,
    ServiceAddress,
    TopicAddress,
)
from addressing.errors import AddressError, AddressErrorKind
from addressing.grammar import MAX_NAME_BYTES, PARSED_MAX, Role, parse_address

__all__ = [
    "NodeDirectory",
    "LocalPublish",
    "SubjectPublish",
    "LocalConsume",
    "TemporaryBinding",
    "Forward",
    "ServiceRoute",
    "Route",
    "resolve_target",
    "resolve_link_target",
    "resolve_source",
    "route_message",
]


class NodeDirectory(Protocol):
    """What the resolver needs to know about one virtual host, and the one thing it
    may ask it to do: declare a queue that ``/queue/Q`` or ``Q`` names (with the
    properties and permission check of the directory's choosing; raise to refuse)."""

    def has_exchange(self, name: str) -> bool: ...

    def has_queue(self, name: str) -> bool: ...

    def has_service(self, name: str) -> bool: ...

    def declare_queue(self, name: str) -> None: ...


@dataclass(frozen=True, slots=True)
class LocalPublish:
    exchange: str
    routing_key: str


@dataclass(frozen=True, slots=True)
class SubjectPublish:
    """Publish to ``exchange``; each message's subject is the routing key."""

    exchange: str


@dataclass(frozen=True, slots=True)
class LocalConsume:
    queue: str


@dataclass(frozen=True, slots=True)
class TemporaryBinding:
    exchange: str
    routing_key: str


@dataclass(frozen=True, slots=True)
class Forward:
    container: str
    node: str


@dataclass(frozen=True, slots=True)
class ServiceRoute:
    name: str


Route = LocalPublish | SubjectPublish | LocalConsume | TemporaryBinding | Forward | ServiceRoute


def _where(vhost: str | None) -> str:
    return f"vhost '{vhost}'" if vhost is not None else "this virtual host"


def _not_found(kind: str, name: str, vhost: str | None) -> AddressError:
    return AddressError(AddressErrorKind.NOT_FOUND, f"no {kind} '{name}' in {_where(vhost)}")


def _need_exchange(directory: NodeDirectory, name: str, vhost: str | None) -> str:
    if not directory.has_exchange(name):
        raise _not_found("exchange", name, vhost)
    return name


def _need_queue(directory: NodeDirectory, address: QueueAddress, vhost: str | None) -> str:
    """The queue ``address`` names: existing, or declared now if the address says so."""
    name = address.queue
    assert name is not None
    if not directory.has_queue(name):
        if not address.declare:
            raise _not_found("queue", name, vhost)
        directory.declare_queue(name)
    return name


def _need_service(directory: NodeDirectory, name: str, vhost: str | None) -> str:
    if not directory.has_service(name):
        raise _not_found("service", name, vhost)
    return name


def _parsed(address: str | Address, role: Role) -> Address:
    return parse_address(address, role) if isinstance(address, str) else address


def _localise(address: Address, our_container: str, role: Role) -> Address:
    """Replace ``node@us`` by what ``node`` alone means, a queue that must exist."""
    if isinstance(address, GlobalAddress) and address.container == our_container:
        local = parse_address(address.node, role)
        if isinstance(local, QueueAddress) and local.declare:
            return QueueAddress(local.queue)
        return local
    return address


#: ``_local``'s answers by (address, our container, role), at most ``PARSED_MAX``
#: (forgotten at once when full): an ``amqp$transfer`` link resolves the same ``to`` for
#: every message, and an ``Address`` is immutable
_LOCAL: dict[tuple[str, str, Role], Address] = {}


def _local(address: str | Address, our_container: str, role: Role) -> Address:
    """``address`` parsed for ``role`` and localised. Raises ``AddressError``."""
    if type(address) is not str:
        return _localise(_parsed(address, role), our_container, role)
    key = (address, our_container, role)
    local = _LOCAL.get(key)
    if local is None:
        local = _localise(parse_address(address, role), our_container, role)
        if len(_LOCAL) >= PARSED_MAX:
            _LOCAL.clear()
        _LOCAL[key] = local
    return local


#: the publish route to each queue through the default exchange, at most ``PARSED_MAX``
#: (forgotten at once when full): a ``LocalPublish`` is immutable, and an
#: ``amqp$transfer`` link resolves the same queue for every message (its existence is
#: still checked each time)
_QUEUE_ROUTES: dict[str, LocalPublish] = {}


#: the queue route each target address string resolved to, by (address, our container), at
#: most ``PARSED_MAX`` (forgotten at once when full): ``resolve_target``'s answer for the
#: same ``to`` again, once the queue is seen to exist still (an ``amqp$transfer`` link
#: resolves one ``to`` per message)
_QUEUE_TARGETS: dict[tuple[str, str], LocalPublish] = {}


def _queue_route(name: str) -> LocalPublish:
    """The route to queue ``name``, kept in ``_QUEUE_ROUTES``."""
    if len(_QUEUE_ROUTES) >= PARSED_MAX:
        _QUEUE_ROUTES.clear()
    route = _QUEUE_ROUTES[name] = LocalPublish(DEFAULT_EXCHANGE, name)
    return route


def resolve_link_target(address: str | Address, *, our_container: str,
                        directory: NodeDirectory, vhost: str | None = None) -> Route:
    """Resolve a link target at attach time, before any message is known.

    Returns ``SubjectPublish`` for ``/exchange/X`` and ``/queue``. Raises
    ``AddressError``: INVALID for a malformed address, NOT_FOUND for a
    missing exchange, queue (unless the form declares it) or service; and
    whatever ``directory.declare_queue`` raises. ``vhost`` only names the
    place in error texts.
    """
    parsed = _local(address, our_container, Role.TARGET)
    match parsed:
        case ExchangeAddress(exchange, None):
            return SubjectPublish(_need_exchange(directory, exchange, vhost))
        case ExchangeAddress(exchange, str(key)):
            return LocalPublish(_need_exchange(directory, exchange, vhost), key)
        case TopicAddress(key):
            return LocalPublish(_need_exchange(directory, TOPIC_EXCHANGE, vhost), key)
        case QueueAddress(None):
            return SubjectPublish(DEFAULT_EXCHANGE)
        case QueueAddress(str()):
            name = _need_queue(directory, parsed, vhost)
            route = _QUEUE_ROUTES.get(name)
            if route is None:
                route = _queue_route(name)
            if type(address) is str:
                if len(_QUEUE_TARGETS) >= PARSED_MAX:
                    _QUEUE_TARGETS.clear()
                _QUEUE_TARGETS[(address, our_container)] = route
            return route
        case GlobalAddress(node, container):
            _need_service(directory, TRANSFER_SERVICE, vhost)
            if not directory.has_service(str(parsed)):
                raise AddressError(AddressErrorKind.NOT_FOUND,
                                   f"unknown container '{container}': no forwarding route to it")
            return Forward(container, node)
        case ServiceAddress(name):
            return ServiceRoute(_need_service(directory, name, vhost))
    raise TypeError(f"not an address: {parsed!r}")


def route_message(target_route: LocalPublish | SubjectPublish,
                  subject: str | None) -> LocalPublish:
    """Give the publish route of one message.

    ``LocalPublish`` is returned unchanged (the subject does not matter);
    ``SubjectPublish`` takes ``subject`` as the routing key. Raises
    ``AddressError(INVALID)`` if the subject is needed and is None or longer
    than 255 UTF-8 bytes; ``TypeError`` for any other route.
    """
    if isinstance(target_route, LocalPublish):
        return target_route
    if not isinstance(target_route, SubjectPublish):
        raise TypeError(f"route_message needs a publish route, got {target_route!r}")
    shown = "/queue" if target_route.exchange == DEFAULT_EXCHANGE else (
        f"/exchange/{target_route.exchange}")
    if subject is None:
        raise AddressError(AddressErrorKind.INVALID,
                           f"address '{shown}' takes the routing key from the message "
                           "subject, and the message has no subject")
    if len(subject.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        raise AddressError(AddressErrorKind.INVALID,
                           f"address '{shown}': subject longer than {MAX_NAME_BYTES} bytes")
    return LocalPublish(target_route.exchange, subject)


def resolve_target(address: str | Address, *, our_container: str, directory: NodeDirectory,
                   subject: str | None = None, vhost: str | None = None) -> Route:
    """Resolve a target for one message with the given ``subject``.

    Like ``resolve_link_target``, but a subject-keyed address becomes a
    ``LocalPublish`` right away, and raises ``AddressError(INVALID)`` if
    ``subject`` is None (``/exchange/X`` or ``/queue`` without a subject).
    Use this for the anonymous relay (null target, route by ``to``).
    """
    if type(address) is str:
        known = _QUEUE_TARGETS.get((address, our_container))
        if known is not None and directory.has_queue(known.routing_key):
            return known
    route = resolve_link_target(address, our_container=our_container,
                                directory=directory, vhost=vhost)
    if isinstance(route, SubjectPublish):
        return route_message(route, subject)
    return route


def resolve_source(address: str | Address, *, our_container: str, directory: NodeDirectory,
                   vhost: str | None = None) -> Route:
    """Resolve a link source: ``LocalConsume``, ``TemporaryBinding`` or ``ServiceRoute``.

    Raises ``AddressError``: INVALID for a malformed address or a remote
    ``node@container``; NOT_FOUND for a missing exchange, queue (unless the
    form declares it) or service; and whatever ``directory.declare_queue``
    raises.
    """
    parsed = _local(address, our_container, Role.SOURCE)
    match parsed:
        case ExchangeAddress(exchange, key):
            return TemporaryBinding(_need_exchange(directory, exchange, vhost), key or "")
        case TopicAddress(key):
            return TemporaryBinding(_need_exchange(directory, TOPIC_EXCHANGE, vhost), key)
        case QueueAddress(str()):
            return LocalConsume(_need_queue(directory, parsed, vhost))
        case QueueAddress(None):
            raise AddressError(AddressErrorKind.INVALID,
                               "invalid address '/queue': a source needs a queue name")
        case GlobalAddress(node, container):
            raise AddressError(AddressErrorKind.INVALID,
                               f"invalid address '{node}@{container}': cannot consume from "
                               f"remote container '{container}'")
        case ServiceAddress(name):
            return ServiceRoute(_need_service(directory, name, vhost))
    raise TypeError(f"not an address: {parsed!r}")
