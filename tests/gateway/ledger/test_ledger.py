"""Ledger: the records each call makes, as written; ids and headers as text; sampling;
slices; contexts."""
from __future__ import annotations

import json
import uuid
from types import SimpleNamespace

import pytest
from hypothesis import given, strategies as st

from gateway.ledger import EventKind, Ledger
from tests.support.ledger_files import events_of_lines

T0 = 1_700_000_000.0


def message(gid: int = 7, **fields) -> SimpleNamespace:
    values = dict(gateway_id=gid, exchange="x", routing_key="k", message_id="m", correlation_id=None,
                  size=12, headers=None, created_at=T0, origin=SimpleNamespace(_value_="amqp091"),
                  durable=False)
    values.update(fields)
    return SimpleNamespace(**values)


def queue(name: str) -> SimpleNamespace:
    return SimpleNamespace(name=name, routed_to=(name,))


def lines(ledger: Ledger) -> list[list]:
    return [json.loads(line) for line in ledger.take_lines(10 ** 6).splitlines()]


def test_a_delivery_settled_as_sent_is_delivered_then_settled_accepted():
    """One home for no-ack / pre-settled deliveries (issue 43): both records at once."""
    ledger = Ledger(container_id="gw")
    entry = SimpleNamespace(message=message(), delivery_count=0)
    ledger.delivered_settled(T0, 5, entry, "q")
    assert lines(ledger) == [["d", T0, 5, 7, "q", 0, T0], ["s", T0, 5, 7, "q", 0, T0, "accepted", None]]


def test_each_call_writes_one_record_of_its_kind():
    ledger = Ledger(container_id="gw")
    ids = iter(range(100, 200))
    ledger.use_gateway_ids(ids.__next__)
    pub = ledger.context(T0, "/", "ann", "0-9-1", "c1", 1)
    sub = ledger.context(T0, "/", "bob", "1.0", "c2", "r", "/queues/q")
    entry = SimpleNamespace(message=message(), delivery_count=1)
    ledger.received(T0, pub, message(), EventKind.ROUTED, [queue("q"), queue("q2")])
    ledger.delivered(T0 + 1, sub, entry, "q")
    ledger.settled(T0 + 2, sub, entry, "q", "rejected", "why")
    ledger.refused(T0 + 3, pub, "ACCESS_REFUSED", exchange="secret", routing_key="k")
    ledger.expired(T0 + 4, "/", entry.message, entry.delivery_count, "q")
    ledger.close_context(T0 + 5, sub)
    ledger.close_context(T0 + 5, sub)  # once only
    assert lines(ledger) == [
        ["c", T0, 100, "gw", "/", "ann", "0-9-1", "c1", 1, None],
        ["c", T0, 101, "gw", "/", "bob", "1.0", "c2", "r", "/queues/q"],
        ["m", T0, 100, 7, "x", "k", "m", None, 12, "routed", ["q", "q2"], None, None, None, None,
         None, None, None],
        ["d", T0 + 1, 101, 7, "q", 1, T0],
        ["s", T0 + 2, 101, 7, "q", 1, T0, "rejected", "why"],
        ["e", T0 + 3, 100, "refused", None, None, None, None, "secret", "k", None,
         "ACCESS_REFUSED", None, None, None, None, None],
        ["c", T0 + 4, 102, "gw", "/", None, "0-9-1", None, None, None],  # the queues' context
        ["e", T0 + 4, 102, "expired", 7, "q", 1, T0, None, None, None, None, None, None, None,
         None, None],
        ["x", T0 + 5, 101],
    ]
    assert list(ledger.contexts) == [100, 102]


def test_queues_of_a_vhost_share_a_context_per_protocol():
    ledger = Ledger(container_id="gw")
    amqp10 = message(origin=SimpleNamespace(_value_="amqp10"))
    first = ledger.queue_context(T0, "/", message())
    assert ledger.queue_context(T0, "/", message()) == first
    assert ledger.queue_context(T0, "/", amqp10) != first
    assert ledger.queue_context(T0, "v2", message()) not in (first, ledger.queue_context(T0, "/", amqp10))
    assert [r[6] for r in lines(ledger)] == ["0-9-1", "1.0", "0-9-1"]


