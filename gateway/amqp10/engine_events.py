"""``EngineEvents``: the dispatch table of proton's events for one 1.0 connection.

A collaborator of ``Amqp10Engine`` (``engine.py``), made when proton's engine starts
(after SASL). It owns the dispatch: ``handle_collected`` pops the collector's events and
hands each to its link's handler or to its entry in ``_EVENT_HANDLERS`` (the connection,
session, link and transport handlers below); ``fail`` turns an ``Amqp10Error`` raised by
any of them into a detach, end or close (``close_connection``). It owns the outgoing links
whose credit changed in the current batch (``flowed``), and delivers to them once the
batch is handled.

It reaches the connection only through ``EventsHost``, the engine's public surface: the
engine's own state (its vhost, admission, teardown) is changed by the engine's methods,
never from here.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Protocol

from proton import Condition, Connection, Event

from gateway.amqp10.backend_links import BackendOutgoingLink
from gateway.amqp10.carried_links import CarriedOutgoingLink
from gateway.amqp10.conditions import Amqp10Error, ErrorCondition, Scope
from gateway.amqp10.link_host import LinkHost
from gateway.amqp10.link_recovery import session_ended
from gateway.amqp10.link_table import LinkHandler, LinkTable
from gateway.amqp10.links import OutgoingLink, attach_link
from gateway.amqp10.proton_calls import (NULL, PN_DELIVERY, PN_LINK_FLOW, c_pointer,
                                         pn_collector_peek, pn_collector_pop, pn_delivery_link,
                                         pn_event_delivery, pn_event_link, pn_event_type)
from gateway.amqp10.proton_transport import ProtonTransport
from gateway.amqp10.received_strings import check_attach, link_name, undecodable
from gateway.connection_log import CLOSED_BY_CLIENT, CLOSED_BY_PEER_LOST, CLOSED_BY_SERVER, ConnectionLogger

__all__ = ["EngineEvents", "EventsHost"]

log = logging.getLogger(__name__)


class EventsHost(LinkHost, Protocol):
    """What the event handlers need of their connection (implemented by ``Amqp10Engine``)."""

    peer_host: str
    #: links per connection (0: no limit)
    max_links: int
    #: True once the peer closed its side of the socket
    eof_received: bool
    #: edge mode: the backend session of a proxied vhost, and whether the client's frames
    #: wait for its backend connection to open
    backend_session: Any
    held_for_backend: bool

    def accept_open(self, connection: Connection) -> None: ...

    def teardown(self) -> None: ...


class EngineEvents:
    """See the module docstring. ``host`` is the engine; ``proton`` its transport,
    connection and collector; ``links`` its link table (shared: both change it only
    through ``LinkTable``'s methods)."""

    __slots__ = ("_host", "_proton", "_links", "_log", "flowed", "_received", "_collector")

    def __init__(self, host: EventsHost, proton: ProtonTransport, links: LinkTable) -> None:
        self._host = host
        self._proton = proton
        self._links = links
        #: the C collector (the transport's for its whole life): read once per batch
        self._collector = c_pointer(proton.collector)
        self._log = ConnectionLogger(log, host.trail.connection_id)
        #: outgoing links whose credit changed in this batch of events
        self.flowed: dict[OutgoingLink, None] = {}
        #: incoming links that took transfers in this batch: their credit is topped up
        #: once at its end (one look at the queues' room per read, not per transfer)
        self._received: dict[LinkHandler, None] = {}

    def handle_collected(self) -> None:
        """Handle the collected events in order: the one place proton events enter.

        Transfers and dispositions (one ``DELIVERY`` each: nearly every event under load)
        and a receiver's new credit (``LINK_FLOW``) go to their link's handler on proton's
        C objects (``proton_calls``): the handler is found by the C link, and no ``Event``
        is made. Every other event the engine acts on is wrapped once and handled by its
        entry in ``_EVENT_HANDLERS``; proton's own bookkeeping events (local opens,
        transport output, finals) are popped without being wrapped. An ``Amqp10Error``
        from any of them (or a received string that is not UTF-8) ends its link, session
        or connection (``fail``).

        Then the links whose credit changed (``flowed``) get their deliveries, after the
        batch, so dispositions that came with a flow are applied first; the events those
        deliveries cause are handled the same way, until no link's credit changed.
        """
        host = self._host
        if host.held_for_backend:
            return  # edge mode: the client's frames wait until its backend opened
        impl = self._collector
        by_pointer = self._links.by_pointer
        flowed = self.flowed
        received = self._received
        while True:
            ev = pn_collector_peek(impl)
            if ev == NULL:
                if received:
                    links = list(received)
                    received.clear()
                    for link in links:
                        link.refill()
                    continue  # a flow it issued is an event too
                if not flowed:
                    return
                handlers = list(flowed)
                flowed.clear()
                for handler in handlers:
                    handler.dispatch()
                continue
            try:
                etype = pn_event_type(ev)
                if etype == PN_DELIVERY:
                    d = pn_event_delivery(ev)
                    link_impl = pn_delivery_link(d)
                    handler = by_pointer.get(link_impl)
                    if handler is None:
                        handler = self._links.find(link_impl)
                        if handler is None:
                            continue
                    if handler.on_delivery(d):
                        received[handler] = None
                elif etype == PN_LINK_FLOW:  # new credit: a receiver sends it every few messages
                    link_impl = pn_event_link(ev)
                    handler = by_pointer.get(link_impl)
                    self._on_link_flow(handler if handler is not None else self._links.find(link_impl))
                else:
                    on_event = _EVENT_HANDLERS.get(etype)
                    if on_event is not None:
                        on_event(self, Event.wrap(ev))
                        if host.held_for_backend:
                            return  # the open of a proxied vhost: the rest waits
            except Amqp10Error as exc:
                self.fail(Event.wrap(ev), exc)
            except UnicodeDecodeError as exc:
                event = Event.wrap(ev)
                self.fail(event, undecodable(event, exc))
            finally:
                pn_collector_pop(impl)

    def _on_link_flow(self, handler: LinkHandler | None) -> None:
        """New credit (or drain) from a receiver: taken now, dispatched once the batch of
        events is handled (an incoming link's flow needs nothing)."""
        if isinstance(handler, (OutgoingLink, BackendOutgoingLink, CarriedOutgoingLink)):
            handler.on_flow()
            self.flowed[handler] = None  # delivered to at the end of the batch

    # the values of _EVENT_HANDLERS: one proton event each
    def _on_connection_open(self, event: Event) -> None:
        self._host.accept_open(event.connection)

    def _on_connection_close(self, event: Event) -> None:
        condition = event.connection.remote_condition
        trail = self._host.trail
        if condition is not None:
            trail.closing(CLOSED_BY_CLIENT, condition.name, str(condition.description or ""))
        else:
            trail.closing(CLOSED_BY_CLIENT, None, "close")
        self._host.teardown()
        event.connection.close()

    def _on_session_open(self, event: Event) -> None:
        event.session.open()

    def _on_session_close(self, event: Event) -> None:
        self._close_session_links(event.session)
        session_ended(self._host, event.session)
        event.session.close()

    def _on_transport_error(self, event: Event) -> None:
        host = self._host
        condition = event.transport.condition
        text = condition.name + ": " + str(condition.description) if condition else "?"
        self._log.debug("1.0 connection from %s failed: %s", host.peer_host, text)
        if host.eof_received:
            host.trail.closing(CLOSED_BY_PEER_LOST, None, "socket closed without close")
        else:
            host.trail.closing(CLOSED_BY_SERVER, condition.name if condition else None,
                               str(condition.description) if condition else "transport error")
        host.teardown()

    def _on_transport_closed(self, event: Event) -> None:
        self._host.teardown()

    def _on_tail_closed(self, event: Event) -> None:
        """Proton stops reading, without a word, on input it cannot decode; unless the
        peer closed properly (or hung up) that is a malformed frame."""
        connection = event.connection
        host = self._host
        if host.eof_received or connection is None or connection.state & Connection.REMOTE_CLOSED:
            return
        if connection.state & Connection.LOCAL_CLOSED:
            return
        self._log.info("1.0 connection %s: malformed input from %s", host.owner, host.peer_host)
        raise Amqp10Error(ErrorCondition.DECODE_ERROR, "malformed frame", Scope.CONNECTION)

    def _on_link_open(self, event: Event) -> None:
        link = event.link
        host = self._host
        if host.closing:
            return  # an attach behind a refused open: the close ends it
        if host.backend_session is not None:
            check_attach(link)
            self._links.add(link, host.backend_session.attach(link))
            return
        if host.vhost is None:
            raise Amqp10Error(ErrorCondition.ILLEGAL_STATE, "no vhost", Scope.CONNECTION)
        if host.max_links and len(self._links) >= host.max_links:
            raise Amqp10Error(ErrorCondition.RESOURCE_LIMIT_EXCEEDED,
                              f"link limit ({host.max_links}) per connection reached")
        check_attach(link)
        self._links.add(link, attach_link(host, link))

    def _on_link_close(self, event: Event) -> None:
        link = event.link
        handler = self._links.drop(link)
        if handler is not None:
            handler.teardown()
        if link.state & link.LOCAL_ACTIVE:
            if event.type == Event.LINK_REMOTE_DETACH:
                link.detach()
            else:
                link.close()

    def _close_session_links(self, session: Any) -> None:
        for handler in self._links.drop_session(session):
            handler.teardown()

    # ------------------------------------------------------------------ errors
    def fail(self, event: Event, error: Amqp10Error) -> None:
        """End the link, session or connection of ``event`` (the error's scope) with the
        error's condition."""
        condition = Condition(error.condition.value, error.description)
        if error.scope is Scope.LINK and event.link is not None:
            link = event.link
            self._log.info("1.0 link %s on %s refused/detached: %s", link_name(link), self._host.owner, error)
            handler = self._links.drop(link)
            if handler is not None:
                handler.teardown()
            link.condition = condition
            if not link.state & link.LOCAL_ACTIVE and not link.state & link.LOCAL_CLOSED:
                link.open()
            link.close()
        elif error.scope is Scope.SESSION and event.session is not None:
            self._close_session_links(event.session)
            event.session.condition = condition
            event.session.close()
        else:
            self._log.debug("1.0 connection %s closed: %s", self._host.owner, error)
            self._host.trail.closing(CLOSED_BY_SERVER, error.condition.value, error.description)
            self.close_connection(error.condition, error.description)

    def close_connection(self, condition: ErrorCondition, description: str) -> None:
        """Tear the connection down and close it with ``condition``; the first error is
        the one the peer is told (a later call does nothing)."""
        connection = self._proton.connection
        if connection is None or connection.state & Connection.LOCAL_CLOSED:
            return
        self._host.teardown()
        connection.condition = Condition(condition.value, description)
        if not connection.state & Connection.LOCAL_ACTIVE and not connection.state & Connection.LOCAL_CLOSED:
            connection.open()
        connection.close()


#: proton event type (number) -> what the engine does with it, for every event but the
#: per-message ones (``handle_collected``); an event type missing here is proton's own
#: bookkeeping and is popped without being wrapped
_EVENT_HANDLERS: dict[int, Callable[[EngineEvents, Event], None]] = {
    Event.LINK_REMOTE_OPEN.number: EngineEvents._on_link_open,
    Event.LINK_REMOTE_CLOSE.number: EngineEvents._on_link_close,
    Event.LINK_REMOTE_DETACH.number: EngineEvents._on_link_close,
    Event.SESSION_REMOTE_OPEN.number: EngineEvents._on_session_open,
    Event.SESSION_REMOTE_CLOSE.number: EngineEvents._on_session_close,
    Event.CONNECTION_REMOTE_OPEN.number: EngineEvents._on_connection_open,
    Event.CONNECTION_REMOTE_CLOSE.number: EngineEvents._on_connection_close,
    Event.TRANSPORT_ERROR.number: EngineEvents._on_transport_error,
    Event.TRANSPORT_TAIL_CLOSED.number: EngineEvents._on_tail_closed,
    Event.TRANSPORT_CLOSED.number: EngineEvents._on_transport_closed,
}
