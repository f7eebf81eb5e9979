"""ManagementModel: what every face of management reads and changes, over the broker.

Sans-I/O: the service gives it the broker, the connection registry (the engines admitted
there offer ``view()`` and ``shutdown(reason)``), the authenticator's users and, once
forwarding exists, its remotes; ``clock`` gives ``now`` for the broker calls that take
one. Reads return plain dicts with RabbitMQ's management field names (``views``); an
optional ``user`` limits them to what that user may see (``access``). Writes take the
acting user, check management access and the protocols' permissions, go through the
same broker calls as the protocols (durable entities reach the store that way) and
raise :mod:`gateway.management.errors`.
"""
from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any, Callable, Mapping, Optional

from gateway.auth import User
from gateway.broker import Binding, Broker, DeathReason, DestinationKind, Queue, VirtualHost
from gateway.broker.connection_views import ConnectionView
from gateway.broker.vhost_publish import take_ready
from gateway.broker.subscriptions import list_subscriptions
from gateway.product import PRODUCT, __version__

from .access import (Action, may_see_all, may_see_vhost, require_administrator, require_management,
                     require_permission, require_vhost)
from .errors import BadRequest, Conflict, EntityNotFound
from .errors import translated as _translated
from .views import (binding_dict, channel_dict, connection_dict, consumer_dict, default_binding_dict,
                    exchange_dict, link_dict, queue_dict, user_dict, vhost_dict)

__all__ = ["ManagementModel", "DESTINATION_TYPES"]

log = logging.getLogger(__name__)

#: ``destination_type`` values of a binding
DESTINATION_TYPES = {kind.value: kind for kind in DestinationKind}