@pytest.mark.parametrize("value, text", [
    (b"\xffab", "\ufffdab"), (uuid.UUID(int=5), str(uuid.UUID(int=5))), (42, "42")])
def test_message_ids_that_json_has_no_type_for_are_text(value, text):
    from proton import symbol, ulong

    ledger = Ledger(container_id="gw")
    ctx = ledger.context(T0, "/", "u", "1.0", "c", "l")
    ledger.received(T0, ctx, message(message_id=value, correlation_id=ulong(9)))
    ledger.received(T0, ctx, message(message_id=symbol("s")))
    first, second = events_of_lines(ledger.take_lines())
    # str() of the value, as v1 wrote it (for proton's ulong: its repr)
    assert (first["message_id"], first["correlation_id"], second["message_id"]) == \
        (text, str(ulong(9)), "s")


def test_only_allowlisted_headers_are_recorded_and_as_text():
    ledger = Ledger(container_id="gw", header_allowlist=["tenant", "n"])
    ctx = ledger.context(T0, "/", "u", "0-9-1", "c", 1)
    ledger.received(T0, ctx, message(headers={"tenant": b"acme", "n": 3, "secret": "no"}))
    ledger.received(T0, ctx, message(headers={"secret": "no"}))
    data = ledger.take_lines()
    assert b"secret" not in data
    first, second = events_of_lines(data)
    assert first["headers"] == {"tenant": "acme", "n": "3"} and "headers" not in second
    quiet = Ledger(container_id="gw")
    ctx = quiet.context(T0, "/", "u", "0-9-1", "c", 1)
    quiet.received(T0, ctx, message(headers={"tenant": "acme"}))
    assert b"acme" not in quiet.take_lines()


def test_sampling_keeps_or_drops_every_record_of_a_message():
    ledger = Ledger(container_id="gw", sample_rate=0.3)
    ctx = ledger.context(T0, "/", "u", "0-9-1", "c", 1)
    for gid in range(1, 2001):
        entry = SimpleNamespace(message=message(gid), delivery_count=0)
        ledger.received(T0, ctx, entry.message, EventKind.ROUTED, [queue("q")])
        ledger.delivered(T0, ctx, entry, "q")
        ledger.settled(T0, ctx, entry, "q", "accepted")
    ledger.refused(T0, ctx, "no id: always kept")
    events = events_of_lines(ledger.take_lines(10 ** 6))
    per_id: dict[str, list[str]] = {}
    for e in events:
        per_id.setdefault(e.get("gateway_id"), []).append(e["event"])
    assert per_id.pop(None) == ["refused"]
    assert {tuple(kinds) for kinds in per_id.values()} == {
        ("received", "routed", "delivered", "settled")}
    assert 450 < len(per_id) < 750  # ~30 % of 2000
    assert ledger.records_sampled_out == 3 * (2000 - len(per_id))
    assert all(e["user"] == "u" for e in events), "the context is kept"


def test_take_lines_takes_the_oldest_slice_in_order():
    ledger = Ledger(container_id="gw")
    ctx = ledger.context(T0, "/", "u", "0-9-1", "c", 1)
    for gid in range(1, 11):
        ledger.received(T0, ctx, message(gid))
    first = ledger.take_lines(4)
    assert first.count(b"\n") == 4 and ledger.pending == 7
    rest = ledger.take_lines(100)
    assert ledger.pending == 0 and ledger.take_lines() == b""
    assert [e["gateway_id"] for e in events_of_lines(first + rest)] == [str(g) for g in range(1, 11)]
    assert ledger.records_taken == 11


