"""What the channels of one 0-9-1 connection share: owner token, permissions, alarms.

One :class:`ConnectionScope` exists per connection that opened at least one channel. It

* is the *owner token* of the connection's exclusive queues (the ``ServerConnection``
  object itself: unique while the connection lives, compared by identity);
* caches permission checks (``gateway.auth.permissions``), which are regex matches;
* registers with the broker's memory gate as a ``BlockListener`` and turns alarms into
  connection.blocked / connection.unblocked;
* on connection close (``ServerConnection.add_close_callback``) deletes the exclusive
  queues and unregisters the listener, so nothing outlives the connection.
"""
from __future__ import annotations

import logging
from typing import Any

from gateway.amqp091.error_map import access_refused
from gateway.amqp091.handlers import ConnectionContext
from gateway.amqp091.methods import Method
from gateway.auth.permissions import Action, PermissionCache

__all__ = ["ConnectionScope", "scope_for"]

log = logging.getLogger(__name__)

class ConnectionScope:
    """See the module docstring. Create through :func:`scope_for`."""

    __slots__ = ("context", "broker", "owner", "vhost", "_permissions", "_listening", "_registry")

    def __init__(self, context: ConnectionContext, broker: Any,
                 registry: dict[int, "ConnectionScope"] | None = None) -> None:
        self.context = context
        self._registry = registry
        self.broker = broker
        self.owner = context.connection
        self.vhost = context.vhost
        self._permissions = PermissionCache()
        self._listening = False
        if broker is not None and hasattr(broker, "add_blocked_listener"):
            broker.add_blocked_listener(self)
            self._listening = True

    # -- permissions ----------------------------------------------------------------------
    def check(self, action: Action, resource: str) -> str | None:
        """None if the user may do ``action`` on ``resource``, else RabbitMQ's refusal text
        (the caller raises 403). Users without a permission table (tests) may do all."""
        return self._permissions.refusal(self.context.user, self.context.vhost_name, action,
                                         resource)

    def require(self, action: Action, resource: str, method: Method) -> None:
        """Raise 403 ACCESS_REFUSED (on ``method``) unless the user may do ``action`` on
        ``resource``: the one check every channel method makes."""
        refusal = self.check(action, resource)
        if refusal is not None:
            raise access_refused(refusal, method)

    # -- BlockListener ------------------------------------------------------------------
    def blocked(self, reason: str) -> None:
        self.context.block_publishers(reason)

    def unblocked(self) -> None:
        self.context.unblock_publishers()

    # -- end ----------------------------------------------------------------------------
    def connection_closed(self) -> None:
        """Drop exclusive queues and the alarm listener (the connection is CLOSED)."""
        if self._registry is not None:
            self._registry.pop(id(self.owner), None)
        if self._listening:
            self._listening = False
            self.broker.remove_blocked_listener(self)
        owner_closed = getattr(self.vhost, "owner_closed", None)
        if owner_closed is not None:
            names = owner_closed(self.owner)
            if names:
                log.debug("deleted exclusive queues %s of a closed connection", names)


def scope_for(context: ConnectionContext, broker: Any, registry: dict[int, ConnectionScope]) -> ConnectionScope:
    """The scope of ``context``'s connection from ``registry`` (open scopes by
    ``id(connection)``, owned by one channel factory), created and hooked to the
    connection's close on first use; the close callback removes it again."""
    conn = context.connection
    scope = registry.get(id(conn))
    if scope is None or scope.owner is not conn:
        scope = registry[id(conn)] = ConnectionScope(context, broker, registry)
        conn.add_close_callback(scope.connection_closed)
    return scope
