"""Runtime parameters in RabbitMQ's shapes on a real gateway: its vhost limits and its
shovels (static routes of ``forwarding.shovels``, shown as RabbitMQ shows a dynamic
shovel, changed only in the config); and the per-user and per-vhost permission lists."""
from __future__ import annotations

import pytest

from tests.support.gateway_process import default_config, free_port, make_gateway
from tests.support.management_http import MANAGEMENT_USERS, call

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def gw():
    port = free_port()   # a remote that is down: the shovel holds its queue's messages
    extra = ("forwarding:\n  remotes:\n"
             f"    - container: partner\n      host: 127.0.0.1\n      port: {port}\n"
             "      kind: amqp10\n      address: /queues/{node}\n"
             "  shovels:\n    - name: orders-out\n      queue: outbound.orders\n"
             "      remote: partner\n      node: orders\n")
    gateway = make_gateway(config_text=default_config(users=MANAGEMENT_USERS, extra=extra),
                             extra_args=("--management", "127.0.0.1:0")).start()
    gateway.remote_port = port  # type: ignore[attr-defined]
    yield gateway
    gateway.stop()


def test_shovels_show_as_rabbitmq_shovel_parameters(gw):
    expected = {"value": {"src-protocol": "amqp091", "src-uri": "amqp://", "src-queue": "outbound.orders",
                          "dest-protocol": "amqp10", "dest-uri": f"amqp://127.0.0.1:{gw.remote_port}",
                          "dest-address": "orders@partner", "ack-mode": "on-confirm",
                          "src-delete-after": "never"},
                "vhost": "/", "component": "shovel", "name": "orders-out"}
    assert call(gw, "GET", "/api/parameters/shovel").body == [expected]
    assert call(gw, "GET", "/api/parameters/shovel/%2F").body == [expected]
    assert call(gw, "GET", "/api/parameters/shovel/%2F/orders-out").body == expected
    assert call(gw, "GET", "/api/parameters/shovel/%2F/nope").status == 404
    refused = call(gw, "PUT", "/api/parameters/shovel/%2F/new", {"value": {}})
    assert refused.status == 405 and "forwarding.shovels" in refused.body["reason"]
    assert call(gw, "DELETE", "/api/parameters/shovel/%2F/orders-out").status == 405
    federation = call(gw, "GET", "/api/parameters/federation-upstream")
    assert federation.status == 404 and "shovel" in federation.body["reason"]


def test_vhost_limits_show_among_the_parameters(gw):
    call(gw, "PUT", "/api/vhost-limits/%2F/max-connections", {"value": 50})
    try:
        limits = {"value": {"max-connections": 50}, "vhost": "/", "component": "vhost-limits",
                  "name": "limits"}
        assert limits in call(gw, "GET", "/api/parameters").body
        assert call(gw, "GET", "/api/parameters/vhost-limits").body == [limits]
        assert call(gw, "GET", "/api/vhost-limits").body == [{"vhost": "/", "value": {"max-connections": 50}}]
    finally:
        call(gw, "DELETE", "/api/vhost-limits/%2F/max-connections")
    assert call(gw, "GET", "/api/vhost-limits").body == []
    # parameters are the policymakers' (and administrators')
    assert call(gw, "GET", "/api/parameters", user="watcher").status == 403


def test_permission_lists_per_user_and_per_vhost(gw):
    [mine] = call(gw, "GET", "/api/users/watcher/permissions").body
    assert mine == {"user": "watcher", "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"}
    on_root = call(gw, "GET", "/api/vhosts/%2F/permissions?columns=user").body
    assert sorted(p["user"] for p in on_root) == sorted(MANAGEMENT_USERS)
    assert call(gw, "GET", "/api/users/nobody/permissions").status == 404
    call(gw, "PUT", "/api/policies/%2F/one", {"pattern": "^x", "definition": {"expires": 1000}})
    try:
        assert [p["name"] for p in call(gw, "GET", "/api/policies/%2F").body] == ["one"]
        assert call(gw, "GET", "/api/policies/%2F", user="watcher").status == 403
    finally:
        call(gw, "DELETE", "/api/policies/%2F/one")
