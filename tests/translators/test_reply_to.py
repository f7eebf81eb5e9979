from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from translators import reply_to_amqp10, reply_to_amqp091


@pytest.mark.parametrize(
    "address, queue",
    [
        ("/queue/rpc", "rpc"),
        ("/amq/queue/rpc", "rpc"),
        ("/queues/a%2Fb", "a/b"),
        ("amq.gen-123", "amq.gen-123"),  # a dynamic node address is already a routing key
        ("node@container", "node@container"),
        ("/exchange/x/rk", "/exchange/x/rk"),
        ("/topic/rk", "/topic/rk"),
        ("/queue", "/queue"),
        ("/queue/", "/queue/"),  # no queue name: no queue
        ("/queues/", "/queues/"),
        ("/queues/%zz", "/queues/%zz"),  # not percent-encoding: no queue
        ("/queue/" + "x" * 300, "x" * 300),  # no length limit on reply-to
        ("plain", "plain"),
        ("", ""),
    ],
)
def test_amqp10_address_to_queue(address, queue):
    assert reply_to_amqp091(address) == queue


@pytest.mark.parametrize("queue, address", [
    ("rpc", "/queue/rpc"),
    ("amq.gen-XyZ", "/queue/amq.gen-XyZ"),
    ("/queue/replies", "/queue/replies"),
    ("/exchange/x/rk", "/exchange/x/rk"),
    # a global address stays one: an answer goes to that container (forwarded, or found
    # here when it is ours), not to a local queue named "replies@gw-2"
    ("replies@gw-2", "replies@gw-2"),
    # split at the last '@' (issue 33): node "a@b" in container "c", a global address too
    ("a@b@c", "a@b@c"),
    ("", ""),  # no reply-to
])
def test_queue_to_amqp10_address(queue, address):
    assert reply_to_amqp10(queue) == address


@given(st.text().filter(lambda q: not q.startswith("/")))
def test_a_queue_name_comes_back(queue):
    assert reply_to_amqp091(reply_to_amqp10(queue)) == queue
