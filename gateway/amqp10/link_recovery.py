"""Durable subscriptions of 1.0 receivers, and resuming them by link name (link recovery).

A receiver whose source terminus is durable (``configuration`` or ``unsettled-state``) on
an exchange source (``/exchange/X/RK``, ``/topic/RK``) consumes from a subscription queue
(``broker.subscriptions``) named from the client's container id and the link name,
instead of a temporary queue. Qpid JMS makes such a link for a durable topic subscriber.
Re-attaching with the same container id and link name, on any connection and after a
gateway restart, resumes the subscription: the same queue with the messages it held.
An attach with the same identity but another source (address, or a binding filter) replaces
the subscription, as JMS does when a durable subscriber changes its topic.

When it ends is the source's expiry policy (``broker.subscriptions.Expiry``):

* ``never``: the queue is durable (kept by the store with its bindings and persistent
  messages) and outlives detaches, connections and restarts;
* ``connection-close`` / ``session-end``: the queue outlives a detach (``closed = false``)
  until the connection (or the session) the link was on ends; it is not durable;
* ``link-detach``: the queue goes when the link detaches.

The ``timeout`` delays the end: the queue is deleted once it stayed unused that long, and a
re-attach before then resumes it. A detach with ``closed = true`` ends the subscription at
once, whatever its policy (JMS unsubscribe); so does an attach of a new source.
Only one link at a time consumes a subscription (an exclusive consumer: a second attach
is refused with ``amqp:resource-locked``).

Unsettled deliveries (AMQP 1.0 §2.6.13): proton's engine neither sends an unsettled map
in its attach nor decodes the peer's (``pn_do_attach`` skips both fields), so the
gateway's attach always announces no unsettled state and the client's map is never read.
The gateway's side of the reconciliation is therefore the spec's "no record at the
receiver" case: deliveries unsettled when the link went go back to the subscription queue
(counted as delivered, ``first-acquirer`` false) and are sent again on the resumed link;
the client's settlement of an old delivery after its link went is not applied. That is
at-least-once: nothing is lost, and a resent message is marked as a redelivery.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Optional

from proton import Endpoint, Link, Terminus

from addressing import TemporaryBinding
from gateway.amqp10.conditions import Amqp10Error, ErrorCondition
from gateway.amqp10.link_host import LinkHost
from gateway.auth import Action
from gateway.broker.errors import BrokerError
from gateway.broker.exchanges import DestinationKind
from gateway.broker.queues import Queue
from gateway.broker.subscriptions import (
    Ending,
    Expiry,
    expire,
    expires_on,
    resume,
    subscription_arguments,
    subscription_of,
    subscription_queue_name,
)

__all__ = ["SubscriptionLink", "attach_subscription", "connection_ended", "is_subscription",
           "session_ended"]

log = logging.getLogger(__name__)

_EXPIRY = {
    Terminus.EXPIRE_WITH_LINK: Expiry.LINK_DETACH,
    Terminus.EXPIRE_WITH_SESSION: Expiry.SESSION_END,
    Terminus.EXPIRE_WITH_CONNECTION: Expiry.CONNECTION_CLOSE,
    Terminus.EXPIRE_NEVER: Expiry.NEVER,
}

#: the attribute of proton's Connection wrapper holding its lingering subscriptions
_LINGERING = "gateway_lingering_subscriptions"


def is_subscription(remote: Terminus) -> bool:
    """Whether an attach with source ``remote`` on an exchange source is a durable
    subscription: its terminus is durable (``configuration`` / ``unsettled-state``)."""
    return remote.durability != Terminus.NONDURABLE


@dataclass(slots=True)
class SubscriptionLink:
    """The subscription an outgoing link consumes: decides, when the link goes, whether
    the subscription ends, waits for its session or connection, or lives on."""

    queue: Queue
    expiry: Expiry
    timeout: int

    def link_ended(self, host: LinkHost, link: Link) -> None:
        """The link went (its handler's teardown): apply the expiry policy."""
        queue = self.queue
        if queue.deleted or queue.consumers:  # e.g. a refused second attach
            return
        if link.state & Endpoint.REMOTE_CLOSED:  # detach with closed = true
            expire(queue, 0, host.now, "the link was closed")
            return
        if host.closing:
            ending = Ending.CONNECTION_CLOSE
        elif link.session.state & Endpoint.REMOTE_CLOSED:
            ending = Ending.SESSION_END
        else:
            ending = Ending.LINK_DETACH
        if expires_on(self.expiry, ending):
            expire(queue, self.timeout, host.now, _policy_text(ending))
        elif self.expiry is not Expiry.NEVER:
            lingering = _lingering(link.connection)
            lingering[queue.name] = (self, link.session)


def _policy_text(policy: Any) -> str:
    """``Ending.SESSION_END`` -> ``session-end``: the spec's spelling, for logs."""
    return policy.name.lower().replace("_", "-")


def _lingering(connection: Any) -> dict[str, tuple[SubscriptionLink, Any]]:
    table = getattr(connection, _LINGERING, None)
    if table is None:
        table = {}
        setattr(connection, _LINGERING, table)
    return table


def _expire_lingering(host: LinkHost, connection: Any, ending: Ending, session: Any = None) -> None:
    table = getattr(connection, _LINGERING, None) if connection is not None else None
    if not table:
        return
    for name, (subscription, on_session) in list(table.items()):
        if session is not None and on_session != session:
            continue
        if not expires_on(subscription.expiry, ending):
            continue
        del table[name]
        queue = subscription.queue
        if not queue.deleted and not queue.consumers:  # not resumed meanwhile
            expire(queue, subscription.timeout, host.now, _policy_text(ending))


def session_ended(host: LinkHost, session: Any) -> None:
    """``session`` ended: end the ``session-end`` subscriptions whose links detached on it."""
    _expire_lingering(host, session.connection, Ending.SESSION_END, session)


def connection_ended(host: LinkHost, connection: Any) -> None:
    """The connection ended: end the ``session-end`` and ``connection-close``
    subscriptions whose links detached on it."""
    _expire_lingering(host, connection, Ending.CONNECTION_CLOSE)


def _source_text(address: str, route: TemporaryBinding, key: str, arguments: Optional[dict]) -> str:
    """What a subscription consumes, compared on a re-attach: the address, and the
    binding when a filter chose another."""
    if key == route.routing_key and not arguments:
        return address
    return f"{address} (binding key {key!r}, arguments {sorted((arguments or {}).items())!r})"


def attach_subscription(host: LinkHost, link: Link, route: TemporaryBinding, key: str,
                        arguments: Optional[dict]) -> tuple[Queue, SubscriptionLink]:
    """Find (resume) or declare the subscription queue of ``link`` bound to
    ``route.exchange`` with ``key`` / ``arguments``. Raises ``Amqp10Error`` (a queue of
    that name that is no subscription: ``amqp:resource-locked``) or ``BrokerError``."""
    remote = link.remote_source
    vhost = host.vhost
    container_id = link.connection.remote_container or ""
    expiry = _EXPIRY.get(remote.expiry_policy, Expiry.SESSION_END)
    timeout = int(remote.timeout or 0)
    name = subscription_queue_name(container_id, link.name)
    source = _source_text(remote.address, route, key, arguments)
    queue = vhost.queue(name)
    if queue is not None:
        identity = subscription_of(queue)
        if identity is None:
            raise Amqp10Error(ErrorCondition.RESOURCE_LOCKED,
                              f"{queue.label} exists and is not the durable subscription "
                              f"'{link.name}' of container '{container_id}'")
        host.permit(Action.READ, name)
        if identity[2] == source and queue.durable == (expiry is Expiry.NEVER):
            resume(queue)
            log.info("durable subscription %r of %r resumed on %s", link.name, container_id,
                     host.connection_id)
            return queue, SubscriptionLink(queue, expiry, timeout)
        if queue.consumers:
            raise Amqp10Error(ErrorCondition.RESOURCE_LOCKED,
                              f"durable subscription '{link.name}' of container '{container_id}' "
                              f"is in use by another link")
        log.info("durable subscription %r of %r changed source to %r: replaced", link.name,
                 container_id, source)
        queue.delete(now=host.now)
    host.permit(Action.CONFIGURE, name)
    host.permit(Action.WRITE, name)
    queue = vhost.declare_queue(name, durable=expiry is Expiry.NEVER,
                                arguments=subscription_arguments(container_id, link.name, source,
                                                                 timeout, expiry),
                                now=host.now)
    try:
        vhost.bind(DestinationKind.QUEUE, name, route.exchange, key, arguments=arguments,
                   owner=host.owner)
    except BrokerError:
        queue.delete(now=host.now)
        raise
    log.info("durable subscription %r of %r declared (%s, expiry %s) on %s", link.name,
             container_id, source, _policy_text(expiry), host.connection_id)
    return queue, SubscriptionLink(queue, expiry, timeout)
