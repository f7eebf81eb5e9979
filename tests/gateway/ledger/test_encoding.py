"""Rows -> JSON Lines: field mapping, sampling, allow-list, the general fallback path."""
from __future__ import annotations

import enum
import json
import marshal

import pytest
from hypothesis import given, strategies as st

from gateway.ledger import EventKind, LedgerRecord, Outcome
from gateway.ledger.encoding import ROW_FIELDS, RowEncoder, routed_publish_row, sample_threshold


def row(**fields):
    values = {name: None for name in ROW_FIELDS}
    values.update(now=1000.0, event=EventKind.RECEIVED)
    values.update(fields)
    return tuple(values[name] for name in ROW_FIELDS)


def lines(data: bytes) -> list[dict]:
    assert data.endswith(b"\n")
    return [json.loads(line) for line in data.decode().split("\n")[:-1]]


def test_every_row_field_lands_in_its_column():
    enc = RowEncoder("gw-A", ["x-tenant"])
    data, kept = enc.encode([row(
        now=1000.25, event=EventKind.SETTLED, vhost="/", user="u", proto_in="0-9-1",
        proto_out="1.0", connection="c1", link=3, exchange="x", routing_key="rk",
        address="/queues/q", queue="q", routed_to=["q"], message_id="m", correlation_id="c",
        gateway_id="g-1", origin_id="o-1", peer_container="gw-B", size=10,
        delivery_count=2, outcome=Outcome.ACCEPTED, reason="why", received_at=1000.0,
        headers={"x-tenant": "acme", "secret": "no"},
    )])
    assert kept == 1
    [obj] = lines(data)
    assert obj == {
        "v": 1, "container": "gw-A", "ts_us": 1_000_250_000, "event": "settled", "vhost": "/",
        "user": "u", "proto_in": "0-9-1", "proto_out": "1.0", "connection": "c1", "link": "3",
        "exchange": "x", "routing_key": "rk", "address": "/queues/q", "queue": "q",
        "routed_to": ["q"], "message_id": "m", "correlation_id": "c", "gateway_id": "g-1",
        "origin_id": "o-1", "peer_container": "gw-B", "size": 10, "delivery_count": 2,
        "outcome": "accepted", "reason": "why", "latency_us": 250_000,
        "headers": {"x-tenant": "acme"},
    }


def test_headers_outside_the_allowlist_are_never_written():
    data, _ = RowEncoder("gw", []).encode([row(headers={"x-tenant": "acme"})])
    assert b"acme" not in data and "headers" not in lines(data)[0]


def test_odd_value_types_take_the_general_path():
    class Colour(enum.Enum):
        RED = 1

    data, kept = RowEncoder("gw").encode([row(size="12", vhost=Colour.RED, message_id=b"\xff")])
    [obj] = lines(data)
    assert kept == 1 and obj["size"] == 12 and obj["vhost"] == "1" and obj["message_id"] == "\ufffd"


def test_records_and_rows_encode_alike():
    enc = RowEncoder("gw", ["h"])
    rec = LedgerRecord(ts_us=5_000_000, event=EventKind.DELIVERED, container="ignored",
                       queue="q", size=3, latency_us=7, headers={"h": 1, "k": 2})
    data, _ = enc.encode([rec, row(now=5.0, event=EventKind.DELIVERED, queue="q", size=3,
                                   received_at=5.0 - 7e-6, headers={"h": 1, "k": 2})])
    a, b = lines(data)
    assert a == b == {"v": 1, "container": "gw", "ts_us": 5_000_000, "event": "delivered",
                      "queue": "q", "size": 3, "latency_us": 7, "headers": {"h": "1"}}


def test_sampling_keeps_or_drops_all_events_of_a_message():
    enc = RowEncoder("gw", threshold=sample_threshold(0.3))
    rows = []
    for i in range(2000):
        for kind in (EventKind.RECEIVED, EventKind.DELIVERED, EventKind.SETTLED):
            rows.append(row(event=kind, gateway_id=f"b-{i}"))
    rows.append(row(event=EventKind.REFUSED))  # no id: always kept
    data, kept = enc.encode(rows)
    objs = lines(data)
    assert len(objs) == kept
    per_id: dict[str, int] = {}
    for o in objs:
        if "gateway_id" in o:
            per_id[o["gateway_id"]] = per_id.get(o["gateway_id"], 0) + 1
    assert set(per_id.values()) == {3}
    assert 450 < len(per_id) < 750  # ~30 % of 2000
    assert objs[-1]["event"] == "refused"