def test_context_lines_are_the_open_contexts():
    ledger = Ledger(container_id="gw")
    a = ledger.context(T0, "/", "ann", "0-9-1", "c", 1)
    b = ledger.context(T0, "/", "bob", "0-9-1", "c", 2)
    ledger.close_context(T0, a)
    assert [json.loads(x)[2] for x in ledger.context_lines().splitlines()] == [b]


@given(st.lists(st.tuples(st.text(), st.one_of(st.none(), st.text()), st.integers(0, 2 ** 62),
                          st.dictionaries(st.text(max_size=3), st.one_of(st.text(), st.binary()))),
                max_size=20))
def test_any_text_survives_as_one_line_each(items):
    ledger = Ledger(container_id="gw-\n\"", header_allowlist=["a", "b"])
    for user, mid, size, headers in items:
        ctx = ledger.context(T0, "/", user, "0-9-1", "c", 1)
        ledger.received(T0, ctx, message(message_id=mid, size=size, headers=headers))
    data = ledger.take_lines(10 ** 6)
    assert data.count(b"\n") == 2 * len(items)
    events = events_of_lines(data)
    assert len(events) == len(items)
    for event, (user, mid, size, headers) in zip(events, items):
        assert event["container"] == "gw-\n\"" and event["user"] == user
        assert event.get("message_id") == mid and event["size"] == size


def test_forwarding_events_share_a_context_per_remote_and_arrivals_carry_the_origin_id():
    ledger = Ledger(container_id="gw")
    ids = iter(range(100, 200))
    ledger.use_gateway_ids(ids.__next__)
    ledger.forwarded(T0, message(), "org-b")
    ledger.forward_settled(T0 + 1, message(), "org-b", "rejected", "amqp:not-found: no queue")
    link = ledger.context(T0, "/", "org-a", "1.0", "c9", "l")
    arrived = message(gid=8)
    ledger.received(T0 + 2, link, arrived, EventKind.ROUTED, [queue("q")])
    ledger.arrived_forwarded(arrived, 7, "org-x", "org-a")
    assert lines(ledger) == [
        ["c", T0, 100, "gw", None, None, "1.0", "forward:org-b", None, None],
        ["e", T0, 100, "forwarded", 7, None, None, T0, None, None, None, None, None, "org-b",
         None, None, None],
        ["e", T0 + 1, 100, "forward_settled", 7, None, None, T0, None, None, None,
         "amqp:not-found: no queue", "rejected", "org-b", None, None, None],
        ["c", T0, 101, "gw", "/", "org-a", "1.0", "c9", "l", None],
        ["m", T0 + 2, 101, 8, "x", "k", "m", None, 12, "routed", ["q"], None, None, None, 7,
         "org-x", "org-a", None],
    ]


def test_the_gateways_own_events_and_every_way_out_of_a_queue():
    """Issue 41: started, gap (count and since), queue events with their reasons, a move
    (the target's name and whether it stores the message), a dead letter at the
    forwarding source, and ``stored_to`` on a persistent message's verdict."""
    ledger = Ledger(container_id="gw")
    ids = iter(range(100, 200))
    ledger.use_gateway_ids(ids.__next__)
    stored = SimpleNamespace(name="d", routed_to=("d",), storage=object())
    plain = SimpleNamespace(name="t", routed_to=("t",), storage=None)
    pub = ledger.context(T0, "/", "ann", "0-9-1", "c1", 1)
    ledger.started(T0)
    ledger.received(T0, pub, message(durable=True), EventKind.ROUTED, [stored, plain])
    ledger.received(T0, pub, message(gid=8), EventKind.ROUTED, [stored])
    ledger.queue_event(T0 + 1, "/", message(), "d", EventKind.DROPPED, "maxlen")
    ledger.queue_event(T0 + 1, "/", message(created_at=0.0), "d", EventKind.RESTORED)
    ledger.moved(T0 + 2, "/", message(durable=True), "d", stored)
    ledger.forward_dead_lettered(T0 + 3, message(), "org-b", "amqp:not-found")
    ledger.gap(T0 + 4, 12, T0 + 3.5)
    events = events_of_lines(ledger.take_lines(10 ** 6))
    got = [(e["event"], e.get("queue"), e.get("reason"), e.get("stored_to"), e.get("routed_to"),
            e.get("peer_container"), e.get("count"), e.get("since_us")) for e in events]
    assert got == [
        ("started", None, None, None, None, None, None, None),
        ("received", None, None, None, None, None, None, None),
        ("routed", None, None, ["d"], ["d", "t"], None, None, None),
        ("received", None, None, None, None, None, None, None),
        ("routed", None, None, None, ["d"], None, None, None),  # transient: not stored
        ("dropped", "d", "maxlen", None, None, None, None, None),
        ("restored", "d", None, None, None, None, None, None),
        ("moved", "d", None, ["d"], ["d"], None, None, None),
        ("dead_lettered", None, "amqp:not-found", None, None, "org-b", None, None),
        ("gap", None, None, None, None, None, 12, round((T0 + 3.5) * 1_000_000)),
    ]
    assert all(e["container"] == "gw" for e in events)
    restored = events[6]
    assert "latency_us" not in restored, "a stand-in has no receipt time"


