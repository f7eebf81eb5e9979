"""Queues record expiry and dead-lettering in ``broker.ledger``; the DLX copy its verdict."""
from __future__ import annotations

import pytest

from gateway.broker.exchanges import DestinationKind
from tests.support.ledger_capture import LedgerCapture


@pytest.fixture
def ledger(broker):
    broker.use_ledger(LedgerCapture())
    return broker.ledger


def test_expiry_without_dead_letter_exchange(vhost, msg, ledger) -> None:
    q = vhost.declare_queue("q", arguments={"x-message-ttl": 10})
    vhost.publish("", "q", msg("m"), 0.0)
    gateway_id = q.ready.head(0.0, []).message.gateway_id
    assert q.expire(1.0) == 1
    assert ledger.kinds() == ["expired"]
    expired = ledger.events[0]
    assert (expired.now, expired["queue"], expired["vhost"], expired["gateway_id"]) == (1.0, "q", "/", gateway_id)
    assert (expired["received_at"], expired["proto_in"].value) == (0.0, "0-9-1")


def test_expiry_with_dead_letter_exchange_routes_a_new_copy(vhost, msg, ledger) -> None:
    vhost.declare_exchange("dlx", "fanout")
    vhost.declare_queue("dead")
    vhost.bind(DestinationKind.QUEUE, "dead", "dlx")
    q = vhost.declare_queue("work", arguments={"x-dead-letter-exchange": "dlx", "x-message-ttl": 10})
    vhost.publish("", "work", msg("m"), 0.0)
    original = q.ready.head(0.0, []).message.gateway_id
    q.expire(1.0)
    assert ledger.kinds() == ["expired", "dead_lettered", "routed"]
    _, dead, routed = ledger.events
    assert (dead["queue"], dead["exchange"], dead["reason"], dead["gateway_id"]) == \
        ("work", "dlx", "expired", original)
    assert routed["routed_to"] == ("dead",) and routed["reason"] == "expired"
    assert routed["gateway_id"] != original


def test_reject_without_requeue_dead_letters(vhost, msg, ledger) -> None:
    vhost.declare_queue("dead")
    q = vhost.declare_queue("work", arguments={"x-dead-letter-exchange": "",
                                               "x-dead-letter-routing-key": "dead"})
    vhost.publish("", "work", msg("m"), 0.0)
    entry = q.get(0.0, ack=True)
    q.reject(entry, requeue=False, now=2.0)
    assert ledger.kinds() == ["dead_lettered", "routed"]
    assert ledger.events[0]["reason"] == "rejected"
    assert ledger.events[1]["routed_to"] == ("dead",)


def test_missing_dead_letter_exchange_is_unroutable(vhost, msg, ledger) -> None:
    q = vhost.declare_queue("work", arguments={"x-dead-letter-exchange": "gone", "x-message-ttl": 1})
    vhost.publish("", "work", msg("m"), 0.0)
    q.expire(1.0)
    assert ledger.kinds() == ["expired", "dead_lettered", "unroutable"]


def test_maxlen_drop_dead_letters_with_reason(vhost, msg, ledger) -> None:
    vhost.declare_queue("dead")
    vhost.declare_queue("work", arguments={"x-max-length": 1, "x-dead-letter-exchange": "",
                                           "x-dead-letter-routing-key": "dead"})
    vhost.publish("", "work", msg("a"), 0.0)
    vhost.publish("", "work", msg("b"), 0.0)
    assert [e["reason"] for e in ledger.of("dead_lettered")] == ["maxlen"]