def test_sampling_decides_on_the_origin_id_when_present():
    enc = RowEncoder("gw", threshold=sample_threshold(0.5))
    decisions = {enc.keep(f"local-{i}", "origin-7") for i in range(50)}
    assert len(decisions) == 1


def test_sample_rate_bounds():
    assert sample_threshold(1.0) is None and sample_threshold(0.0) == 0
    with pytest.raises(ValueError) as info:
        sample_threshold(1.5)
    assert "1.5" in str(info.value)


@given(st.lists(st.tuples(
    st.one_of(st.none(), st.text()), st.one_of(st.none(), st.text()),
    st.one_of(st.none(), st.integers(0, 2 ** 62)),
    st.dictionaries(st.text(max_size=3), st.one_of(st.text(), st.binary(), st.integers())),
), max_size=20))
def test_any_text_survives_as_one_line_each(items):
    enc = RowEncoder("gw-\n\"", ["a", "b"])
    rows = [row(user=u, message_id=m, size=s, headers=h) for u, m, s, h in items]
    data, kept = enc.encode(rows)
    assert kept == len(items)
    objs = lines(data) if data else []
    assert len(objs) == len(items)
    for obj, (u, m, s, h) in zip(objs, items):
        assert obj["container"] == "gw-\n\"" and obj.get("user") == u
        assert obj.get("message_id") == m and obj.get("size") == s


def test_integer_gateway_ids_are_text_on_the_fast_path(monkeypatch):
    """The broker's gateway ids are ints: stored as text without the general fallback."""
    enc = RowEncoder("gw-A", (), sample_threshold(0.5))
    monkeypatch.setattr(enc, "_object", lambda r: pytest.fail("general path taken"))
    data, kept = enc.encode([row(gateway_id=i, origin_id=None) for i in range(1, 201)])
    objs = lines(data)
    assert 0 < kept < 200 and len(objs) == kept
    assert all(isinstance(o["gateway_id"], str) and o["gateway_id"].isdigit() for o in objs)


def test_a_row_with_two_events_is_two_records():
    from gateway.ledger.buffer import EventBuffer

    buf = EventBuffer()
    buf.record(EventKind.RECEIVED, 1000.5, vhost="/", exchange="x", routing_key="k", gateway_id=7,
               size=3, routed_to=["q1", "q2"], reason=None, headers={"x-tenant": "acme"},
               then=EventKind.ROUTED)
    buf.record(EventKind.RECEIVED, 1001.0, gateway_id=8, reason="queue full",
               then=EventKind.REFUSED)
    data, kept = RowEncoder("gw", ["x-tenant"]).encode(buf.take())
    received, routed, received2, refused = lines(data)
    assert kept == 4
    assert received["event"] == "received" and received["headers"] == {"x-tenant": "acme"}
    assert "routed_to" not in received and "reason" not in received
    assert routed["event"] == "routed" and routed["routed_to"] == ["q1", "q2"]
    assert "headers" not in routed
    assert {k: v for k, v in received.items() if k not in ("event", "headers")} == \
        {k: v for k, v in routed.items() if k not in ("event", "routed_to")}
    assert received2["event"] == "received" and "reason" not in received2
    assert refused == dict(received2, event="refused", reason="queue full")


def test_buffered_rows_hold_plain_values_only():
    from gateway.ledger import Protocol
    from gateway.ledger.buffer import EventBuffer

    buf = EventBuffer()
    buf.record(EventKind.SETTLED, 1.0, proto_in=Protocol.AMQP091, proto_out=Protocol.AMQP10,
               outcome=Outcome.ACCEPTED)
    [item] = buf.take()
    assert {type(v) for v in item} <= {float, str, type(None)}


