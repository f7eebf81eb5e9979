"""``BackendNodes``: which node a new connection tries first, and each node's state."""
from __future__ import annotations

from gateway.backend.nodes import Backends, BackendNodes, NodeState
from gateway.backend.settings import BackendSettings


def _nodes() -> BackendNodes:
    return BackendNodes(BackendSettings("rabbit", nodes=("a:1", "b:2", "c:3"), credentials="passthrough"))


def test_live_nodes_first_in_config_order_then_the_down_ones() -> None:
    nodes = _nodes()
    a, b, c = nodes.order()
    assert [n.address for n in (a, b, c)] == ["a:1", "b:2", "c:3"]
    nodes.failed(a, "refused", 1.0)
    assert [n.address for n in nodes.order()] == ["b:2", "c:3", "a:1"]
    nodes.failed(b, "timed out", 2.0)
    nodes.failed(c, "reset", 3.0)
    assert [n.address for n in nodes.order()] == ["a:1", "b:2", "c:3"]   # all down: all tried
    assert nodes.state is NodeState.DOWN
    nodes.reached(b, 4.0)
    assert [n.address for n in nodes.order()] == ["b:2", "a:1", "c:3"]
    assert nodes.state is NodeState.UP


def test_status_counts_connections_and_keeps_the_last_error() -> None:
    nodes = _nodes()
    a, b, _ = nodes.order()
    nodes.failed(a, "cannot connect", 1.0)
    nodes.reached(b, 2.0)
    nodes.reached(b, 2.5)
    nodes.refused_login(b, "ACCESS_REFUSED", 3.0)
    nodes.released(b)
    status = nodes.status()
    assert (status["state"], status["connections"], status["refused"]) == ("up", 1, 1)
    assert status["last_error"] == "ACCESS_REFUSED"
    assert status["node_states"] == "a:1 down, b:2 up, c:3 unknown"
    assert [n["state"] for n in status["nodes"]] == ["down", "up", "unknown"]


def test_backends_by_vhost_and_passthrough() -> None:
    svc = BackendSettings("svc", nodes=("x",), user="u")
    backends = Backends((svc, _nodes().settings), {"orders": "svc"})
    assert backends.for_vhost("orders").name == "svc" and backends.for_vhost("/") is None
    assert not backends.passthrough
    assert Backends((svc, _nodes().settings), {"edge": "rabbit"}).passthrough