# -- rows (issue 43): the message path's records as rows, read back as the same lines ----

_STORED = SimpleNamespace(name="d", routed_to=("d",), storage=object())
_PLAIN = SimpleNamespace(name="t", routed_to=("t",), storage=None)
_QUEUES = st.sampled_from([None, [], [_PLAIN], [_STORED], [_STORED, _PLAIN]])
_IDS = st.one_of(st.none(), st.text(max_size=3), st.integers(0, 2 ** 63), st.binary(max_size=3))
_EVENTS = st.sampled_from([None, EventKind.ROUTED, EventKind.UNROUTABLE, EventKind.REFUSED])
_TEXT = st.one_of(st.none(), st.sampled_from(["", "x", "k", "why"]))
_RECEIVED = st.tuples(st.just("received"), st.integers(0, 2), _TEXT, _TEXT, _IDS, _IDS,
                      st.booleans(), _EVENTS, _QUEUES, _TEXT, _TEXT, st.booleans(),
                      st.sampled_from([None, {}, {"o": 1}, {"h": b"v", "o": 1}, {"h": 3}]))
_DELIVERY = st.tuples(st.sampled_from(["delivered", "delivered_settled"]), st.integers(0, 2),
                      st.sampled_from(["q", "r"]), st.integers(0, 3))
_SETTLED = st.tuples(st.just("settled"), st.integers(0, 2), st.sampled_from(["q", "r", None]),
                     st.integers(0, 3), st.sampled_from(["accepted", "rejected", "released"]),
                     _TEXT)
_OPS = st.lists(st.one_of(_RECEIVED, _DELIVERY, _SETTLED,
                          st.tuples(st.just("close"), st.integers(0, 2)),
                          st.tuples(st.just("take"), st.integers(1, 5))), max_size=40)


def _text(value):
    return value if value is None or isinstance(value, str) else (
        value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value))


def _as_recorded_before(op, now, ctx, gid):
    """The record the ledger made for ``op`` before rows (issue 43): every field written
    in full, as ``STRUCTS`` of ``records.RECORDS``."""
    from gateway.ledger.row_shapes import STRUCTS

    kind = op[0]
    if kind == "received":
        _, _, exchange, key, mid, cid, durable, event, queues, reason, address, routed, \
            headers = op
        if headers and headers.get("h") is not None:  # the allow-list: "h"
            headers = {"h": _text(headers["h"])}
        else:
            headers = None
        if not routed:
            exchange, key = exchange or None, key or None
        names = stored = None
        if queues is not None:
            names = tuple(q.name for q in queues)
            if durable:
                stored = tuple(q.name for q in queues if q.storage is not None) or None
        return [STRUCTS["m"](now, ctx, gid, exchange, key, _text(mid), _text(cid), 100,
                             None if event is None else event.value, names, reason, address,
                             headers, None, None, None, stored)]
    queue, count = op[2], op[3]
    if kind == "delivered":
        return [STRUCTS["d"](now, ctx, gid, queue, count, T0)]
    if kind == "delivered_settled":
        return [STRUCTS["d"](now, ctx, gid, queue, count, T0),
                STRUCTS["s"](now, ctx, gid, queue, count, T0, "accepted", None)]
    return [STRUCTS["s"](now, ctx, gid, queue, count, T0, op[4], op[5])]


