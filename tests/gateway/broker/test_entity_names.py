"""The name rules of new queues and exchanges (issue 41, items 3 and 8)."""
from __future__ import annotations

import pytest

from addressing import split_global
from gateway.broker import Broker
from gateway.broker.entity_names import MAX_NAME_BYTES, GlobalNames, check_new_name
from gateway.broker.errors import InvalidArgument
from tests.gateway.broker.conftest import make_message


def _names(*forwarded: str) -> GlobalNames:
    return GlobalNames("us", lambda name: split_global(name)[1] in forwarded)


def test_a_global_address_is_ours_or_forwarded():
    names = _names("org-b")
    assert names.resolve("orders@us") == ("orders", "us", True)
    assert names.resolve("orders@org-b") == ("orders", "org-b", False)
    assert names.resolve("alice@example.com") is None


@pytest.mark.parametrize("name,words", [
    ("orders@org-b", "is the global address of node 'orders' in container 'org-b', which this "
                     "gateway forwards to"),
    ("orders@us", "in this gateway's own container 'us'"),
    ("x" * (MAX_NAME_BYTES + 1), "256 bytes long; at most 255"),
    ("é" * 128, "256 bytes long"),
    ("nul\0inside", "contains NUL"),
])
def test_a_new_name_breaking_a_rule_is_refused_naming_it(name, words):
    with pytest.raises(InvalidArgument) as info:
        check_new_name("queue", name, _names("org-b"))
    assert words in info.value.text


def test_other_names_pass():
    for name in ("alice@example.com", "x" * MAX_NAME_BYTES, "é" * 127, "orders"):
        check_new_name("queue", name, _names("org-b"))


def test_the_vhost_applies_the_rules_to_declarations_but_not_to_restored_entities():
    broker = Broker(container_id="us")
    broker.register_service_resolver(lambda name: object() if name.endswith("@org-b") else None)
    vhost = broker.vhost("/")
    with pytest.raises(InvalidArgument):
        vhost.declare_queue("orders@org-b")
    with pytest.raises(InvalidArgument):
        vhost.declare_exchange("orders@org-b", "direct")
    restored = vhost.declare_queue("orders@org-b", durable=True, restored=True)
    local = vhost.declare_queue("orders")
    route = vhost.default_exchange.route
    assert list(route(make_message(routing_key="orders@org-b"))) == []  # the forwarder's
    assert list(route(make_message(routing_key="orders@us"))) == [local]
    assert restored is vhost.queue("orders@org-b")
