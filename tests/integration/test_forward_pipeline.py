"""The forwarding pipeline does not wait on itself (issue 45): while the receiving
gateway's store commit is held up, the sending gateway goes on sending.

The delay is injected from outside, with no hook in the gateway: the test takes
SQLite's write lock on org-b's store file (``BEGIN IMMEDIATE`` on a connection of its
own), so org-b's commit thread waits in its own ``BEGIN IMMEDIATE`` (busy timeout 5 s)
with the batch that holds the accepted outcomes of what org-b took in. Before, org-b's
credit window (256) was filled by the transfers waiting for that commit, and org-a
stopped at 256 messages until the commit ended; now a forwarder's link gets a larger
window, topped up while outcomes wait, and org-a keeps sending. Once the lock goes,
every message is accepted, once."""
from __future__ import annotations

import sqlite3
import time

import pika
import pytest

from tests.integration.test_forwarding_two_gateways import Pair, declare
from tests.support.cross_protocol_clients import pika_channel, unique
from tests.support.gateway_metrics import metric_samples

pytestmark = pytest.mark.integration

COUNT = 1200
#: the old window: what org-a could send while org-b's commit was in flight
OLD_WINDOW = 256
#: how long the test holds org-b's commits up (below the store's 5 s busy timeout)
HOLD = 3.0
BUSY_TIMEOUT = 5.0


def depth(gw, queue: str) -> int:
    return int(metric_samples(gw).get(("amqp_gateway_queue_messages", ("queue", queue), ("vhost", "/")), 0))


def outbox(gw) -> int:
    return int(metric_samples(gw).get(("amqp_gateway_forward_outbox_messages", ("remote", "org-b")), -1))


def test_sending_goes_on_while_the_receivers_commit_is_in_flight(tmp_path) -> None:
    pair = Pair(tmp_path).start()
    try:
        a, b = pair.a, pair.b
        q = unique("piped")
        declare(b, q)
        lock = sqlite3.connect(str(tmp_path / "b" / "store.db"), timeout=5, isolation_level=None)
        conn, ch = pika_channel(a)
        try:
            lock.execute("BEGIN IMMEDIATE")  # org-b's commits wait from here
            held_at = time.monotonic()
            props = pika.BasicProperties(delivery_mode=2)
            for i in range(COUNT):  # into org-a's outbox (org-a's own store is not held)
                ch.basic_publish("", f"{q}@org-b", f"m-{i}".encode(), props)
            most = 0
            while time.monotonic() - held_at < HOLD and most < COUNT:
                most = max(most, depth(b, q))
            # seen before org-b's commit thread gave up waiting (its busy timeout, 5 s):
            # org-b had committed none of these
            assert time.monotonic() - held_at < BUSY_TIMEOUT
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        assert most > 2 * OLD_WINDOW, (
            f"org-b took in only {most} messages while its commit was in flight")
        conn.close()
        deadline = time.monotonic() + 30  # the lock is gone: every outcome comes back
        while outbox(a) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert outbox(a) == 0
        bodies = []
        conn, ch = pika_channel(b)
        while True:
            method, _, body = ch.basic_get(q, auto_ack=True)
            if method is None:
                break
            bodies.append(body.decode())
        conn.close()
        assert sorted(bodies) == sorted(f"m-{i}" for i in range(COUNT))
    finally:
        pair.end()
