"""Ledgers with known contents, written by the real ``LedgerWriter``, for the report's tests.

Each builder writes one or more ledger directories and documents what they hold; the
tests assert the report's numbers against those documents.
"""
from __future__ import annotations

import os

from gateway.ledger import EventKind as K, Outcome, Protocol
from tests.support.ledger_v1 import V1LedgerWriter as LedgerWriter  # any event, any field

__all__ = ["DAY", "T0", "forwarding_ledgers", "multi_day_ledger", "one_minute_ledger",
           "single_gateway_ledger", "small_ledger"]

T0 = 1_700_000_000.0          # 2023-11-14 22:13:20 UTC
DAY = 86400.0
P091, P10 = Protocol.AMQP091, Protocol.AMQP10


def single_gateway_ledger(directory: str) -> None:
    """Known traffic on one gateway gw-A: 20 + 5 + 3 + 2 + 4 messages, 2 refusals.

    - 20 messages 0-9-1 -> 1.0: alice publishes to ex/k (vhost /), bob consumes q1 over
      1.0; 15 accepted, 3 rejected, 2 released then redelivered and accepted; latencies
      1..20 ms, the redelivered ones settled after 60 ms.
    - 5 messages 1.0 -> 0-9-1 on vhost v2, 60 s later: bob to /queues/q2, alice takes them,
      500 ms each.
    - 3 unroutable (ex/nowhere), 2 returned NO_ROUTE (ex/lost), 4 expired in q3 (carol,
      1.0), 2 refused ACCESS_REFUSED (carol, ex secret/x, no gateway id).
    - the last segment is left open with a torn last line, as a crash would.
    """
    w = LedgerWriter(directory, container_id="gw-A", segment_max_bytes=4000)
    t = T0
    n = 0

    def gid() -> str:
        nonlocal n
        n += 1
        return f"a-{n}"

    outcomes = [Outcome.ACCEPTED] * 15 + [Outcome.REJECTED] * 3 + [Outcome.RELEASED] * 2
    for i, outcome in enumerate(outcomes):
        g = gid()
        common = dict(vhost="/", gateway_id=g, size=100, message_id=f"m{i}")
        w.record(K.RECEIVED, t, user="alice", proto_in=P091, exchange="ex", routing_key="k", **common)
        w.record(K.ROUTED, t, routed_to=["q1"], exchange="ex", routing_key="k", **common)
        w.record(K.DELIVERED, t + 0.001, user="bob", proto_in=P091, proto_out=P10, queue="q1",
                 delivery_count=0, **common)
        w.record(K.SETTLED, t + (i + 1) / 1000, user="bob", queue="q1", outcome=outcome,
                 received_at=t, **common)
        if outcome is Outcome.RELEASED:  # redelivered, then accepted
            w.record(K.DELIVERED, t + 0.05, user="bob", proto_in=P091, proto_out=P10, queue="q1",
                     delivery_count=1, **common)
            w.record(K.SETTLED, t + 0.06, user="bob", queue="q1", outcome=Outcome.ACCEPTED,
                     received_at=t, **common)
        t += 1
    w.flush(t)
    t = T0 + 60
    for i in range(5):
        common = dict(vhost="v2", gateway_id=gid(), size=1000)
        w.record(K.RECEIVED, t, user="bob", proto_in=P10, address="/queues/q2", **common)
        w.record(K.ROUTED, t, routed_to=["q2"], **common)
        w.record(K.DELIVERED, t, user="alice", proto_in=P10, proto_out=P091, queue="q2", **common)
        w.record(K.SETTLED, t + 0.5, user="alice", queue="q2", outcome=Outcome.ACCEPTED,
                 received_at=t, **common)
    for i in range(3):
        common = dict(vhost="/", user="alice", gateway_id=gid(), size=10, exchange="ex", routing_key="nowhere")
        w.record(K.RECEIVED, t, proto_in=P091, **common)
        w.record(K.UNROUTABLE, t, **common)
    for i in range(2):
        common = dict(vhost="/", user="alice", gateway_id=gid(), size=10, exchange="ex", routing_key="lost")
        w.record(K.RECEIVED, t, proto_in=P091, **common)
        w.record(K.RETURNED, t, reason="NO_ROUTE", **common)
    for i in range(4):
        common = dict(vhost="/", gateway_id=gid(), size=10)
        w.record(K.RECEIVED, t, user="carol", proto_in=P10, address="/queues/q3", **common)
        w.record(K.ROUTED, t, routed_to=["q3"], **common)
        w.record(K.EXPIRED, t + 30, queue="q3", **common)
    for i in range(2):
        w.record(K.REFUSED, t, vhost="/", user="carol", proto_in=P091, exchange="secret",
                 routing_key="x", reason="ACCESS_REFUSED")
    w.flush(t + 40)
    with open(os.path.join(directory, sorted(os.listdir(directory))[-1]), "ab") as f:
        f.write(b'{"v":1,"container":"gw-A","ts_us":17000')


#: forwarding_ledgers' planted findings, by gateway id
LOST, DUPLICATED, LATE = {"a-3", "a-50", "a-77"}, {"a-10", "a-20"}, {"a-40", "a-41"}


