"""The final state of every message: one ledger with every way a message can end,
written by the real ``Ledger`` and ``LedgerWriter``; the Spark job (``settlement``) and
the plain-Python evaluation of the same rules (``final_rules``) give each message the
same state, and the state the ledger's story says."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from gateway.ledger import EventKind as K, Ledger, LedgerWriter
from pipeline.final_rules import STATES, final_states
from tests.support.ledger_files import read_events

T0 = 1_700_000_000.0


def _message(gid: int, routing_key: str = "k", durable: bool = False) -> SimpleNamespace:
    return SimpleNamespace(gateway_id=gid, exchange="x", routing_key=routing_key, message_id=f"m-{gid}",
                           correlation_id=None, size=10, headers=None, created_at=T0, durable=durable,
                           origin=SimpleNamespace(_value_="amqp091"))


def _queue(name: str, stored: bool = False) -> SimpleNamespace:
    return SimpleNamespace(name=name, routed_to=(name,), storage=object() if stored else None)


#: gateway id -> (place, state, detail) the story below gives it
EXPECTED = {
    1: ("q", "delivered", "settled accepted"),
    2: ("q", "delivered", "settled rejected"),
    3: ("q", "expired", "TTL ran out, no dead-letter exchange"),
    4: ("q", "dead-lettered", "reason rejected, to exchange 'dlx'"),
    104: ("dlq", "still queued", "dead-letter copy (rejected), never delivered"),
    5: ("q", "purged", "purged"),
    6: ("q", "deleted", "its queue was deleted"),
    7: ("q", "dropped", "by the queue: maxlen"),
    8: ("full", "dropped", "by the queue: reject-publish"),
    9: ("q2", "delivered", "settled accepted"),  # moved from q: no row there
    10: (None, "dropped", "unroutable: no queue took it"),
    11: (None, "dropped", "returned to the publisher (NO_ROUTE)"),
    12: ("d", "lost", "kept in the store, not restored at the gateway's next start"),
    13: ("q", "dropped", "at a restart: not kept in the store (a transient message or queue)"),
    14: ("d", "still queued", "never delivered"),
    15: ("q", "still queued", "given back by a consumer (released)"),
    16: ("q", "still queued", "delivered, unsettled at the end of the ledger"),
    17: ("-> gw-B", "forwarded", "settled accepted by the peer"),
    18: ("-> gw-B", "dead-lettered", "at the source: amqp:not-found"),
    19: ("-> gw-B", "still queued", "not settled by the peer"),
    20: (None, "still queued", "in the forwarding outbox, not sent yet"),
    21: (None, "delivered", "to a service node"),
    22: (None, "dropped", "no routing verdict (a transaction that was not committed)"),
    23: ("t", "dropped", "by the queue: transient queue"),
    # generated names: one latency row each
    30: ("amq.gen-Xx3Cq7w7FBKHFxB4vjRMcA", "delivered", "settled accepted"),
    31: ("amq.gen-1pZ0a8G2xZq0F0sbWk4R2Q", "delivered", "settled accepted"),
    32: ("reply-5f0d5b3e-2c1a-4f5e-9b7d-0a1b2c3d4e5f", "delivered", "settled accepted"),
}


def story(directory: str) -> None:
    """Every way a message ends, over a restart at T0 + 50 (see ``EXPECTED``)."""
    ledger = Ledger(container_id="gw-F")
    writer = LedgerWriter(directory, container_id="gw-F", segment_max_bytes=2000)
    ledger.use_gateway_ids(iter(range(1000, 2000)).__next__)
    q, q2, d, dlq, t = _queue("q"), _queue("q2"), _queue("d", stored=True), _queue("dlq"), _queue("t")
    ledger.started(T0)
    pub = ledger.context(T0, "/", "ann", "0-9-1", "c1", 1)
    sub = ledger.context(T0, "/", "bob", "1.0", "c2", "r")

    def routed(gid: int, at: float, queue=q, **kwargs) -> SimpleNamespace:
        m = _message(gid, **kwargs)
        ledger.received(at, pub, m, K.ROUTED, [queue])
        return m

    def take(m: SimpleNamespace, at: float, queue: str = "q", outcome=None) -> None:
        entry = SimpleNamespace(message=m, delivery_count=0)
        ledger.delivered(at, sub, entry, queue)
        if outcome is not None:
            ledger.settled(at + 0.1, sub, entry, queue, outcome)

    take(routed(1, T0 + 1), T0 + 1, outcome="accepted")
    take(routed(2, T0 + 2), T0 + 2, outcome="rejected")
    ledger.expired(T0 + 3, "/", routed(3, T0 + 3), 0, "q")
    ledger.queue_event(T0 + 5, "/", routed(5, T0 + 5), "q", K.PURGED)
    ledger.queue_event(T0 + 6, "/", routed(6, T0 + 6), "q", K.DELETED)
    ledger.queue_event(T0 + 7, "/", routed(7, T0 + 7), "q", K.DROPPED, "maxlen")
    m8 = _message(8)
    ledger.queue_event(T0 + 8, "/", m8, "full", K.DROPPED, "reject-publish")
    ledger.received(T0 + 8, pub, m8, K.REFUSED, [], "queue full")
    m9 = routed(9, T0 + 9)
    ledger.moved(T0 + 9, "/", m9, "q", q2)
    take(m9, T0 + 10, "q2", "accepted")
    ledger.received(T0 + 10, pub, _message(10), K.UNROUTABLE, [])
    ledger.received(T0 + 11, pub, _message(11), K.RETURNED, [], "NO_ROUTE")
    routed(12, T0 + 12, d, durable=True)
    routed(13, T0 + 13, q, durable=True)  # persistent, in a queue without storage
    routed(14, T0 + 14, d, durable=True)
    m17, m18, m19 = _message(17), _message(18), _message(19)
    for m in (m17, m18, m19):
        ledger.received(T0 + 15, pub, m, K.ROUTED, [])
        ledger.forwarded(T0 + 16, m, "gw-B")
    ledger.forward_settled(T0 + 17, m17, "gw-B", "accepted")
    ledger.forward_settled(T0 + 17, m18, "gw-B", "rejected", "amqp:not-found")
    ledger.forward_dead_lettered(T0 + 17, m18, "gw-B", "amqp:not-found")
    ledger.received(T0 + 18, pub, _message(20, routing_key="orders@gw-B"), K.ROUTED, [])
    ledger.received(T0 + 18, pub, _message(21, routing_key="$management"), K.ROUTED, [])
    ledger.received(T0 + 19, pub, _message(22))  # in a transaction never committed
    ledger.gap(T0 + 20, 3, T0 + 19.5)
    writer.add(ledger.take_lines(10 ** 6))
    writer.close(T0 + 21)
    # a crash, then the gateway starts again: it restores 14 (not 12) from the store
    ledger.started(T0 + 50)
    ledger.queue_event(T0 + 50, "/", _message(14, durable=True), "d", K.RESTORED)
    m15, m16 = routed(15, T0 + 51), routed(16, T0 + 51)
    take(m15, T0 + 52, outcome="released")
    take(m16, T0 + 52)
    m4 = routed(4, T0 + 52)
    ledger.dead_lettered(T0 + 52, "/", m4, "q", "dlx", "dead", "rejected")
    ledger.dead_letter_copy(T0 + 52, "/", _message(104), K.ROUTED, [dlq], "rejected")
    routed(23, T0 + 53, t)
    for gid in (30, 31, 32):
        name = EXPECTED[gid][0]
        take(routed(gid, T0 + 53, _queue(name)), T0 + 53.5, name, "accepted")
    ledger.queue_event(T0 + 54, "/", _message(23), "t", K.DROPPED, "transient queue")
    writer.add(ledger.context_lines() + ledger.take_lines(10 ** 6))
    writer.close(T0 + 55)


def _comparable(row: dict) -> str:
    return json.dumps({k: row[k] for k in ("container", "vhost", "place", "state", "detail",
                                           "gateway_id", "message_id", "size", "since_us", "last_us")},
                      sort_keys=True)


def test_python_final_states_follow_the_story(tmp_path):
    story(str(tmp_path))
    got = {int(r["gateway_id"]): (r["place"], r["state"], r["detail"]) for r in final_states(read_events(str(tmp_path)))}
    assert got == EXPECTED
    assert {state for _p, state, _d in got.values()} == set(STATES)


@pytest.mark.pipeline
@pytest.mark.timeout(600)  # local Spark's start and jobs, on 2 loaded cores
def test_spark_gives_every_message_the_state_python_gives(spark, tmp_path):
    from pipeline.ledger_reader import read_ledgers
    from pipeline.settlement import final_states as spark_final_states

    story(str(tmp_path))
    events = read_ledgers(spark, [str(tmp_path)]).filter("valid").drop("valid", "corrupt_record")
    spark_rows = [r.asDict() for r in spark_final_states(events).collect()]
    python_rows = final_states(read_events(str(tmp_path)))
    assert sorted(map(_comparable, spark_rows)) == sorted(map(_comparable, python_rows))
    assert len(spark_rows) == len(EXPECTED)
    # latency by queue: generated names grouped, not a row each
    from pipeline.tables import latency_by_queue

    settled = {r["queue"]: r["settled"] for r in latency_by_queue(events).collect()}
    assert settled == {"q": 3, "q2": 1, "amq.gen-*": 2, "reply-*": 1}