@pytest.mark.parametrize("event, outcome, reason", [
    (EventKind.DELIVERED, None, None),
    (EventKind.SETTLED, Outcome.REJECTED, "link closed"),
])
def test_a_compact_delivery_row_is_written_as_record_would_write_it(event, outcome, reason):
    from gateway.ledger import Protocol
    from gateway.ledger.buffer import EventBuffer, ledger_context, message_key

    context = ledger_context("/", "bob", Protocol.AMQP10, "c7", "link-1", "/queues/q")
    key = message_key(Protocol.AMQP091, "amq.topic", "a.b", "m-1", "c-1", 42, 10, 1000.0)
    compact, full = EventBuffer(), EventBuffer()
    if event is EventKind.DELIVERED:
        compact.delivered(1000.5, context, key, "q", 2)
    else:
        compact.settled(None, 1000.5, context, key, "q", 2, outcome, reason)
    fields = dict(vhost="/", user="bob", proto_in=Protocol.AMQP091, proto_out=Protocol.AMQP10,
                  connection="c7", link="link-1", address="/queues/q", queue="q",
                  message_id="m-1", correlation_id="c-1", gateway_id=42, size=10,
                  delivery_count=2, outcome=outcome, reason=reason, received_at=1000.0)
    if event is EventKind.DELIVERED:  # a delivery names the publish's exchange and key
        fields.update(exchange="amq.topic", routing_key="a.b")
    full.record(event, 1000.5, **fields)
    encoder = RowEncoder("gw")
    assert encoder.encode(compact.take()) == encoder.encode(full.take())


@pytest.mark.parametrize("sample_rate", [1.0, 0.999])  # column by column; the general path
def test_a_settled_many_row_is_written_as_its_settled_rows_would_be(sample_rate):
    from gateway.ledger import Protocol
    from gateway.ledger.buffer import ledger_context, message_key

    context = ledger_context("/", "bob", Protocol.AMQP091, "c7", 1)
    delivered = [(1000.5, context, message_key(Protocol.AMQP091, "", "q", f"m-{i}", None, i,
                                               10, 1000.0), "q", 0) for i in range(3)]
    one_each = delivered + [(1001.0, row, "accepted", None) for row in delivered]
    together = delivered + [(1001.0, tuple(delivered), "accepted")]
    encoder = RowEncoder("gw", threshold=sample_threshold(sample_rate))
    data, count = encoder.encode(together)
    assert (data, count) == encoder.encode(one_each) and count == 6
    assert [x["event"] for x in lines(data)] == ["delivered"] * 3 + ["settled"] * 3
    assert encoder.encode([None] + together) == (data, count), "an empty place first"


def test_a_compact_publish_row_is_written_as_record_would_write_it():
    from gateway.ledger import Protocol
    from gateway.ledger.buffer import EventBuffer, ledger_context, message_key

    context = ledger_context("/", "ann", Protocol.AMQP10, "c3", "sender", "/exchanges/x/k")
    key = message_key(Protocol.AMQP10, "x", "k", 7, None, 99, 12, 1000.0)
    compact, full = EventBuffer(), EventBuffer()
    compact.publish_event(EventKind.RECEIVED, EventKind.ROUTED, 1000.0, context, key, ("q1",),
                          None, {"x-tenant": "acme"})
    full.record(EventKind.RECEIVED, 1000.0, vhost="/", user="ann", proto_in=Protocol.AMQP10,
                connection="c3", link="sender", exchange="x", routing_key="k",
                address="/exchanges/x/k", routed_to=("q1",), message_id=7, gateway_id=99,
                size=12, headers={"x-tenant": "acme"}, then=EventKind.ROUTED)
    encoder = RowEncoder("gw", ["x-tenant"])
    assert encoder.encode(compact.take()) == encoder.encode(full.take())


# What compact rows hold, mostly the usual types and now and then another (bytes and
# integer ids, a bool count): the fast path (CompactLines) must write what the general
# path writes, or leave the row to it.
_STR = st.one_of(st.none(), st.text(max_size=6))
_ID = st.one_of(_STR, st.integers(0, 2**40), st.binary(max_size=3), st.booleans())
_COUNT = st.one_of(st.none(), st.integers(0, 9), st.booleans())
_TIME = st.one_of(st.floats(0, 2e9, allow_nan=False), st.integers(0, 2**31))
_CONTEXT = st.tuples(_STR, _STR, _STR, _STR, _ID, _STR)
_KEY = st.tuples(_STR, _STR, _STR, _ID, _ID, _ID, st.one_of(st.none(), st.integers(0, 9999)),
                 st.one_of(st.none(), _TIME))
