"""Which backend node a new connection tries first, and each backend's state.

``BackendNodes`` (one per backend) keeps, per node, whether the last attempt reached it
(up), failed (down, with the error) or was never made (unknown), and how many proxied
connections use it now. ``order()`` is the failover rule: the nodes in config order, the
ones that are not down first, so a new client connection goes to the first live node and
one whose node failed goes on to the next; when every node is down they are all tried
anyway, in order (the cluster may be back). ``status()`` is what management shows
(``/metrics``, the HTTP API and ``ctl``), one row per node.

``BackendNode`` is one node with the backend's TLS settings, in the shape the edge's
outbound TLS code takes (the keys forwarding remotes have: one home for that code).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Optional

from gateway.backend.settings import BackendSettings

__all__ = ["BackendNode", "BackendNodes", "NodeState", "Backends"]


class NodeState(enum.Enum):
    UNKNOWN = "unknown"
    UP = "up"
    DOWN = "down"


@dataclass(frozen=True, slots=True)
class BackendNode:
    """One node of a backend, with the TLS settings the outbound endpoint reads."""

    backend: str
    host: str
    port: int
    tls: bool = False
    tls_ca_file: Optional[str] = None
    tls_cert_file: Optional[str] = None
    tls_key_file: Optional[str] = None
    tls_server_name: str = ""
    tls_verify: bool = True

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def container(self) -> str:
        """How the outbound TLS code names what it connects to in its log lines."""
        return f"backend {self.backend} node {self.address}"


class _NodeRecord:
    __slots__ = ("node", "state", "last_error", "changed_at", "connections")

    def __init__(self, node: BackendNode) -> None:
        self.node = node
        self.state = NodeState.UNKNOWN
        self.last_error = ""
        self.changed_at = 0.0
        self.connections = 0


class BackendNodes:
    """The nodes of one backend and their states (see the module docstring)."""

    def __init__(self, settings: BackendSettings) -> None:
        self.settings = settings
        self._records = [_NodeRecord(BackendNode(
            settings.name, host, port, settings.tls, settings.tls_ca_file, settings.tls_cert_file,
            settings.tls_key_file, settings.tls_server_name, settings.tls_verify))
            for host, port in settings.addresses()]
        #: connections refused by the backend (login or vhost) and lost while open
        self.refused = 0
        self.lost = 0

    @property
    def name(self) -> str:
        return self.settings.name

    def order(self) -> list[BackendNode]:
        """The nodes to try, in order: those not down first (config order), then the rest."""
        records = self._records
        live = [r.node for r in records if r.state is not NodeState.DOWN]
        return live + [r.node for r in records if r.state is NodeState.DOWN]

    def _record(self, node: BackendNode) -> _NodeRecord:
        for record in self._records:
            if record.node == node:
                return record
        raise KeyError(node.address)

    def reached(self, node: BackendNode, now: float) -> None:
        """A connection to ``node`` opened (the node is up); it counts until ``released``."""
        record = self._record(node)
        if record.state is not NodeState.UP:
            record.state, record.changed_at = NodeState.UP, now
        record.connections += 1

    def failed(self, node: BackendNode, error: str, now: float) -> None:
        """``node`` could not be reached or dropped a connection (not a refused login)."""
        record = self._record(node)
        if record.state is not NodeState.DOWN:
            record.state, record.changed_at = NodeState.DOWN, now
        record.last_error = error

    def refused_login(self, node: BackendNode, error: str, now: float) -> None:
        """The node answered but refused the login or the vhost: it is up."""
        record = self._record(node)
        if record.state is not NodeState.UP:
            record.state, record.changed_at = NodeState.UP, now
        record.last_error = error
        self.refused += 1

    def released(self, node: BackendNode) -> None:
        record = self._record(node)
        record.connections = max(0, record.connections - 1)

    @property
    def state(self) -> NodeState:
        """Up when any node is, down when every node tried is down, else unknown."""
        states = {r.state for r in self._records}
        if NodeState.UP in states:
            return NodeState.UP
        return NodeState.DOWN if states == {NodeState.DOWN} else NodeState.UNKNOWN

    def status(self) -> dict[str, Any]:
        """What management shows of this backend."""
        errors = [r for r in self._records if r.last_error]
        last = max(errors, key=lambda r: r.changed_at) if errors else None
        return {
            "name": self.name, "kind": self.settings.kind, "vhost": self.settings.vhost,
            "state": self.state.value, "last_error": last.last_error if last else "",
            "connections": sum(r.connections for r in self._records),
            "refused": self.refused, "lost": self.lost,
            "node_states": ", ".join(f"{r.node.address} {r.state.value}" for r in self._records),
            "nodes": [{"node": r.node.address, "state": r.state.value, "last_error": r.last_error,
                       "since": r.changed_at, "connections": r.connections} for r in self._records],
        }


class Backends:
    """Every configured backend and which vhost is proxied to which."""

    def __init__(self, backends: tuple[BackendSettings, ...], proxied: dict[str, str]) -> None:
        self.by_name = {b.name: BackendNodes(b) for b in backends}
        #: vhost -> backend name
        self.proxied = dict(proxied)

    def for_vhost(self, vhost: str) -> Optional[BackendNodes]:
        name = self.proxied.get(vhost)
        return self.by_name.get(name) if name is not None else None

    @property
    def passthrough(self) -> bool:
        """Some proxied vhost passes the client's credentials through."""
        return any(self.by_name[name].settings.passthrough for name in self.proxied.values()
                   if name in self.by_name)

    def status(self) -> list[dict[str, Any]]:
        return [nodes.status() for nodes in self.by_name.values()]