class ManagementModel:
    """See the module docstring. ``connections`` needs ``connections()`` (the
    ``ConnectionRegistry``); ``authenticator`` a ``users`` directory; ``forwarding``
    (optional) ``remotes()`` and ``shovels()`` returning dicts or objects with
    ``describe()``. ``require_tags`` False drops the management-tag check of writes
    (RabbitMQ 4's ``/management`` node asks for the resource permissions alone)."""

    def __init__(self, broker: Broker, connections: Any, authenticator: Any = None,
                 forwarding: Any = None, *, clock: Callable[[], float] = time.time,
                 require_tags: bool = True, backends: Any = None) -> None:
        self.require_tags = require_tags
        #: edge mode: the backends (``status()``: a dict per backend), or None
        self.backends_source = backends
        self.broker = broker
        self.connection_registry = connections
        self.authenticator = authenticator
        self.forwarding = forwarding
        self.clock = clock

    @property
    def node(self) -> str:
        """The node name reported in ``node`` fields: our container id."""
        return self.broker.container_id

    # ------------------------------------------------------------------ lookups
    def _vhost(self, name: str) -> VirtualHost:
        vhost = self.broker.vhost(name)
        if vhost is None:
            raise EntityNotFound(f"no vhost '{name}'")
        return vhost

    def _queue(self, vhost: VirtualHost, name: str) -> Queue:
        queue = vhost.queue(name)
        if queue is None:
            raise EntityNotFound(f"no queue '{name}' in vhost '{vhost.name}'")
        return queue

    def _vhosts(self, vhost: Optional[str], user: Optional[User]) -> list[VirtualHost]:
        if vhost is not None:
            found = self._vhost(vhost)
            return [found] if may_see_vhost(user, vhost) else []
        return [v for name, v in sorted(self.broker.vhosts.items()) if may_see_vhost(user, name)]

    def _views(self, user: Optional[User] = None) -> list[ConnectionView]:
        out = []
        for conn in self.connection_registry.connections():
            try:
                view = conn.view()
            except Exception:  # noqa: BLE001 - one odd connection must not hide the rest
                log.exception("could not read connection %r for management", conn)
                continue
            if may_see_all(user) or (user is not None and view.user == user.name):
                out.append(view)
        return out

    # ------------------------------------------------------------------ reads
    def overview(self, user: Optional[User] = None) -> dict[str, Any]:
        vhosts = self._vhosts(None, user)
        queues = [q for v in vhosts for q in v.queues.values()]
        views = self._views(user)
        ready = sum(q.message_count for q in queues)
        unacked = sum(q.acquired_count for q in queues)
        return {
            "product_name": PRODUCT,
            "product_version": __version__,
            "management_version": __version__,
            "node": self.node,
            "cluster_name": self.node,
            "queue_totals": {"messages": ready + unacked, "messages_ready": ready,
                             "messages_unacknowledged": unacked},
            "object_totals": {
                "connections": len(views),
                "channels": sum(len(v.channels) for v in views),
                "exchanges": sum(len(v.exchanges) for v in vhosts),
                "queues": len(queues),
                "consumers": sum(q.consumer_count for q in queues),
            },
            "message_stats": _message_stats(vhosts),
            # what the memory high watermark counts; the HTTP API adds the process's RSS
            # as ``memory_used``
            "queued_bytes": self.broker.memory_used,
            "memory_alarm": self.broker.blocked,
        }

    def message_totals(self) -> dict[str, int]:
        """The node's message counters (every vhost), for the dashboard's rate history:
        ``published``, ``delivered``, ``acked`` and ``forwarded`` (sent to remotes). Read
        on a timer, never per message."""
        stats = _message_stats(self._vhosts(None, None))
        return {"published": stats["publish"], "delivered": stats["deliver_get"], "acked": stats["ack"],
                "forwarded": sum(int(r.get("forwarded") or 0) for r in self.remotes())}

    def vhosts(self, user: Optional[User] = None) -> list[dict[str, Any]]:
        return [vhost_dict(v, self.node) for v in self._vhosts(None, user)]

    def queues(self, vhost: Optional[str] = None, user: Optional[User] = None) -> list[dict[str, Any]]:
        now = self.clock()
        return [queue_dict(q, self.node, now) for v in self._vhosts(vhost, user)
                for _, q in sorted(v.queues.items())]

    def subscriptions(self, vhost: Optional[str] = None, user: Optional[User] = None) -> list[dict[str, Any]]:
        """The durable subscriptions of 1.0 receivers (``broker.subscriptions``)."""
        return [dataclasses.asdict(s) for v in self._vhosts(vhost, user) for s in list_subscriptions(v)]

    def queue(self, vhost: str, name: str, user: Optional[User] = None) -> dict[str, Any]:
        v = self._visible_vhost(vhost, user)
        return queue_dict(self._queue(v, name), self.node, self.clock())

    def _visible_vhost(self, vhost: str, user: Optional[User]) -> VirtualHost:
        found = self._vhost(vhost)
        if not may_see_vhost(user, vhost):
            require_vhost(user, vhost)  # type: ignore[arg-type]  # raises Forbidden
        return found

    def exchanges(self, vhost: Optional[str] = None, user: Optional[User] = None) -> list[dict[str, Any]]:
        return [exchange_dict(x, v.name) for v in self._vhosts(vhost, user)
                for _, x in sorted(v.exchanges.items())]

    def exchange(self, vhost: str, name: str, user: Optional[User] = None) -> dict[str, Any]:
        v = self._visible_vhost(vhost, user)
        found = v.exchange(name)
        if found is None:
            raise EntityNotFound(f"no exchange '{name}' in vhost '{vhost}'")
        return exchange_dict(found, vhost)

    def bindings(self, vhost: Optional[str] = None, user: Optional[User] = None) -> list[dict[str, Any]]:
        """Every binding, the implicit default-exchange ones first (as RabbitMQ lists)."""
        out: list[dict[str, Any]] = []
        for v in self._vhosts(vhost, user):
            out += [default_binding_dict(q) for _, q in sorted(v.queues.items())]
            explicit = [binding_dict(b, v.name) for b in v.bindings()]
            explicit.sort(key=lambda b: (b["source"], b["destination_type"], b["destination"],
                                         b["properties_key"]))
            out += explicit
        return out

    def connections(self, user: Optional[User] = None) -> list[dict[str, Any]]:
        return [connection_dict(v, self.node) for v in self._views(user)]

    def connection(self, name: str, user: Optional[User] = None) -> dict[str, Any]:
        for view in self._views(user):
            if view.name == name:
                return connection_dict(view, self.node)
        raise EntityNotFound(f"no connection '{name}'")

    def channels(self, user: Optional[User] = None) -> list[dict[str, Any]]:
        return [channel_dict(v, ch, self.node) for v in self._views(user) for ch in v.channels]

    def links(self, user: Optional[User] = None) -> list[dict[str, Any]]:
        return [link_dict(v, link) for v in self._views(user) for link in v.links]

    def consumers(self, user: Optional[User] = None) -> list[dict[str, Any]]:
        return [consumer_dict(v, link) for v in self._views(user) for link in v.links
                if link.queue is not None and link.role == "sender"]

    def users(self, user: Optional[User] = None) -> list[dict[str, Any]]:
        """Configured users (without hashes); a user who is not administrator sees only
        itself."""
        directory = getattr(self.authenticator, "users", None)
        if directory is None:
            return []
        found = [directory.get(name) for name in directory.names()]
        return [user_dict(u) for u in found
                if u is not None and (user is None or may_see_all(user) or u.name == user.name)]

    def whoami(self, user: User) -> dict[str, Any]:
        return {"name": user.name, "tags": list(user.tags)}

    def remotes(self) -> list[dict[str, Any]]:
        """The forwarding remotes (empty without forwarding)."""
        return self._forwarding_list("remotes")

    def shovels(self) -> list[dict[str, Any]]:
        return self._forwarding_list("shovels")

    def backends(self) -> list[dict[str, Any]]:
        """Edge mode's backends: state, last error, connections and each node's state
        (empty without proxied vhosts)."""
        source = self.backends_source
        return [] if source is None else list(source.status())

    def _forwarding_list(self, what: str) -> list[dict[str, Any]]:
        accessor = getattr(self.forwarding, what, None)
        if accessor is None:
            return []
        return [dict(item) if isinstance(item, Mapping) else item.describe() for item in accessor()]

    # ------------------------------------------------------------------ writes
    def _writable_vhost(self, user: User, vhost: str) -> VirtualHost:
        if self.require_tags:
            require_management(user)
        found = self._vhost(vhost)
        require_vhost(user, vhost)
        return found

    def declare_queue(self, user: User, vhost: str, name: str, durable: bool = True,
                      auto_delete: bool = False, arguments: Optional[Mapping[str, Any]] = None,
                      *, exclusive: bool = False, owner: Any = None) -> tuple[dict[str, Any], bool]:
        """Declare a queue; returns its dict and whether it was created (False: an
        equivalent one existed). Conflict for an inequivalent one. ``exclusive`` needs
        the declaring connection's ``owner`` token."""
        v = self._writable_vhost(user, vhost)
        if not name:
            raise BadRequest("a queue declared through management needs a name")
        if exclusive and owner is None:
            raise BadRequest("an exclusive queue belongs to a connection; management cannot declare one")
        require_permission(user, vhost, Action.CONFIGURE, name)
        existed = name in v.queues
        with _translated:
            queue = v.declare_queue(name, durable=durable, auto_delete=auto_delete, exclusive=exclusive,
                                    owner=owner if exclusive else None,
                                    arguments=dict(arguments or {}), now=self.clock())
        return queue_dict(queue, self.node), not existed

    def delete_queue(self, user: User, vhost: str, name: str, if_unused: bool = False,
                     if_empty: bool = False, *, owner: Any = None) -> int:
        """Delete a queue; returns the ready messages it held. EntityNotFound if missing;
        Conflict for another connection's exclusive queue (``owner``: the caller's)."""
        v = self._writable_vhost(user, vhost)
        require_permission(user, vhost, Action.CONFIGURE, name)
        queue = self._queue(v, name)
        if queue.exclusive and queue.exclusive_owner != owner:
            raise Conflict(f"{queue.label} is exclusive to a connection; close that connection")
        with _translated:
            return v.delete_queue(name, if_unused=if_unused, if_empty=if_empty, owner=queue.exclusive_owner,
                                  now=self.clock())

    def purge_queue(self, user: User, vhost: str, name: str) -> int:
        """Drop a queue's ready messages; returns how many."""
        v = self._writable_vhost(user, vhost)
        require_permission(user, vhost, Action.READ, name)
        queue = self._queue(v, name)
        with _translated:
            return v.purge_queue(name, owner=queue.exclusive_owner, now=self.clock())

    def declare_exchange(self, user: User, vhost: str, name: str, type: str, durable: bool = True,
                         auto_delete: bool = False, internal: bool = False,
                         arguments: Optional[Mapping[str, Any]] = None) -> tuple[dict[str, Any], bool]:
        """Declare an exchange; returns its dict and whether it was created."""
        v = self._writable_vhost(user, vhost)
        if not name:
            raise BadRequest("the default exchange cannot be declared")
        require_permission(user, vhost, Action.CONFIGURE, name)
        existed = name in v.exchanges
        with _translated:
            exchange = v.declare_exchange(name, type, durable=durable, auto_delete=auto_delete,
                                          internal=internal, arguments=dict(arguments or {}))
        return exchange_dict(exchange, vhost), not existed

    def delete_exchange(self, user: User, vhost: str, name: str, if_unused: bool = False) -> None:
        v = self._writable_vhost(user, vhost)
        require_permission(user, vhost, Action.CONFIGURE, name)
        if v.exchange(name) is None:
            raise EntityNotFound(f"no exchange '{name}' in vhost '{vhost}'")
        with _translated:
            v.delete_exchange(name, if_unused=if_unused)

    def _binding_args(self, user: User, vhost: str, source: str, destination: str,
                      destination_type: str) -> tuple[VirtualHost, DestinationKind]:
        v = self._writable_vhost(user, vhost)
        kind = DESTINATION_TYPES.get(destination_type)
        if kind is None:
            raise BadRequest(f"destination_type must be 'queue' or 'exchange', not {destination_type!r}")
        require_permission(user, vhost, Action.WRITE, destination)
        require_permission(user, vhost, Action.READ, source)
        return v, kind

    def bind(self, user: User, vhost: str, source: str, destination: str, destination_type: str,
             routing_key: str = "", arguments: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
        """Bind; returns the binding's dict (binding twice is not an error)."""
        v, kind = self._binding_args(user, vhost, source, destination, destination_type)
        owner = self._owner(v, kind, destination)
        with _translated:
            v.bind(kind, destination, source, routing_key, dict(arguments or {}), owner=owner)
        return self._binding_of(v, source, kind, destination, routing_key, arguments)

    def unbind(self, user: User, vhost: str, source: str, destination: str, destination_type: str,
               routing_key: str = "", arguments: Optional[Mapping[str, Any]] = None) -> None:
        """Remove a binding; EntityNotFound when there is none."""
        v, kind = self._binding_args(user, vhost, source, destination, destination_type)
        owner = self._owner(v, kind, destination)
        with _translated:
            removed = v.unbind(kind, destination, source, routing_key, dict(arguments or {}), owner=owner)
        if not removed:
            raise EntityNotFound(f"no binding from exchange '{source}' to {kind.value} '{destination}' "
                                 f"with routing key '{routing_key}' in vhost '{vhost}'")

    @staticmethod
    def _owner(v: VirtualHost, kind: DestinationKind, destination: str) -> Any:
        """An operator acts for the owner of an exclusive queue."""
        queue = v.queue(destination) if kind is DestinationKind.QUEUE else None
        return queue.exclusive_owner if queue is not None else None

    def _binding_of(self, v: VirtualHost, source: str, kind: DestinationKind, destination: str,
                    routing_key: str, arguments: Optional[Mapping[str, Any]]) -> dict[str, Any]:
        binding = Binding.create(source, kind, destination, routing_key, dict(arguments or {}))
        return binding_dict(binding, v.name)

    def close_connection(self, user: User, name: str, reason: str = "") -> None:
        """Close a connection as ``connection.close`` 320 / ``amqp:connection:forced``
        with ``reason``; a user who is not administrator may close only its own."""
        require_management(user)
        for conn in self.connection_registry.connections():
            view = conn.view()
            if view.name != name:
                continue
            if view.user != user.name:
                require_administrator(user, "closing another user's connection")
            text = reason or f"closed by operator '{user.name}' through management"
            log.info("management: user '%s' closes connection %s: %s", user.name, name, text)
            _close(conn, text)
            return
        raise EntityNotFound(f"no connection '{name}'")

    def close_connections_of(self, *, user: Optional[str] = None, vhost: Optional[str] = None,
                             reason: str) -> int:
        """Close every connection of ``user`` (or to ``vhost``), as RabbitMQ does when
        either is deleted; returns how many."""
        closed = 0
        for conn in self.connection_registry.connections():
            view = conn.view()
            if (user is not None and view.user == user) or (vhost is not None and view.vhost == vhost):
                log.info("management: closing connection %s: %s", view.name, reason)
                _close(conn, reason)
                closed += 1
        return closed

    def move_messages(self, user: User, vhost: str, queue: str, to_queue: str,
                      count: Optional[int] = None) -> int:
        """Move up to ``count`` (default all) ready messages from the head of ``queue``
        to the tail of ``to_queue`` in the same vhost (poison-message handling); returns
        how many moved. Needs read on ``queue`` and write on ``to_queue``."""
        v = self._writable_vhost(user, vhost)
        require_permission(user, vhost, Action.READ, queue)
        require_permission(user, vhost, Action.WRITE, to_queue)
        source, target = self._queue(v, queue), self._queue(v, to_queue)
        if source is target:
            raise BadRequest(f"cannot move messages of queue '{queue}' onto itself")
        _check_count(count)
        return v.move_messages(source.name, target.name, count, self.clock())

    def dead_letter_messages(self, user: User, vhost: str, queue: str, count: Optional[int] = None) -> int:
        """Dead-letter up to ``count`` (default all) ready messages from the head of
        ``queue`` to its dead-letter exchange (reason ``rejected``, as a consumer's
        reject would); returns how many. Conflict when the queue has none."""
        v = self._writable_vhost(user, vhost)
        require_permission(user, vhost, Action.READ, queue)
        source = self._queue(v, queue)
        if source.args.dead_letter_exchange is None:
            raise Conflict(f"{source.label} has no dead-letter exchange (x-dead-letter-exchange)")
        _check_count(count)
        now = self.clock()
        done = 0
        for message in take_ready(source, count, now):
            source.dead_letter(message, DeathReason.REJECTED, now)
            done += 1
        return done


def _close(conn: Any, reason: str) -> None:
    conn.shutdown(reason)
    conn.output_ready()


def _check_count(count: Optional[int]) -> None:
    if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 0):
        raise BadRequest(f"count must be a non-negative integer, not {count!r}")


def _message_stats(vhosts: list) -> dict[str, int]:
    """RabbitMQ's ``message_stats`` counters over ``vhosts`` (lifetime counts)."""
    queues = [q for v in vhosts for q in v.queues.values()]
    return {"publish": sum(x.published_in for v in vhosts for x in v.exchanges.values()),
            "deliver_get": sum(q.entries.delivered for q in queues),
            "ack": sum(q.entries.acked for q in queues)}
