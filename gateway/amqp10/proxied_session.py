"""A 1.0 connection's side of its backend connection (edge mode), whatever carries its
links: the connector's events and the client's end, shared by ``backend_links``
(``BackendSession``: an amqp091 backend) and ``carried_links`` (``CarriedSession``: an
amqp10 backend).

The client's ``open`` waits for the backend: ``opened`` answers it, ``failed`` closes the
connection with ``amqp:unauthorized-access`` (the backend refused the login or vhost) or
``amqp:connection:forced`` (no node reached), and ``lost`` (an open backend connection
went) with ``amqp:connection:forced`` "backend NAME lost: ...". The backend's events name a
link by its ``key``; ``to_link`` passes them on and has the client's output written.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Optional

from gateway.amqp10.conditions import ErrorCondition
from gateway.backend.contract import BackendFailure, FailureKind, lost_text
from gateway.backend.nodes import BackendNode, BackendNodes

__all__ = ["ProxiedSession", "link_keys"]

#: the keys links are known by on their backend connection (unique in the process)
link_keys = itertools.count(1)

_REFUSALS = {FailureKind.LOGIN_REFUSED: ErrorCondition.UNAUTHORIZED_ACCESS,
             FailureKind.ACCESS_REFUSED: ErrorCondition.UNAUTHORIZED_ACCESS,
             FailureKind.UNREACHABLE: ErrorCondition.CONNECTION_FORCED,
             FailureKind.LOST: ErrorCondition.CONNECTION_FORCED}


class ProxiedSession:
    """See the module docstring. ``connect(backend, events)`` asks the proxy for the
    backend connection (``VhostProxy.connect_bridge`` or ``connect_links``)."""

    def __init__(self, engine: Any, backend: BackendNodes, connect: Callable[[Any], Any]) -> None:
        self.engine = engine
        self.backend = backend
        self.settings = backend.settings
        self.name = backend.name
        #: the backend connection's engine, once it opened
        self.bridge: Any = None
        #: the node the backend connection opened on (management shows it)
        self.node: Optional[BackendNode] = None
        self.links: dict[int, Any] = {}
        self.handle: Any = None
        self.handle = connect(self)

    def close(self) -> None:
        """The client's connection went: the backend connection goes too."""
        for handler in list(self.links.values()):
            handler.closed = True
        self.links.clear()
        if self.handle is not None:
            self.handle.close("the client's connection closed")

    # ---- the connector's events ----------------------------------------------------------
    def opened(self, bridge: Any, node: BackendNode) -> None:
        self.bridge, self.node = bridge, node
        self.engine.resume_after_backend()

    def failed(self, failure: BackendFailure) -> None:
        self.engine.close_for_backend(_REFUSALS[failure.kind], failure.text)

    def lost(self, error: str) -> None:
        self.engine.close_for_backend(ErrorCondition.CONNECTION_FORCED, lost_text(self.name, error))

    # ---- the backend's events, to their link ------------------------------------------------
    def to_link(self, key: int, event: str, *args: Any) -> None:
        """Call ``event`` of the link ``key`` names (if it is still there), then have the
        client's output written."""
        handler = self.links.get(key)
        if handler is not None:
            getattr(handler, event)(*args)
            self.engine.output_ready()

    def end_link(self, key: int, event: str, *args: Any) -> None:
        """``to_link`` for the backend's end of a link: the link is forgotten here and by
        the engine once ``event`` told it."""
        handler = self.links.pop(key, None)
        if handler is not None:
            getattr(handler, event)(*args)
            self.engine.link_gone(handler)
            self.engine.output_ready()