def _play(ops, take):
    """``ops`` on a fresh ledger, taking with ``take`` (``take_lines`` or a writer
    process's reading of ``take_frame``); returns what it wrote and what was expected."""
    from gateway.ledger.encoding import json_lines

    ledger = Ledger(container_id="gw", header_allowlist=["h"])
    contexts = [ledger.context(T0, "/", "u", "1.0", "c", i) for i in range(3)]
    expected, written = list(ledger.records), []
    for i, op in enumerate(ops):
        now = T0 + i / 8
        if op[0] == "take":
            written.append(take(ledger, op[1]))
            continue
        ctx = contexts[op[1]]
        if op[0] == "close":
            ledger.close_context(now, ctx)
            expected += ledger.records[-1:]
            contexts[op[1]] = ledger.context(now, "/", "u", "1.0", "c", i)
            expected += ledger.records[-1:]
            continue
        gid = 1000 + i
        if op[0] == "received":
            ledger.received(now, ctx, message(gid, exchange=op[2], routing_key=op[3],
                                              message_id=op[4], correlation_id=op[5],
                                              durable=op[6], size=100, headers=op[12]),
                            op[7], op[8], op[9], op[10], routed=op[11])
        else:
            entry = SimpleNamespace(message=message(gid), delivery_count=op[3])
            getattr(ledger, op[0])(now, ctx, entry, op[2], *op[4:])
        expected += _as_recorded_before(op, now, ctx, gid)
    while ledger.pending:
        written.append(take(ledger, 7))
    return b"".join(written), json_lines(expected), ledger


@given(_OPS)
def test_rows_read_back_as_the_lines_of_the_records_they_stand_for(ops):
    """Every kind of the message path's records (a message, a delivery, a settlement),
    with every field that a shape holds varying, contexts closed and opened, slices cut
    anywhere: ``take_lines``, and a writer process reading ``take_frame``'s frames, write
    exactly the lines the full records make."""
    from gateway.ledger.encoding import FrameReader

    got, want, _ = _play(ops, lambda ledger, n: ledger.take_lines(n))
    assert got == want
    reader = FrameReader()
    got, want, ledger = _play(ops, lambda ledger, n: b"".join(reader.feed(ledger.take_frame(n))))
    assert got == want and reader.error is None
    assert reader.feed(ledger.take_frame()) == []  # the ends of the closed contexts' shapes
    assert len(reader.shapes) == len(ledger.shapes), "the writer forgets what the gateway does"


def test_a_new_writer_gets_the_shapes_with_the_contexts():
    """A writer process started again (the old one died) reads rows of shapes declared to
    the old one: ``context_frame`` declares every shape still needed, also the shapes of
    a context closed whose rows are not all taken."""
    from gateway.ledger.encoding import FrameReader

    def play(ledger, take):
        ctx = ledger.context(T0, "/", "u", "1.0", "c", "l")
        entry = SimpleNamespace(message=message(), delivery_count=0)
        ledger.received(T0, ctx, entry.message, EventKind.ROUTED, [queue("q")])
        ledger.delivered(T0, ctx, entry, "q")
        take(ledger)  # the old writer's
        later = SimpleNamespace(message=message(8), delivery_count=0)
        ledger.received(T0 + 1, ctx, later.message, EventKind.ROUTED, [queue("q")])
        ledger.delivered(T0 + 1, ctx, later, "q")
        ledger.close_context(T0 + 2, ctx)
        ledger.settled(T0 + 3, ctx, entry, "q", "accepted")  # after its link closed

    ledger, twin = Ledger(container_id="gw"), Ledger(container_id="gw")
    play(ledger, lambda led: FrameReader().feed(led.take_frame()))
    play(twin, lambda led: led.take_lines())
    new = FrameReader()
    got = b"".join(new.feed(ledger.context_frame() + ledger.take_frame()))
    assert new.error is None
    assert [json.loads(x)[0] for x in got.splitlines()] == ["m", "d", "x", "s"]
    assert got == twin.take_lines()
    assert new.feed(ledger.take_frame()) == [] and len(new.shapes) == 0 == len(ledger.shapes), \
        "shapes are forgotten with their context, also one made after it closed"


