"""The forwarding pipeline does not wait on itself (issue 45): while the receiving
gateway's store commit is held up, the sending gateway goes on sending; and a forwarded
message goes out before its outbox row is committed (and before the sending gateway's
log sync), its publisher confirmed only after both; a failed COMMIT refuses it.

The delay is injected from outside, with no hook in the gateway: the test takes
SQLite's write lock on org-b's store file (``BEGIN IMMEDIATE`` on a connection of its
own), so org-b's commit thread waits in its own ``BEGIN IMMEDIATE`` (busy timeout 5 s)
with the batch that holds the accepted outcomes of what org-b took in. Before, org-b's
credit window (256) was filled by the transfers waiting for that commit, and org-a
stopped at 256 messages until the commit ended; now a forwarder's link gets a larger
window, topped up while outcomes wait, and org-a keeps sending. Once the lock goes,
every message is accepted, once."""
from __future__ import annotations

import os
import sqlite3
import threading
import time

import pika
import pytest

from tests.integration.test_forwarding_two_gateways import Pair, declare
from tests.support.cross_protocol_clients import pika_channel, pika_get, unique
from tests.support.deadline import wait_until
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


def _hold_outbox_commits(store, action) -> None:
    """org-a's commit thread runs ``action()`` inside each transaction that writes an
    outbox row, before its statements (the store's fault seam ``CommitThread.execute``)."""
    from gateway.store.statements import Op

    thread = store.commit_thread
    execute = thread.execute

    def held(operations):
        if any(op and op[0] == Op.INSERT_OUTBOX for op in operations):
            action()
        return execute(operations)
    thread.execute = held


def _publish_confirmed(a, address: str, body: bytes, outcome: dict) -> threading.Thread:
    """Publish ``body`` to org-a with confirms, in a thread: ``outcome`` gets
    ``confirmed_at`` or the ``error`` (a nack)."""
    def publish() -> None:
        conn, ch = pika_channel(a)
        ch.confirm_delivery()
        try:  # returns once confirmed (raises on a nack)
            ch.basic_publish("", address, body, pika.BasicProperties(delivery_mode=2))
            outcome["confirmed_at"] = time.monotonic()
        except Exception as exc:  # noqa: BLE001 - reported by the assertions of the caller
            outcome["error"] = exc
        finally:
            if conn.is_open:
                conn.close()

    publisher = threading.Thread(target=publish, daemon=True)
    publisher.start()
    return publisher


def _outbox_rows_left(tmp_path, a) -> int:
    """org-a stopped: the outbox rows in its store file."""
    a.stop()
    store = sqlite3.connect(str(tmp_path / "a" / "store.db"))
    try:
        return store.execute("SELECT count(*) FROM outbox").fetchone()[0]
    finally:
        store.close()


def _goes_out_while_held(tmp_path, hold, held) -> None:
    """``hold(a, gate)`` makes org-a's store wait for ``gate`` in the transaction of the
    outbox row (or its sync), ``held(a)`` says it still waits: a message published to
    org-a with confirms for ``q@org-b`` reaches org-b's queue meanwhile, org-b's
    ``accepted`` removes the entry from the outbox meanwhile (its deletion committed after
    the insert), the publisher's confirm comes only once the wait is over, and org-a's
    store holds no outbox row."""
    pair = Pair(tmp_path).start()
    gate = threading.Event()
    try:
        a, b = pair.a, pair.b
        q = unique("early")
        declare(b, q)
        hold(a, gate)
        outcome: dict = {}
        publisher = _publish_confirmed(a, f"{q}@org-b", b"early", outcome)
        conn, ch = pika_channel(b)
        try:
            _, _, body = pika_get(ch, q, timeout=10)
            received_at = time.monotonic()
        finally:
            conn.close()
        assert body == b"early"
        assert held(a) and not outcome, "reached org-b only once org-a's store was done"
        wait_until(lambda: outbox(a) == 0, "org-a's outbox empty")
        assert outbox(a) == 0 and held(a) and not outcome
        released_at = time.monotonic()
        gate.set()
        publisher.join(15)
        assert "error" not in outcome and "confirmed_at" in outcome, outcome
        assert received_at < released_at < outcome["confirmed_at"]
        # the row's insert and its deletion are both in the file: nothing to send again
        assert _outbox_rows_left(tmp_path, a) == 0
    finally:
        gate.set()
        pair.end()


def test_a_forwarded_message_goes_out_before_its_sync_and_is_confirmed_after(tmp_path) -> None:
    """org-a's log syncs are held (its store's ``sync_file``, ``store.sync_mode: full``):
    see ``_goes_out_while_held``. Before, the forwarder waited for the sync too, and
    nothing reached org-b while it was held."""
    def hold(a, gate) -> None:
        wal = a.service.store.wal_sync
        assert wal is not None  # the default sync_mode is full
        wal.sync_file = lambda fd: (gate.wait(30), os.fdatasync(fd))

    _goes_out_while_held(tmp_path, hold, lambda a: a.service.store.wal_sync.syncing)


def test_a_forwarded_message_goes_out_before_its_outbox_commit(tmp_path) -> None:
    """org-a's transaction that holds the outbox row is held before its COMMIT (its
    statements wait): see ``_goes_out_while_held``. Before, the forwarder waited for the
    COMMIT, and nothing reached org-b while it was held."""
    inside = threading.Event()

    def hold(a, gate) -> None:
        _hold_outbox_commits(a.service.store, lambda: (inside.set(), gate.wait(30)))

    # (the transaction cannot end before the test opens the gate)
    _goes_out_while_held(tmp_path, hold, lambda a: inside.is_set())


def test_a_failed_outbox_commit_refuses_the_publisher_and_leaves_no_row(tmp_path) -> None:
    """The transaction holding the outbox row fails (its statements raise, as a full disk
    would): the publisher is refused (nack), org-a's outbox ends empty whether org-b got
    the message early or not, and org-a goes on forwarding once writes work again."""
    pair = Pair(tmp_path).start()
    try:
        a, b = pair.a, pair.b
        q = unique("failed")
        declare(b, q)
        failures = [sqlite3.OperationalError("injected: disk I/O error")]

        def fail_once() -> None:
            if failures:
                raise failures.pop()
        _hold_outbox_commits(a.service.store, fail_once)
        outcome: dict = {}
        _publish_confirmed(a, f"{q}@org-b", b"refused", outcome).join(15)
        assert "error" in outcome and "confirmed_at" not in outcome, outcome
        store = a.service.store
        wait_until(lambda: outbox(a) == 0 and store.write_error is None,
                   "org-a's outbox empty and its store writing again", 15)
        outcome = {}
        _publish_confirmed(a, f"{q}@org-b", b"after", outcome).join(15)
        assert "confirmed_at" in outcome, outcome
        conn, ch = pika_channel(b)
        try:
            bodies = []
            while b"after" not in bodies:
                _, _, body = pika_get(ch, q, timeout=10)
                bodies.append(body)
        finally:
            conn.close()
        assert bodies in ([b"after"], [b"refused", b"after"])  # at-least-once: maybe early
        wait_until(lambda: outbox(a) == 0, "org-a's outbox empty")
        assert _outbox_rows_left(tmp_path, a) == 0
    finally:
        pair.end()
