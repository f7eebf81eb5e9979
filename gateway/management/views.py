"""Entities as plain dicts with RabbitMQ's management HTTP API field names.

The one mapping from the broker model and the connection views to what operators and
RabbitMQ's tools read; every face of management (AMQP Management, RabbitMQ 4's
``/management`` node, the HTTP API) starts from these dicts. Times are RabbitMQ's:
milliseconds since the epoch.
"""
from __future__ import annotations

import hashlib
from typing import Any, Optional
from urllib.parse import quote

from gateway.auth import User
from gateway.broker import Binding, DestinationKind, Exchange, Queue, VirtualHost
from gateway.broker.connection_views import ChannelView, ConnectionView, LinkView, plain

__all__ = ["binding_dict", "channel_dict", "connection_dict", "consumer_dict", "default_binding_dict",
           "exchange_dict", "link_dict", "properties_key", "queue_dict", "user_dict", "vhost_dict"]


def _ms(seconds: float) -> int:
    return int(seconds * 1000)


def queue_dict(queue: Queue, node: str, now: Optional[float] = None) -> dict[str, Any]:
    ready, unacked = queue.message_count, queue.acquired_count
    out: dict[str, Any] = {
        "name": queue.name,
        "vhost": queue.vhost_name,
        "durable": queue.durable,
        "auto_delete": queue.auto_delete,
        "exclusive": queue.exclusive,
        "arguments": plain(queue.arguments),
        "type": "classic",
        "state": "running",
        "node": node,
        "messages": ready + unacked,
        "messages_ready": ready,
        "messages_unacknowledged": unacked,
        "message_bytes_ready": queue.available_bytes,
        "consumers": queue.consumer_count,
        "message_stats": queue_message_stats(queue),
        # the vhost's policy in effect (RabbitMQ's fields; its definition as set)
        "policy": queue.policy.name if queue.policy is not None else None,
        "effective_policy_definition": dict(queue.policy.definition) if queue.policy is not None else {},
    }
    created = queue.ready.oldest_created_at()
    if created is not None:
        out["head_message_timestamp"] = int(created)
        if now is not None:
            out["oldest_message_age"] = queue.oldest_age(now)
    return out


def queue_message_stats(queue: Queue) -> dict[str, int]:
    """RabbitMQ's ``message_stats`` counts of a queue, since it was made (rates are the
    reader's: the dashboard takes the difference between two reads)."""
    entries = queue.entries  # the counters of its entries' moves
    return {"publish": entries.published, "deliver_get": entries.delivered, "ack": entries.acked}


def exchange_dict(exchange: Exchange, vhost: str) -> dict[str, Any]:
    return {
        "name": exchange.name,
        "vhost": vhost,
        "type": exchange.type.value,
        "durable": exchange.durable,
        "auto_delete": exchange.auto_delete,
        "internal": exchange.internal,
        "arguments": plain(exchange.arguments),
        "message_stats": {"publish_in": exchange.published_in},
        "policy": exchange.policy.name if exchange.policy is not None else None,
    }


def properties_key(routing_key: str, arguments: dict) -> str:
    """RabbitMQ's binding id: the quoted routing key (``~`` when empty), then ``~`` and a
    hash of the arguments when there are any."""
    key = quote(routing_key, safe="")
    if not arguments:
        return key or "~"
    digest = hashlib.sha1(repr(sorted(plain(arguments).items())).encode()).hexdigest()[:12]
    return f"{key}~{digest}"


def binding_dict(binding: Binding, vhost: str) -> dict[str, Any]:
    arguments = plain(dict(binding.arguments))
    return {
        "source": binding.source,
        "vhost": vhost,
        "destination": binding.destination,
        "destination_type": binding.destination_kind.value,
        "routing_key": binding.routing_key,
        "arguments": arguments,
        "properties_key": properties_key(binding.routing_key, arguments),
    }


def default_binding_dict(queue: Queue) -> dict[str, Any]:
    """The implicit binding of every queue to the default exchange (RabbitMQ lists it)."""
    return {
        "source": "",
        "vhost": queue.vhost_name,
        "destination": queue.name,
        "destination_type": DestinationKind.QUEUE.value,
        "routing_key": queue.name,
        "arguments": {},
        "properties_key": properties_key(queue.name, {}),
    }


def vhost_dict(vhost: VirtualHost, node: str) -> dict[str, Any]:
    ready = sum(q.message_count for q in vhost.queues.values())
    unacked = sum(q.acquired_count for q in vhost.queues.values())
    return {
        "name": vhost.name,
        "description": "",
        "tags": [],
        "default_queue_type": "classic",
        "tracing": False,
        "cluster_state": {node: "running"},
        "messages": ready + unacked,
        "messages_ready": ready,
        "messages_unacknowledged": unacked,
    }


def connection_dict(view: ConnectionView, node: str) -> dict[str, Any]:
    return {
        "name": view.name,
        "node": node,
        "type": "network",
        "state": "running",
        "user": view.user,
        "vhost": view.vhost,
        "protocol": view.protocol,
        "peer_host": view.peer_host,
        "peer_port": view.peer_port,
        "channels": len(view.channels),
        "connected_at": _ms(view.connected_at),
        "ssl": view.ssl,
        "client_properties": view.client_properties,
        # the name the client gave itself: 0-9-1's client property, 1.0's open property
        "user_provided_name": view.client_properties.get("connection_name"),
        "backend": view.backend,
    }


def channel_name(view: ConnectionView, channel: int) -> str:
    return f"{view.name} ({channel})"


def _channel_details(view: ConnectionView, channel: int) -> dict[str, Any]:
    return {
        "name": channel_name(view, channel),
        "number": channel,
        "connection_name": view.name,
        "peer_host": view.peer_host,
        "peer_port": view.peer_port,
        "user": view.user,
    }


def channel_dict(view: ConnectionView, channel: ChannelView, node: str) -> dict[str, Any]:
    return {
        "name": channel_name(view, channel.number),
        "number": channel.number,
        "node": node,
        "state": "running",
        "user": view.user,
        "vhost": view.vhost,
        "connection_details": {"name": view.name, "peer_host": view.peer_host,
                               "peer_port": view.peer_port},
        "consumer_count": channel.consumers,
        "messages_unacknowledged": channel.unacknowledged,
        "prefetch_count": channel.prefetch_count,
        "confirm": channel.mode == "confirm",
        "transactional": channel.mode == "tx",
    }


def link_dict(view: ConnectionView, link: LinkView) -> dict[str, Any]:
    """A link, qdstat-like (RabbitMQ's API has no links)."""
    return {
        "name": link.name,
        "connection": view.name,
        "channel": link.channel,
        "protocol": view.protocol,
        "user": view.user,
        "vhost": view.vhost,
        "role": link.role,
        "address": link.address,
        "queue": link.queue,
        "credit": link.credit,
        "unsettled": link.unsettled,
    }


def consumer_dict(view: ConnectionView, link: LinkView) -> dict[str, Any]:
    return {
        "consumer_tag": link.name,
        "queue": {"name": link.queue, "vhost": view.vhost},
        "channel_details": _channel_details(view, link.channel),
        "ack_required": link.ack_required,
        "exclusive": link.exclusive,
        "prefetch_count": link.credit,
        "active": True,
        "activity_status": "up",
        "arguments": {},
    }


def user_dict(user: User) -> dict[str, Any]:
    """A user without its password hash (management never shows it)."""
    return {
        "name": user.name,
        "tags": list(user.tags),
        "permissions": {vh: {"configure": p.configure, "write": p.write, "read": p.read}
                        for vh, p in user.permissions.items()},
    }
