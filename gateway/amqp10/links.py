"""Links attached by clients, glued to the broker model: attaching them here, the links
themselves in ``incoming_link.py`` and ``outgoing_link.py``.

Theory of operation
-------------------
``attach_link(host, link)`` runs on ``LINK_REMOTE_OPEN``. The client's terminus is
resolved through ``addressing`` against the connection's vhost:

* a proton *receiver* (the client sends) gets an :class:`IncomingLink`: its target
  resolves to a publish route (``/queue/Q``, ``/exchange/X/RK``, ``/topic/RK``, ``Q``,
  ``/queues/Q``, ``/exchanges/X/RK``, ``node@container``, services), or it is the
  anonymous relay (null target address: each message is routed by its ``to``). Every
  complete transfer becomes a ``MessageContainer`` published to the vhost and is settled
  with accepted or rejected (with a condition); a message no queue takes is settled by
  the link's unroutable policy (``unroutable_outcome``: accepted unless the operator or
  the target's capabilities say otherwise); an accepted transfer the durable store wrote
  is settled once the write is synced (``durable_accepts``). Credit: see below;
* a proton *sender* (the client receives) gets an :class:`OutgoingLink`, a broker
  ``Consumer``: its source resolves to a queue, or to a temporary queue (``dynamic``
  sources, ``/exchange/X/RK`` and ``/topic/RK``) that is deleted when the link goes.
  Link credit is a ``CreditWindow`` re-synchronised from proton on every flow; drain
  drops unused credit after a dispatch. Outcomes map onto the queue: accepted settles,
  rejected dead-letters or discards, released requeues without counting a delivery,
  modified counts (delivery-failed), excludes this link (undeliverable-here) and merges
  annotations. ``distribution-mode copy`` browses (the consumer does not acquire).
  The source's filter set (``source_filters``): legacy binding filters become the
  temporary queue's binding; selectors, no-local and RabbitMQ 4's property filters make
  the link a filtered consumer that skips what they refuse (``broker.consumers``);
  the reply echoes the filters applied; any other filter refuses the attach.
  A durable source terminus on an exchange source is a durable subscription instead of
  a temporary queue, resumed by link name and container id (``link_recovery``);
* a proton receiver whose target is a ``coordinator`` gets a :class:`CoordinatorLink`
  (transactions: ``coordinator`` and ``transactions``). A ``txn-id`` in any attach's
  properties (transactional acquisition) refuses it with ``amqp:not-implemented``.

Credit (client senders): see ``incoming_link.py``.

Message size: every attach we answer announces ``max-message-size`` (the connection's
limit). A client transfer above it detaches the link with
``amqp:link:message-size-exceeded``. A message larger than the client's own
``max-message-size`` is never sent to it: as RabbitMQ 4 does (spec 2.7.3 "results in a
message-size-exceeded link-error"), the link is detached with
``amqp:link:message-size-exceeded`` and the text "message size (N bytes) > maximum
message size (M bytes)"; the message goes back to its place in the queue, not counted
as a delivery, for the other consumers (or a new link with a larger limit). Like every
message of a link's own temporary queue (``/exchange/X/RK``, ``/topic/RK``, dynamic
sources), it goes with that queue when the link detaches.

Permissions (RabbitMQ's model, checked through ``LinkHost.permit``): a sending link
needs WRITE on the exchange it publishes to at attach (``/queue/Q`` targets: the default
exchange, ``amq.default``) and every message is checked again on its route (so the
anonymous relay is checked per message on its ``to``; a refusal rejects that message
with ``amqp:unauthorized-access``); a receiving link needs READ on its queue; an
``/exchange/X/RK`` or ``/topic/RK`` source needs READ on the exchange and CONFIGURE and
WRITE on its temporary queue; a dynamic source needs CONFIGURE on the queue it creates.
A refused attach is answered with a detach ``amqp:unauthorized-access`` whose text names
the action, the resource, the user and the vhost.

Ledger (``host.broker.ledger``, a ``gateway.ledger.Ledger``): an incoming link records
received and the routing verdict of each message (routed, unroutable, refused; a transfer
refused before it was taken in, too large, malformed or with a wrong user-id, is a lone
refused), an outgoing link delivered and settled (the outcome as the client gave it;
pre-settled deliveries settle accepted at once; unsettled ones at detach are released),
each under the link's context (``link`` the link name, ``connection`` the engine's
``connection_id``).

An address that does not resolve refuses the attach: the reply attach carries a null
terminus and the detach ``amqp:not-found`` (or ``amqp:invalid-field``) whose text names
the missing node and the address as the client wrote it (``no queue 'nope' in vhost '/'
(address '/amq/queue/nope')``; for ``x@other-container`` with no forwarding route:
``unknown container 'other-container': no forwarding route to it``); the same goes for
a relayed message's ``to``. ``/queue/Q`` and ``Q`` declare a missing queue instead
(``directory``: CONFIGURE permission, the plugin's queue properties); an attach that
declared a durable queue is answered once the store committed it (``attach_link``; a
failed commit refuses it with ``amqp:resource-limit-exceeded`` or ``amqp:internal-error``
naming the problem). Routes through
``amqp$transfer`` (a ``node@container`` target, a link to ``amqp$transfer``) follow the
per-message rules of ``transfer_routes``; local publish routes never go there.
Unsettled deliveries go back to their queue when the link or the connection goes.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Optional

from proton import Condition, Link, Terminus

from addressing import (
    AddressError,
    Forward,
    LocalConsume,
    LocalPublish,
    Role,
    ServiceRoute,
    SubjectPublish,
    TemporaryBinding,
    resolve_link_target,
    resolve_source,
)
from gateway.amqp10.conditions import Amqp10Error, ErrorCondition
from gateway.amqp10.coordinator import (CoordinatorLink, attach_coordinator, is_coordinator,
                                        refuse_transactional_acquisition)
from gateway.amqp10.directory import VhostDirectory, durable_terminus
from gateway.amqp10.incoming_link import IncomingLink
from gateway.amqp10.link_context import (
    INCOMING_CREDIT,
    address_error as _address_error,
    broker_error as _broker_error,
)
from gateway.amqp10.link_host import LinkHost
from gateway.amqp10.link_recovery import SubscriptionLink, attach_subscription, is_subscription
from gateway.amqp10.outgoing_link import OutgoingLink
from gateway.amqp10.source_filters import SourceFilters, echo_filters, read_source_filters
from gateway.amqp10.transfer_routes import global_address
from gateway.amqp10.unroutable_outcome import echo_capabilities, link_policy
from gateway.auth import Action
from gateway.broker.errors import BrokerError
from gateway.broker.exchanges import DestinationKind
from gateway.broker.queues import Queue
from gateway.broker.store_marks import StoreMark, not_saved_text, store_full

__all__ = [
    "INCOMING_CREDIT",
    "LinkHost",
    "IncomingLink",
    "OutgoingLink",
    "attach_link",
]

log = logging.getLogger(__name__)


def _copy_terminus_basics(local: Terminus, remote: Terminus, address: Optional[str]) -> None:
    local.type = remote.type
    local.address = address
    local.durability = remote.durability
    local.expiry_policy = remote.expiry_policy
    local.timeout = remote.timeout


def _temporary_queue(host: LinkHost, *actions: Action) -> Queue:
    """Declare a server-named exclusive queue, then check ``actions`` on its name.

    The name is only known once declared (``amq.gen-...``), so the queue is declared
    first and deleted again when a check refuses (the ``Amqp10Error`` propagates)."""
    vhost = host.vhost
    queue = vhost.declare_queue("", exclusive=True, owner=host.owner, now=host.now)
    try:
        for action in actions:
            host.permit(action, queue.name)
    except Amqp10Error:
        vhost.delete_queue(queue.name, owner=host.owner)
        raise
    return queue


def _permit_publish_route(host: LinkHost, route: Any) -> None:
    """WRITE on the node a sending link publishes to: the exchange (``/queue/Q``
    targets publish through the default exchange, checked as ``amq.default``, as a
    0-9-1 ``basic.publish`` to it is), or the service node."""
    if isinstance(route, (LocalPublish, SubjectPublish)):
        host.permit(Action.WRITE, route.exchange)
    elif isinstance(route, ServiceRoute):
        host.permit(Action.WRITE, route.name)
    elif isinstance(route, Forward):  # the whole node@container (RabbitMQ-style patterns)
        host.permit(Action.WRITE, global_address(route))


def _attach_outgoing(host: LinkHost, link: Link) -> tuple[OutgoingLink, Callable[[], None]]:
    remote = link.remote_source
    vhost = host.vhost
    temporary = service_reply = False
    subscription: Optional[SubscriptionLink] = None
    address = remote.address
    filters = SourceFilters()
    if remote.dynamic:
        filters = read_source_filters(remote, exchange_source=False)
        queue = _temporary_queue(host, Action.CONFIGURE)
        temporary = True
        address = f"/queue/{queue.name}"
    elif address is None:
        raise Amqp10Error(ErrorCondition.INVALID_FIELD, "the link source has no address")
    else:
        try:
            route = resolve_source(address, our_container=host.container_id,
                                   directory=VhostDirectory(host, durable=durable_terminus(remote),
                                                            role=Role.SOURCE),
                                   vhost=vhost.name)
        except AddressError as exc:
            raise _address_error(exc, address) from None
        if isinstance(route, LocalConsume):
            filters = read_source_filters(remote, exchange_source=False)
            host.permit(Action.READ, route.queue)
            queue = vhost.checked_queue(route.queue, host.owner)
        elif isinstance(route, TemporaryBinding):
            exchange = vhost.exchange(route.exchange)
            filters = read_source_filters(
                remote, exchange_source=True,
                exchange_type=None if exchange is None else exchange.type.value)
            host.permit(Action.READ, route.exchange)
            key = route.routing_key if filters.binding_key is None else filters.binding_key
            if is_subscription(remote):  # a durable subscription (link_recovery)
                queue, subscription = attach_subscription(host, link, route, key,
                                                          filters.binding_arguments)
            else:
                queue = _temporary_queue(host, Action.CONFIGURE, Action.WRITE)
                temporary = True
                try:
                    vhost.bind(DestinationKind.QUEUE, queue.name, route.exchange, key,
                               arguments=filters.binding_arguments, owner=host.owner)
                except BrokerError:
                    vhost.delete_queue(queue.name, owner=host.owner)
                    raise
        elif isinstance(route, ServiceRoute):
            filters = read_source_filters(remote, exchange_source=False)
            # the node's replies to "$me" (a link pair: RabbitMQ 4's /management) wait in
            # a queue of this connection's own, which nobody else can name or bind
            queue = vhost.declare_queue("", exclusive=True, owner=host.owner, now=host.now)
            temporary = service_reply = True
        else:
            raise Amqp10Error(ErrorCondition.NOT_IMPLEMENTED,
                              f"consuming from '{address}' is not supported")
    acquires = remote.distribution_mode != Terminus.DIST_MODE_COPY
    _copy_terminus_basics(link.source, remote, address)
    if remote.dynamic:
        link.source.dynamic = True
    if not acquires:
        link.source.distribution_mode = Terminus.DIST_MODE_COPY
    echo_filters(link.source, filters.applied)
    link.target.type = link.remote_target.type
    link.target.address = link.remote_target.address
    link.snd_settle_mode = link.remote_snd_settle_mode
    link.rcv_settle_mode = Link.RCV_FIRST
    if host.max_message_size:
        link.max_message_size = host.max_message_size
    # a link's own temporary queue drops what its filter refuses: nobody else reads it
    handler = OutgoingLink(host, link, queue, acquires=acquires, temporary=temporary,
                           service_reply=service_reply, subscription=subscription,
                           message_filter=filters.message_filter(host.connection_id,
                                                                 drops=temporary and not remote.dynamic))

    def start() -> None:
        link.open()
        try:
            queue.add_consumer(handler, host.now)
        except BrokerError:
            handler.teardown()
            raise

    return handler, start


def _attach_incoming(host: LinkHost, link: Link) -> tuple[IncomingLink, Callable[[], None]]:
    remote = link.remote_target
    vhost = host.vhost
    if remote.dynamic:
        raise Amqp10Error(ErrorCondition.NOT_IMPLEMENTED, "dynamic targets are not supported")
    address = remote.address
    route: Any = None
    unroutable, honoured = link_policy(host.unroutable, remote)
    directory = VhostDirectory(host, durable=durable_terminus(remote))
    if address is not None:
        try:
            route = resolve_link_target(address, our_container=host.container_id,
                                        directory=directory, vhost=vhost.name)
        except AddressError as exc:
            raise _address_error(exc, address) from None
        _permit_publish_route(host, route)
        if isinstance(route, (LocalPublish, SubjectPublish)):
            exchange = vhost.exchange(route.exchange)
            if exchange is not None and exchange.internal:
                raise Amqp10Error(ErrorCondition.UNAUTHORIZED_ACCESS,
                                  f"cannot publish to internal {exchange.label}")
    _copy_terminus_basics(link.target, remote, address)
    echo_capabilities(link.target, honoured)
    link.source.type = link.remote_source.type
    link.source.address = link.remote_source.address
    link.snd_settle_mode = link.remote_snd_settle_mode
    link.rcv_settle_mode = Link.RCV_FIRST
    if host.max_message_size:
        link.max_message_size = host.max_message_size
    handler = IncomingLink(host, link, route, unroutable=unroutable, directory=directory)

    def start() -> None:
        link.open()
        handler.refill()

    return handler, start


def attach_link(host: LinkHost, link: Link) -> "IncomingLink | OutgoingLink | CoordinatorLink":
    """Answer a client's attach (one to the coordinator: ``coordinator``). Raises
    :class:`Amqp10Error` (link scope) to refuse it;
    broker errors are mapped through ``conditions``. An attach that declared a durable
    queue (``directory``) is answered once the store committed the queue: until then
    the link is known but not attached on our side (no credit, no deliveries)."""
    if is_coordinator(link):  # transactions (``coordinator``)
        return attach_coordinator(host, link)
    refuse_transactional_acquisition(link)
    address = (link.remote_source if link.is_sender else link.remote_target).address
    mark = StoreMark(host.broker.store)
    try:
        handler, start = _attach_outgoing(host, link) if link.is_sender else _attach_incoming(host, link)
        if not mark.wrote:
            start()
            return handler
    except BrokerError as exc:
        raise _broker_error(exc, address) from None
    mark.answer(lambda error: _attach_saved(host, handler, start, address, error))
    return handler


def _attach_saved(host: LinkHost, handler: "IncomingLink | OutgoingLink", start: Callable[[], None],
                  address: Optional[str], error: Optional[Exception]) -> None:
    """The store committed (or failed to commit) the queue an attach declared: attach,
    or refuse the link with ``amqp:resource-limit-exceeded`` (no space) or
    ``amqp:internal-error`` naming the problem."""
    link = handler.link
    if host.closing:
        return
    refusal: Optional[Amqp10Error] = None
    if handler.closed:  # the client detached meanwhile: complete the attach and detach
        link.open()
        link.close()
    elif error is not None:
        refusal = Amqp10Error(
            ErrorCondition.RESOURCE_LIMIT_EXCEEDED if store_full(error) else ErrorCondition.INTERNAL_ERROR,
            not_saved_text(f"the queue declared for address '{address}'", error))
    else:
        try:
            start()
        except BrokerError as exc:
            refusal = _broker_error(exc, address)
    if refusal is not None:
        log.info("1.0 link %r on %s refused: %s", link.name, host.connection_id, refusal.description)
        handler.teardown()
        host.link_gone(handler)
        link.condition = Condition(refusal.condition.value, refusal.description)
        link.open()
        link.close()
    host.output_ready()