_PAIRS = st.sampled_from(["received>routed", "received>unroutable", "received>refused"])
_ANY = st.one_of(_STR, st.integers(0, 3))


@st.composite
def _compact_rows(draw, key=_KEY, context=_CONTEXT, count=_COUNT, text=_STR):
    contexts = draw(st.lists(context, min_size=1, max_size=3))
    keys = draw(st.lists(key, min_size=1, max_size=3))
    deliveries: list = []  # delivered rows, of this batch or (not in rows) an earlier one
    rows = []
    routed_rows = []  # the publish rows the batch's routed rows stand for
    for _ in range(draw(st.integers(1, 8))):
        context, key = draw(st.sampled_from(contexts)), draw(st.sampled_from(keys))
        now = draw(_TIME)
        form = draw(st.sampled_from(["delivered", "settled", "publish", "routed"]))
        if form == "delivered":
            if len(key) == 14 and type(key[5]) is int and (key in rows or key in routed_rows) \
                    and draw(st.booleans()):
                key = key[5]  # the publish row went out earlier: referred to by gateway id
            row = (now, context, key, draw(text), draw(count))
            deliveries.append(row)
            if draw(st.booleans()):
                rows.append(row)
        elif form == "settled":
            delivered = draw(st.sampled_from(deliveries)) if deliveries and draw(st.booleans()) \
                else (None, context, key, draw(text), draw(count))
            rows.append((now, delivered, draw(text), draw(text)))
        elif form == "publish":
            routed = draw(st.one_of(st.none(), st.tuples(st.text(max_size=4)),
                                    st.lists(_ANY, max_size=2).map(tuple)))
            row = key[:8] + (now, draw(_PAIRS), context, routed, draw(text),
                         draw(st.one_of(st.none(), st.just({"x-tenant": "acme", "k": 1}))))
            keys.append(row)  # a publish row is its message's key
            rows.append(row)
        elif form == "routed":
            routed = draw(st.one_of(st.none(), st.tuples(st.text(max_size=4))))
            row = (context,) + key[1:7] + (now, routed)
            routed_rows.append(routed_publish_row(row))
            keys.append(routed_rows[-1])  # what the writer refers to by its gateway id
            rows.append(row)
    return rows


@given(rows=_compact_rows(), allowlist=st.sampled_from([(), ("x-tenant",)]))
def test_compact_rows_are_written_as_the_general_path_writes_them(rows, allowlist):
    encoder = RowEncoder("gw", allowlist)
    assert encoder.encode(rows) == encoder.encode_full(rows)


# What the gateway ships (strings, integer gateway ids and sizes, float times, counts):
# rows the column-by-column path writes (CompactLines.parts) unless a slice holds a
# reason to go row by row.
_TEXT = st.one_of(st.none(), st.text(max_size=4))
_USUAL_KEY = st.tuples(_TEXT, _TEXT, _TEXT, _TEXT, _TEXT, st.integers(0, 2**62),
                       st.one_of(st.none(), st.integers(0, 9999)),
                       st.one_of(st.none(), st.floats(0, 2e9, allow_nan=False)))
_USUAL_CONTEXT = st.tuples(_TEXT, _TEXT, _TEXT, _TEXT, st.one_of(_TEXT, st.integers(0, 9)), _TEXT)
_USUAL_ROWS = _compact_rows(key=_USUAL_KEY, context=_USUAL_CONTEXT,
                            count=st.one_of(st.none(), st.integers(0, 9)), text=_TEXT)


def _not_rotating(encoder: RowEncoder) -> RowEncoder:
    """An encoder whose kept publish rows do not rotate within the test's times (a slice
    that rotates them is written row by row)."""
    encoder.published.rotate_at = float("inf")
    return encoder


@given(rows=_USUAL_ROWS, other=_USUAL_ROWS, allowlist=st.sampled_from([(), ("x-tenant",)]))
def test_usual_rows_are_written_column_by_column_as_the_general_path_writes_them(
        rows, other, allowlist):
    encoder = _not_rotating(RowEncoder("gw", allowlist))
    for batch in (rows, other, marshal.loads(marshal.dumps(other + rows))):
        assert encoder.encode(batch) == encoder.encode_full(batch)