def test_a_context_with_a_routing_key_per_message_records_beyond_its_shapes_in_full():
    """A publisher with a new routing key every message: the context keeps at most
    ``SHAPES_PER_CONTEXT`` shapes (the gateway's and the writer's memory, one declaration
    per record), the records beyond go in full; the lines are the same either way."""
    from gateway.ledger.encoding import FrameReader
    from gateway.ledger.row_shapes import SHAPES_PER_CONTEXT

    def play(ledger):
        ctx = ledger.context(T0, "/", "u", "0-9-1", "c", 1)
        for i in range(SHAPES_PER_CONTEXT + 10):
            ledger.received(T0 + i, ctx, message(i, routing_key=f"k{i}"), EventKind.ROUTED,
                            [queue("q")])
        return ctx

    ledger, twin = Ledger(container_id="gw"), Ledger(container_id="gw")
    play(ledger)
    play(twin)
    reader = FrameReader()
    got = b"".join(reader.feed(ledger.take_frame(10 ** 6)))
    assert len(ledger.shapes) == len(reader.shapes) == SHAPES_PER_CONTEXT
    assert got == twin.take_lines(10 ** 6)
    assert [json.loads(x)[5] for x in got.splitlines()[1:]] == \
        [f"k{i}" for i in range(SHAPES_PER_CONTEXT + 10)]


def test_arrivals_from_several_origins_and_links_each_keep_their_origin():
    """A forwarded arrival is a row of a shape of its own (its message row's, with the
    two containers): arrivals that alternate between origins, peers and links, and one
    after its link closed and another opened, each read back with their own."""
    ledger = Ledger(container_id="gw")
    ids = iter(range(100, 200))
    ledger.use_gateway_ids(ids.__next__)
    one, two = (ledger.context(T0, "/", "org-a", "1.0", "c9", name) for name in ("l1", "l2"))
    arrivals = [(one, 8, 70, "org-x", "org-a"), (one, 9, 71, "org-x", "org-a"),
                (one, 10, 72, "org-y", "org-a"), (two, 11, 73, "org-x", "org-b"),
                (one, 12, 74, "org-x", "org-a")]
    for link, gid, origin_id, origin, peer in arrivals:
        arrived = message(gid=gid)
        ledger.received(T0, link, arrived, EventKind.ROUTED, [queue("q")])
        ledger.arrived_forwarded(arrived, origin_id, origin, peer)
    ledger.close_context(T0, one)
    three = ledger.context(T0, "/", "org-a", "1.0", "c9", "l3")
    arrived = message(gid=13)
    ledger.received(T0, three, arrived, EventKind.ROUTED, [queue("q")])
    ledger.arrived_forwarded(arrived, 75, "org-x", "org-a")
    got = [(row[2], row[3], row[-4], row[-3], row[-2]) for row in lines(ledger) if row[0] == "m"]
    assert got == [(ctx, gid, origin_id, origin, peer)
                   for ctx, gid, origin_id, origin, peer in arrivals + [(three, 13, 75, "org-x", "org-a")]]


