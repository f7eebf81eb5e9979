"""``listener_endpoint``: the listener's backlog reaches ``listenTCP``, and a backlog the
kernel will cap is said at start (Twisted's ``MemoryReactor`` records what was bound)."""
from __future__ import annotations

import logging

from twisted.internet.protocol import Factory
from twisted.internet.testing import MemoryReactor

from gateway.config import ListenerConfig
from gateway.edge import listener as listener_module
from gateway.edge.listener import listener_endpoint


def _bind(listener: ListenerConfig) -> tuple:
    reactor = MemoryReactor()
    listener_endpoint(reactor, listener).listen(Factory())
    [(port, _factory, backlog, interface)] = reactor.tcpServers
    return port, backlog, interface


def test_the_backlog_reaches_listen(tmp_path, monkeypatch, caplog):
    cap = tmp_path / "somaxconn"
    cap.write_text("4096\n")
    monkeypatch.setattr(listener_module, "SOMAXCONN_PATH", str(cap))
    with caplog.at_level(logging.WARNING):
        assert _bind(ListenerConfig(host="127.0.0.1", port=5672)) == (5672, 4096, "127.0.0.1")
        assert _bind(ListenerConfig(host="::1", port=0, backlog=77)) == (0, 77, "::1")
    assert not caplog.records


def test_a_backlog_above_somaxconn_is_bound_and_the_cap_named(tmp_path, monkeypatch, caplog):
    cap = tmp_path / "somaxconn"
    cap.write_text("128\n")
    monkeypatch.setattr(listener_module, "SOMAXCONN_PATH", str(cap))
    with caplog.at_level(logging.WARNING):
        assert _bind(ListenerConfig(port=5672, backlog=1024))[1] == 1024
    [record] = caplog.records
    assert "backlog 1024" in record.getMessage() and "net.core.somaxconn = 128" in record.getMessage()


def test_an_unreadable_somaxconn_says_nothing(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(listener_module, "SOMAXCONN_PATH", str(tmp_path / "absent"))
    with caplog.at_level(logging.WARNING):
        assert _bind(ListenerConfig(port=5672, backlog=100000))[1] == 100000
    assert not caplog.records