def test_a_gateway_batch_is_written_column_by_column(monkeypatch):
    """Publish rows, deliveries referring to theirs by identity, by gateway id and by copy,
    settlements: one slice, no row written row by row, the same bytes."""
    from gateway.ledger.buffer import ledger_context
    from gateway.ledger.encoding import CompactLines

    publisher = ledger_context("/", "ann", None, "c1", 1, None)
    consumer = ledger_context("/", "bob", "0-9-1", "c2", 1, None)
    earlier = [("0-9-1", "", "q", None, "c-%d" % i, 100 + i, 10, 999.0, 999.5,
                "received>routed", publisher, ("q",), None, None) for i in range(3)]
    encoder = _not_rotating(RowEncoder("gw"))
    encoder.encode(earlier)
    now = [("0-9-1", "x", "k", "m-%d" % i, None, 200 + i, 12, 1000.0, 1000.0,
             "received>routed", publisher, ("q",), None, None) for i in range(3)]
    delivered = [(1000.5, consumer, now[0], "q", 0), (1000.5, consumer, 101, "q", 0),
                 (1000.5, consumer, marshal.loads(marshal.dumps(earlier[2])), "q", 1)]
    settled = [(1001.0, row, "accepted", None) for row in delivered]
    batch = now + delivered + settled
    by_rows = []
    monkeypatch.setattr(CompactLines, "_row_by_row",
                        lambda self, items, general: by_rows.append(items) or ([], 0))
    data, count = encoder.encode(batch)
    assert not by_rows and count == 12
    assert (data, count) == encoder.encode_full(batch)
    lines = [json.loads(line) for line in data.splitlines()]
    assert [line["gateway_id"] for line in lines] == \
        ["200", "200", "201", "201", "202", "202", "200", "101", "102", "200", "101", "102"]
    assert lines[7]["correlation_id"] == "c-1" and lines[8]["latency_us"] == 1_500_000


@given(rows=_compact_rows(), other=_compact_rows(),
       allowlist=st.sampled_from([(), ("x-tenant",)]))
def test_later_batches_are_written_as_the_general_path_writes_them(rows, other, allowlist):
    """One encoder keeps the publish rows it wrote (``PublishedRows``): a later batch
    with copies of those keys (marshal makes new tuples), or with other keys under the
    same gateway ids, is still written as the general path writes it."""
    encoder = RowEncoder("gw", allowlist)
    copies = marshal.loads(marshal.dumps(rows))
    for batch in (rows, copies, other, marshal.loads(marshal.dumps(other + rows))):
        assert encoder.encode(batch) == encoder.encode_full(batch)


def test_a_delivery_that_refers_to_its_publish_row_by_gateway_id_is_written_in_full():
    """The gateway sends a delivered row the gateway id of a key it shipped in an earlier
    frame (``EventBuffer.gid_from``); the writer keeps the publish rows it was sent."""
    from gateway.ledger.buffer import ledger_context

    publisher = ledger_context("/", "ann", None, "c1", 1, None)
    consumer = ledger_context("/", "bob", "1.0", "c2", "r", "/queues/q")
    publish = ("0-9-1", "x", "k", "m-1", None, 7001, 12, 1000.0, 1000.0, "received>routed",
               publisher, ("q",), None, None)
    by_key = (1000.5, consumer, publish, "q", 0)
    by_id = (1000.5, consumer, 7001, "q", 0)
    expected = RowEncoder("gw").encode([publish, by_key, (1000.6, by_key, "accepted", None)])
    encoder = RowEncoder("gw")
    first = encoder.encode([publish])  # an earlier frame
    later = encoder.encode(marshal.loads(marshal.dumps([by_id, (1000.6, by_id, "accepted", None)])))
    assert (first[0] + later[0], first[1] + later[1]) == expected
    assert encoder.encode_full([by_id])[0] == RowEncoder("gw").encode_full([publish, by_key])[0] \
        .split(b"\n", 2)[2]