def test_forwarding_events_are_rows_that_read_back_as_their_full_records():
    """Issue 45: ``forwarded``, ``forward_settled`` and a dead-lettering at the source are
    rows (time, gateway id, receipt time) of a shape per event, remote, outcome and reason;
    a remote's reasons beyond ``SHAPES_PER_CONTEXT`` go in full. Through ``take_lines`` and
    through a writer process reading ``take_frame``, the lines are those of the full
    records, field for field."""
    import msgspec

    from gateway.ledger.encoding import FrameReader, json_lines
    from gateway.ledger.row_shapes import SHAPES_PER_CONTEXT, STRUCTS

    def play(ledger):
        ctx = {remote: ledger.forward_context(T0, remote) for remote in ("org-b", "org-c")}
        expected = []
        for i in range(SHAPES_PER_CONTEXT + 8):
            remote = ("org-b", "org-c")[i % 2]
            batch = [message(100 * i + j, created_at=T0 - j) for j in range(3)]
            now = T0 + i
            ledger.forwarded_many(now, batch, remote)
            ledger.forward_settled_many(now, batch, remote, "rejected", f"why {i}")
            ledger.forward_settled_many(now, batch[:1], remote, "accepted")
            ledger.forward_dead_lettered(now, batch[2], remote, "amqp:not-found")
            c = ctx[remote]
            event = STRUCTS["e"]
            expected += [event(now, c, "forwarded", m.gateway_id, None, None, m.created_at, None,
                               None, None, None, None, remote) for m in batch]
            expected += [event(now, c, "forward_settled", m.gateway_id, None, None, m.created_at,
                               None, None, None, f"why {i}", "rejected", remote) for m in batch]
            expected += [event(now, c, "forward_settled", batch[0].gateway_id, None, None,
                               batch[0].created_at, None, None, None, None, "accepted", remote),
                         event(now, c, "dead_lettered", batch[2].gateway_id, None, None,
                               batch[2].created_at, None, None, None, "amqp:not-found", None,
                               remote)]
        return expected

    ledger, twin = Ledger(container_id="gw"), Ledger(container_id="gw")
    expected = play(ledger)
    play(twin)
    rows = [x for x in ledger.records if x.__struct_config__.tag is None]
    assert len(rows) > 0.8 * len(expected)
    assert all(len(msgspec.structs.astuple(x)) == 4 for x in rows), "shape id and 3 values"
    want = json_lines([(x.__struct_config__.tag, *msgspec.structs.astuple(x))
                       for x in twin.contexts.values()]) + json_lines(
        [(x.__struct_config__.tag, *msgspec.structs.astuple(x)) for x in expected])
    reader = FrameReader()
    got = b"".join(reader.feed(ledger.take_frame(10 ** 6)))
    assert reader.error is None
    assert got == want
    assert twin.take_lines(10 ** 6) == want


@pytest.mark.parametrize("closed", [False, True])
def test_settled_many_writes_what_settled_writes_for_each_entry(closed):
    """A 0-9-1 multiple ack's one call: the same frames as a ``settled`` per entry, in
    order, each in its own queue; an entry without a queue (gone with it) is skipped; after
    the context closed, each record gets a shape of its own, as ``settled`` gives it."""
    qa, qb = SimpleNamespace(name="a"), SimpleNamespace(name="b")
    entries = [SimpleNamespace(message=message(gid), delivery_count=gid % 3, queue=q)
               for gid, q in enumerate([qa, qa, None, qb, qa, qb, qb], start=1)]
    frames = []
    for one_call in (False, True):
        ledger = Ledger(container_id="gw")
        ctx = ledger.context(T0, "/", "ann", "0-9-1", "c1", 1)
        if closed:
            ledger.close_context(T0, ctx)
        if one_call:
            ledger.settled_many(T0 + 1, ctx, entries, "accepted")
        else:
            for entry in entries:
                if entry.queue is not None:
                    ledger.settled(T0 + 1, ctx, entry, entry.queue.name, "accepted")
        frames.append(ledger.take_frame(10 ** 6) + ledger.take_frame())
    assert frames[0] == frames[1]
    assert len(frames[0]) > 100
