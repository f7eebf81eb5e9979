"""Management's view of a 1.0 connection: its sessions and links.

Kept out of ``engine.py``; reads the engine's public accessors and proton's endpoints.
Sessions are numbered in the order proton lists them (proton does not expose the
channel number).
"""
from __future__ import annotations

from typing import Any

from proton import Endpoint

from gateway.amqp10.outgoing_link import OutgoingLink
from gateway.amqp10.backend_links import BackendOutgoingLink
from gateway.amqp10.carried_links import CarriedOutgoingLink
from gateway.broker.connection_views import (AMQP10_PROTOCOL, ChannelView, ConnectionView, LinkView,
                                             backend_label, connection_name, plain)


__all__ = ["connection_view"]

_ACTIVE = Endpoint.LOCAL_ACTIVE


def _sessions(connection: Any) -> list[Any]:
    out = []
    session = connection.session_head(_ACTIVE) if connection is not None else None
    while session is not None:
        out.append(session)
        session = session.next(_ACTIVE)
    return out


def connection_view(engine: Any) -> ConnectionView:
    connection = engine.proton_connection
    sessions = _sessions(connection)
    number = {id(s): i for i, s in enumerate(sessions)}
    links: list[LinkView] = []
    per_session: dict[int, list[LinkView]] = {}
    for handler in engine.link_handlers():
        link = handler.link
        channel = number.get(id(link.session), 0)
        if isinstance(handler, OutgoingLink):
            view = LinkView(name=link.name, role="sender", address=link.source.address,
                            channel=channel, queue=handler.queue.name if handler.queue is not None else None,
                            credit=link.credit, unsettled=handler.credit.outstanding,
                            ack_required=link.snd_settle_mode != link.SND_SETTLED)
        elif isinstance(handler, (BackendOutgoingLink, CarriedOutgoingLink)):  # edge mode: the backend's queue
            view = LinkView(name=link.name, role="sender", address=link.source.address, channel=channel,
                            queue=handler.queue, credit=link.credit, unsettled=handler.unsettled_count,
                            ack_required=link.snd_settle_mode != link.SND_SETTLED)
        else:
            view = LinkView(name=link.name, role="receiver", address=link.target.address,
                            channel=channel, credit=link.credit, unsettled=link.unsettled)
        links.append(view)
        per_session.setdefault(channel, []).append(view)
    channels = tuple(
        ChannelView(number=i, consumers=sum(1 for v in per_session.get(i, ()) if v.queue is not None),
                    unacknowledged=sum(v.unsettled for v in per_session.get(i, ()) if v.role == "sender"))
        for i in range(len(sessions)))
    user = engine.user
    props = connection.remote_properties if connection is not None else None
    return ConnectionView(
        name=connection_name(engine.peer, engine.connection_id), protocol=AMQP10_PROTOCOL,
        user=getattr(user, "name", "") or "",
        vhost=engine.vhost.name if engine.vhost is not None else engine.vhost_name or "",
        peer_host=engine.peer_host, peer_port=engine.peer_port, connected_at=engine.connected_at,
        ssl=engine.tls, client_properties=plain(dict(props or {})), channels=channels,
        links=tuple(links), backend=backend_label(engine.backend_session))