def forwarding_ledgers(root) -> tuple[str, str, dict]:
    """gw-A forwards 100 messages a-0..a-99 to gw-B (a-5 twice, a retry), which settles
    each accepted, and 5 to gw-C (no ledger, never settled); gw-B loses a-3, a-50, a-77, receives a-10 and a-20 twice and a-40, a-41
    120 s late. gw-B also records two arrivals that no forward explains: u-1 "from gw-A"
    (gw-A's ledger has no forward of it: unexpected) and a-60 "from gw-X" (a gateway whose
    ledger is not given, and not the gw-A that forwarded a-60: it does not count as a-60's
    arrival, nor as unexpected). Every message is 50 bytes, vhost /."""
    a, b = str(root / "gw-a"), str(root / "gw-b")
    wa = LedgerWriter(a, container_id="gw-A")
    wb = LedgerWriter(b, container_id="gw-B")
    for i in range(100):
        g = f"a-{i}"
        t = T0 + i
        common = dict(vhost="/", gateway_id=g, message_id=f"msg-{i}", size=50)
        wa.record(K.RECEIVED, t, user="alice", proto_in=P091, **common)
        wa.record(K.FORWARDED, t + 0.1, proto_in=P091, proto_out=P10, peer_container="gw-B", **common)
        if i == 5:  # a retry after a reconnect: still one message
            wa.record(K.FORWARDED, t + 5, proto_in=P091, proto_out=P10, peer_container="gw-B", **common)
        # gw-B accepted every one (the losses are gw-B's): nothing at gw-A explains them
        wa.record(K.FORWARD_SETTLED, t + 6, outcome=Outcome.ACCEPTED, peer_container="gw-B", **common)
        if g in LOST:
            continue
        delay = 120.0 if g in LATE else 0.2
        copies = 2 if g in DUPLICATED else 1
        for c in range(copies):
            wb.record(K.RECEIVED, t + delay + c, user="gw-a-link", proto_in=P10, origin_id=g,
                      gateway_id=f"b-{i}-{c}", peer_container="gw-A", vhost="/",
                      message_id=f"msg-{i}", size=50)
    for i in range(5):
        wa.record(K.FORWARDED, T0 + i, proto_out=P10, peer_container="gw-C", gateway_id=f"c-{i}")
    wb.record(K.RECEIVED, T0 + 200, user="gw-a-link", proto_in=P10, origin_id="u-1", gateway_id="b-u1",
              peer_container="gw-A", vhost="/", message_id="msg-u1", size=50)
    wb.record(K.RECEIVED, T0 + 201, user="gw-x-link", proto_in=P10, origin_id="a-60", gateway_id="b-x60",
              peer_container="gw-X", vhost="/", size=50)
    wa.close(T0 + 500)
    wb.close(T0 + 500)
    return a, b, {"lost": LOST, "duplicated": DUPLICATED, "late": LATE}


def small_ledger(directory: str, received: int = 7, delivered: int = 4, size: int = 10) -> None:
    """gw-A: alice publishes ``received`` messages (0-9-1) to ex/k, bob takes the first
    ``delivered`` from q (1.0) and accepts them; the rest stay in q."""
    w = LedgerWriter(directory, container_id="gw-A")
    for i in range(received):
        common = dict(vhost="/", gateway_id=f"a-{i}", size=size)
        w.record(K.RECEIVED, T0 + i, user="alice", proto_in=P091, exchange="ex", routing_key="k", **common)
        w.record(K.ROUTED, T0 + i, routed_to=["q"], exchange="ex", routing_key="k", **common)
        if i < delivered:
            w.record(K.DELIVERED, T0 + i + 0.001, user="bob", proto_in=P091, proto_out=P10, queue="q", **common)
            w.record(K.SETTLED, T0 + i + 0.002, user="bob", proto_in=P091, proto_out=P10, queue="q",
                     outcome=Outcome.ACCEPTED, received_at=T0 + i, **common)
    w.close(T0 + 100)


def _publish(w: LedgerWriter, t: float, gid: str, key: str, *, exchange: str = "events",
             queue: str = "work") -> None:
    common = dict(vhost="/", gateway_id=gid, size=20)
    w.record(K.RECEIVED, t, user="app", proto_in=P091, exchange=exchange, routing_key=key, **common)
    w.record(K.ROUTED, t, routed_to=[queue], exchange=exchange, routing_key=key, **common)
    w.record(K.DELIVERED, t + 0.01, user="worker", proto_in=P091, proto_out=P091, queue=queue, **common)
    w.record(K.SETTLED, t + 0.02, user="worker", queue=queue, outcome=Outcome.ACCEPTED, received_at=t,
             **common)


def one_minute_ledger(directory: str) -> dict:
    """gw-M, one minute from T0: a publish to events/orders every second (60), one to
    events/audit every 10 s (6), and 30 one-off keys events/tmp-0..29 (one each, at
    T0 + 30 s); nothing else. All go to queue work and are accepted."""
    w = LedgerWriter(directory, container_id="gw-M")
    n = 0
    for s in range(60):
        n += 1
        _publish(w, T0 + s, f"m-{n}", "orders")
        if s % 10 == 0:
            n += 1
            _publish(w, T0 + s + 0.5, f"m-{n}", "audit")
    for k in range(30):
        n += 1
        _publish(w, T0 + 30.25, f"m-{n}", f"tmp-{k}")
    w.close(T0 + 60)
    return {"first": T0, "last": T0 + 59.02, "orders": 60, "audit": 6, "one_off": 30}


def multi_day_ledger(directory: str) -> dict:
    """gw-D over three days from T0: a publish to events/orders every hour on day 1 and
    day 3, nothing on day 2 (a gap the charts must show as zeros)."""
    w = LedgerWriter(directory, container_id="gw-D")
    hours = [h for h in range(72) if not 24 <= h < 48]
    for h in hours:
        _publish(w, T0 + h * 3600, f"d-{h}", "orders")
    w.close(T0 + 71 * 3600 + 1)
    return {"first": T0, "last": T0 + 71 * 3600 + 0.02, "messages": len(hours)}
