"""``EngineEvents``: how ``Amqp10Engine`` (``engine.py``) handles proton's events.

A mixin of the engine: ``_handle_collected`` pops the collector's events and hands
each to its link's handler or to its entry in ``_EVENT_HANDLERS`` (the connection,
session, link and transport handlers below); ``_fail`` turns an ``Amqp10Error`` raised
by any of them into a detach, end or close (``_close_connection``). The methods use the
engine's ``_proton``, ``_links``, ``_flowed``, ``trail``, ``_log``, ``_teardown`` and
the other attributes ``Amqp10Engine.__init__`` sets.
"""
from __future__ import annotations

from typing import Any, Callable

from proton import Condition, Connection, Event

from gateway.amqp10.conditions import Amqp10Error, ErrorCondition, Scope
from gateway.amqp10.link_table import LinkHandler
from gateway.amqp10.links import OutgoingLink, attach_link
from gateway.amqp10.proton_calls import (NULL, PN_DELIVERY, PN_LINK_FLOW, c_pointer,
                                         pn_collector_peek, pn_collector_pop, pn_delivery_link,
                                         pn_event_delivery, pn_event_link, pn_event_type)
from gateway.amqp10.received_strings import check_attach, check_open, link_name, undecodable
from gateway.auth import ConnectionLimitReached, may_access_vhost
from gateway.connection_log import CLOSED_BY_CLIENT, CLOSED_BY_PEER_LOST, CLOSED_BY_SERVER

__all__ = ["EngineEvents", "VHOST_PREFIX"]

#: ``open.hostname`` prefix that selects a vhost (RabbitMQ's convention)
VHOST_PREFIX = "vhost:"


