"""Queues record expiry and dead-lettering in ``broker.ledger``; the DLX copy its verdict."""
from __future__ import annotations

import pytest

from gateway.broker.errors import NotFound
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


# ---------------------------------------------------------------- every way out (issue 41)

def _ids(events) -> list:
    return [e["gateway_id"] for e in events]


def test_purge_records_each_message_purged_and_leaves_acquired_ones(vhost, msg, ledger) -> None:
    q = vhost.declare_queue("q")
    for body in ("a", "b", "c"):
        vhost.publish("", "q", msg(body), 0.0)
    held = q.get(0.0, ack=True)
    assert vhost.purge_queue("q", now=5.0) == 2
    purged = ledger.of("purged")
    assert [(e.now, e["queue"], e["vhost"]) for e in purged] == [(5.0, "q", "/")] * 2
    assert held.message.gateway_id not in _ids(purged)


def test_a_deleted_queue_records_its_ready_and_its_unsettled_messages(vhost, msg, ledger) -> None:
    q = vhost.declare_queue("q")
    for body in ("a", "b"):
        vhost.publish("", "q", msg(body), 0.0)
    held = q.get(0.0, ack=True)
    assert vhost.delete_queue("q", now=7.0) == 1
    deleted = ledger.of("deleted")
    assert sorted(_ids(deleted)) == sorted([held.message.gateway_id, deleted[0]["gateway_id"]])
    assert len(deleted) == 2 and {(e.now, e["queue"]) for e in deleted} == {(7.0, "q")}
    assert ledger.of("purged") == []


def test_overflow_drops_are_recorded_with_their_reason(vhost, msg, ledger) -> None:
    head = vhost.declare_queue("head", arguments={"x-max-length": 1})
    vhost.publish("", "head", msg("a"), 0.0)
    first = head.ready.head(0.0, []).message.gateway_id
    vhost.publish("", "head", msg("b"), 1.0)
    vhost.declare_queue("full", arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    vhost.publish("", "full", msg("c"), 2.0)
    refused = msg("d")
    assert vhost.publish("", "full", refused, 3.0).rejected
    dropped = ledger.of("dropped")
    assert [(e.now, e["queue"], e["reason"], e["gateway_id"]) for e in dropped] == [
        (1.0, "head", "maxlen", first), (3.0, "full", "reject-publish", refused.gateway_id)]


def test_at_a_stop_what_the_store_does_not_keep_is_recorded_as_dropped(broker, vhost, msg,
                                                                         ledger) -> None:
    """Without a store nothing is kept: a durable queue's messages too."""
    vhost.declare_queue("t")
    vhost.declare_queue("d", durable=True)
    vhost.publish("", "t", msg("a"), 0.0)
    vhost.publish("", "d", msg("b", durable=True), 0.0)
    vhost.queue("t").get(0.0, ack=True)  # unsettled when the gateway stops
    assert broker.record_shutdown(9.0) == 2
    assert sorted((e.now, e["queue"], e["reason"]) for e in ledger.of("dropped")) == [
        (9.0, "d", "transient queue"), (9.0, "t", "transient queue")]


def test_a_move_through_the_vhost_is_in_the_ledger_and_a_refused_one_dead_lettered(vhost, msg, ledger) -> None:
    """Issue 43: management's move goes through the vhost (``move_messages``), which
    records each message it moves; a message the target refuses (a full reject-publish
    queue) is dead-lettered from the source instead, and recorded so."""
    vhost.declare_queue("dead")
    work = vhost.declare_queue("work", arguments={"x-dead-letter-exchange": "",
                                                  "x-dead-letter-routing-key": "dead"})
    vhost.declare_queue("parking", arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    for body in ("a", "b", "c"):
        vhost.publish("", "work", msg(body), 0.0)
    first = work.ready.head(0.0, []).message.gateway_id
    assert vhost.move_messages("work", "parking", 2, 5.0) == 2
    assert ledger.kinds() == ["moved", "dropped", "dead_lettered", "routed"]
    moved = ledger.events[0]
    assert (moved.now, moved["vhost"], moved["queue"], moved["routed_to"], moved["gateway_id"]) == \
        (5.0, "/", "work", ("parking",), first)
    assert ledger.events[2]["queue"] == "work" and ledger.events[2]["reason"] == "rejected"
    assert [q.ready.count for q in (vhost.queue("work"), vhost.queue("parking"), vhost.queue("dead"))] == [1, 1, 1]
    with pytest.raises(NotFound, match="no queue 'nowhere' in vhost '/'"):
        vhost.move_messages("work", "nowhere", None, 6.0)
