"""Management's view of a 0-9-1 connection: its channels, and its consumers as links.

Kept out of ``connection.py`` (the state machine); reads only public attributes of the
connection and of ``BrokerChannel`` (handlers of other kinds, in tests, show as bare
channels).
"""
from __future__ import annotations

from typing import Any

from gateway.broker.connection_views import (AMQP091_PROTOCOL, ChannelView, ConnectionView, LinkView,
                                             backend_label, connection_name, plain)


__all__ = ["connection_view"]


def connection_view(conn: Any) -> ConnectionView:
    channels: list[ChannelView] = []
    links: list[LinkView] = []
    for number, handler in sorted(conn.channel_handlers().items()):
        consumers: dict[str, Any] = getattr(handler, "consumers", {}) or {}
        mode = getattr(getattr(handler, "mode", None), "value", "")
        channels.append(ChannelView(
            number=number, consumers=len(consumers),
            unacknowledged=len(getattr(handler, "unacked", ())),
            prefetch_count=getattr(handler, "prefetch_count", 0),
            mode="" if mode == "plain" else mode))
        for consumer in consumers.values():
            queue = consumer.queue
            links.append(LinkView(
                name=consumer.tag, role="sender", address=queue.name, channel=number,
                queue=queue.name, credit=consumer.credit.limit, unsettled=consumer.credit.outstanding,
                exclusive=consumer.exclusive, ack_required=not consumer.no_ack))
    user = conn.user
    return ConnectionView(
        name=connection_name(conn.peer, conn.connection_id if conn.connection_id is not None else id(conn)),
        protocol=AMQP091_PROTOCOL, user=getattr(user, "name", "") or "",
        vhost=conn.vhost_name or "", peer_host=conn.peer_host, peer_port=conn.peer_port,
        connected_at=conn.connected_at, ssl=conn.tls,
        client_properties=plain(conn.client_properties), channels=tuple(channels),
        links=tuple(links), backend=backend_label(conn.relay.session))