class EngineEvents:
    """The proton event handlers of ``Amqp10Engine``, and its error handling."""

    def _handle_collected(self) -> None:
        """Handle the collected events in order: the one place proton events enter.

        Transfers and dispositions (one ``DELIVERY`` each: nearly every event under load)
        and a receiver's new credit (``LINK_FLOW``) go to their link's handler on proton's
        C objects (``proton_calls``): the handler is found by the C link, and no ``Event``
        is made. Every other event the engine acts on is wrapped once and handled by its
        entry in ``_EVENT_HANDLERS``; proton's own bookkeeping events (local opens,
        transport output, finals) are popped without being wrapped. An ``Amqp10Error``
        from any of them (or a received string that is not UTF-8) ends its link, session
        or connection (``_fail``).
        """
        assert self._proton is not None
        impl = c_pointer(self._proton.collector)
        by_pointer = self._links.by_pointer
        while True:
            ev = pn_collector_peek(impl)
            if ev == NULL:
                return
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
                    handler.on_delivery(d)
                elif etype == PN_LINK_FLOW:  # new credit: a receiver sends it every few messages
                    link_impl = pn_event_link(ev)
                    handler = by_pointer.get(link_impl)
                    self._on_link_flow(handler if handler is not None else self._links.find(link_impl))
                else:
                    on_event = _EVENT_HANDLERS.get(etype)
                    if on_event is not None:
                        on_event(self, Event.wrap(ev))
            except Amqp10Error as exc:
                self._fail(Event.wrap(ev), exc)
            except UnicodeDecodeError as exc:
                event = Event.wrap(ev)
                self._fail(event, undecodable(event, exc))
            finally:
                pn_collector_pop(impl)

    def _on_link_flow(self, handler: LinkHandler | None) -> None:
        """New credit (or drain) from a receiver: taken now, dispatched once the batch of
        events is handled (an incoming link's flow needs nothing)."""
        if isinstance(handler, OutgoingLink):
            handler.on_flow()
            self._flowed[handler] = None

    # the values of _EVENT_HANDLERS: one proton event each
    def _on_connection_open(self, event: Event) -> None:
        connection = event.connection
        self._handshake_deadline = None
        check_open(connection)
        hostname = connection.remote_hostname or ""
        name = hostname[len(VHOST_PREFIX):] if hostname.startswith(VHOST_PREFIX) else self.default_vhost
        vhost = self.broker.vhost(name)
        connection.open()
        if vhost is None:
            raise Amqp10Error(ErrorCondition.NOT_FOUND, f"no vhost '{name}'", Scope.CONNECTION)
        user = self.user
        assert user is not None
        if not may_access_vhost(user, name):
            raise Amqp10Error(ErrorCondition.UNAUTHORIZED_ACCESS,
                              f"access to vhost '{name}' refused for user '{user.name}'",
                              Scope.CONNECTION)
        self.vhost_name = name  # admitted with its vhost known (management's view)
        if self._registry is not None:
            try:
                self._admission = self._registry.admit(user.name, connection=self, vhost=name)
            except ConnectionLimitReached as exc:
                raise Amqp10Error(ErrorCondition.RESOURCE_LIMIT_EXCEEDED, exc.text,
                                  Scope.CONNECTION) from None
        self.vhost = vhost
        if hasattr(self.broker, "add_blocked_listener"):
            self.broker.add_blocked_listener(self)
        self.trail.authenticated(user.name, name, self._mechanism or None)

    def _on_connection_close(self, event: Event) -> None:
        condition = event.connection.remote_condition
        if condition is not None:
            self.trail.closing(CLOSED_BY_CLIENT, condition.name, str(condition.description or ""))
        else:
            self.trail.closing(CLOSED_BY_CLIENT, None, "close")
        self._teardown()
        event.connection.close()

    def _on_session_open(self, event: Event) -> None:
        event.session.open()

    def _on_session_close(self, event: Event) -> None:
        self._close_session_links(event.session)
        event.session.close()

    def _on_transport_error(self, event: Event) -> None:
        condition = event.transport.condition
        text = condition.name + ": " + str(condition.description) if condition else "?"
        self._log.debug("1.0 connection from %s failed: %s", self.peer_host, text)
        if self._eof:
            self.trail.closing(CLOSED_BY_PEER_LOST, None, "socket closed without close")
        else:
            self.trail.closing(CLOSED_BY_SERVER, condition.name if condition else None,
                               str(condition.description) if condition else "transport error")
        self._teardown()

    def _on_transport_closed(self, event: Event) -> None:
        self._teardown()

    def _on_tail_closed(self, event: Event) -> None:
        """Proton stops reading, without a word, on input it cannot decode; unless the
        peer closed properly (or hung up) that is a malformed frame."""
        connection = event.connection
        if self._eof or connection is None or connection.state & Connection.REMOTE_CLOSED:
            return
        if connection.state & Connection.LOCAL_CLOSED:
            return
        self._log.info("1.0 connection %s: malformed input from %s", self.owner, self.peer_host)
        raise Amqp10Error(ErrorCondition.DECODE_ERROR, "malformed frame", Scope.CONNECTION)

    def _on_link_open(self, event: Event) -> None:
        link = event.link
        if self._torn_down:
            return  # an attach behind a refused open: the close ends it
        if self.vhost is None:
            raise Amqp10Error(ErrorCondition.ILLEGAL_STATE, "no vhost", Scope.CONNECTION)
        if self.max_links and len(self._links) >= self.max_links:
            raise Amqp10Error(ErrorCondition.RESOURCE_LIMIT_EXCEEDED,
                              f"link limit ({self.max_links}) per connection reached")
        check_attach(link)
        self._links.add(link, attach_link(self, link))

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
    def _fail(self, event: Event, error: Amqp10Error) -> None:
        condition = Condition(error.condition.value, error.description)
        if error.scope is Scope.LINK and event.link is not None:
            link = event.link
            self._log.info("1.0 link %s on %s refused/detached: %s", link_name(link), self.owner, error)
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
            self._log.debug("1.0 connection %s closed: %s", self.owner, error)
            self.trail.closing(CLOSED_BY_SERVER, error.condition.value, error.description)
            self._close_connection(error.condition, error.description)

    def _close_connection(self, condition: ErrorCondition, description: str) -> None:
        connection = self._proton.connection if self._proton is not None else None
        if connection is None or connection.state & Connection.LOCAL_CLOSED:
            return  # the first error is the one the peer is told
        self._teardown()
        connection.condition = Condition(condition.value, description)
        if not connection.state & Connection.LOCAL_ACTIVE and not connection.state & Connection.LOCAL_CLOSED:
            connection.open()
        connection.close()


#: proton event type (number) -> what the engine does with it, for every event but the
#: per-message ones (``_handle_collected``); an event type missing here is proton's own
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