def test_deliveries_made_while_their_publish_was_routed_refer_to_its_row_by_gateway_id():
    """A publish reserves its row's place before routing delivers (``buffer``): the
    deliveries that follow it in the same batch give its gateway id, and are written as
    with the key itself, column by column and row by row alike; a place left empty (a
    publish that failed) writes nothing."""
    from gateway.ledger.buffer import ledger_context

    publisher = ledger_context("/", "ann", None, "c1", 1, None)
    consumer = ledger_context("/", "bob", "1.0", "c2", "r", "/queues/q")
    batch, expected = [], []
    for i in range(40):  # enough for one kind's columns
        now = 1000.0 + i / 100  # within PUBLISHED_KEEP_SECONDS: no rotation
        publish = ("0-9-1", "x", "k", f"m-{i}", None, 8000 + i, 12, now, now,
                   "received>routed", publisher, ("q",), None, None)
        for rows, key in ((batch, 8000 + i), (expected, publish)):
            delivered = (now, consumer, key, "q", 0)
            rows += [publish, delivered, (now + 0.005, delivered, "accepted", None)]
        if i % 7 == 0:
            batch.append(None)
    shipped = marshal.loads(marshal.dumps(batch))  # as the writer process gets it

    def general(item: object, lines: list) -> None:
        raise AssertionError(f"written row by row: {item!r}")

    encoder = RowEncoder("gw")
    encoder.encode(batch[:1])  # a publish row before: the next ones need not rotate
    _parts, count = encoder.batch().parts(shipped[3:], general)  # column by column
    assert count == 4 * 39
    data, kept = RowEncoder("gw").encode(shipped)
    assert (data, kept) == RowEncoder("gw").encode(expected) \
        == RowEncoder("gw").encode_full(expected)
    assert RowEncoder("gw").encode_full(shipped) == (data, kept)
    assert kept == 4 * 40 and b"null" not in data
    encoder = RowEncoder("gw")
    encoder.encode(shipped)
    assert encoder.published.unknown == 0


def test_a_reference_before_its_publish_row_is_written_with_what_it_has():
    """Only a publish row before a reference resolves it (row by row the writer has not
    seen a later one yet); column by column writes the same."""
    from gateway.ledger.buffer import ledger_context

    publisher = ledger_context("/", "ann", None, "c1", 1, None)
    consumer = ledger_context("/", "bob", "1.0", "c2", "r", "/queues/q")
    publish = ("0-9-1", "x", "k", "m-1", None, 9001, 12, 1000.0, 1000.0, "received>routed",
               publisher, ("q",), None, None)
    batch = [(1000.0, consumer, 9001, "q", 0), publish]
    encoder = RowEncoder("gw")
    data, kept = encoder.encode(batch)
    assert (data, kept) == RowEncoder("gw").encode_full(batch)
    delivered = lines(data)[0]
    assert delivered["event"] == "delivered" and "message_id" not in delivered
    assert encoder.published.unknown == 1


def test_a_reference_to_a_publish_row_not_kept_writes_what_the_row_has():
    """A writer restarted, or a frame dropped: the event is still written, with the
    gateway id and the delivery's own fields, and counted."""
    from gateway.ledger.buffer import ledger_context

    consumer = ledger_context("/", "bob", "1.0", "c2", "r", "/queues/q")
    encoder = RowEncoder("gw")
    data, kept = encoder.encode([(1000.5, consumer, 424242, "q", 1)])
    [line] = lines(data)
    assert kept == 1 and line["gateway_id"] == "424242" and line["queue"] == "q"
    assert line["event"] == "delivered" and "exchange" not in line
    assert encoder.published.unknown == 1


def test_publish_rows_are_kept_two_to_four_seconds_of_their_own_time():
    from gateway.ledger.encoding import PUBLISHED_KEEP_SECONDS, PublishedRows

    kept = PublishedRows()

    def publish(gateway_id: int, now: float) -> tuple:
        row = ("0-9-1", "", "q", None, None, gateway_id, 1, now, now, "received>routed",
               ("/", "u", None, "c", 1, None), ("q",), None, None)
        kept.add(row)
        return row

    first = publish(1, 100.0)
    publish(2, 100.0 + PUBLISHED_KEEP_SECONDS)  # the first is in the older half now
    assert kept.key(1) is first
    publish(3, 100.0 + 2 * PUBLISHED_KEEP_SECONDS)
    assert kept.key(1) == (None, None, None, None, None, 1, None, None)
    assert kept.key(3)[5] == 3 and kept.key(("a",)) == ("a",)
