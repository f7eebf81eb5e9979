"""LedgerFeed: the hot path's buffer, shipped as batch frames to the writer process."""
from __future__ import annotations

import json

from gateway.ledger.batches import BatchKind, BatchReader
from gateway.ledger.encoding import ROW_FIELDS
from gateway.ledger.feed import LedgerFeed
from gateway.ledger.records import EventKind

HEADERS = ROW_FIELDS.index("headers")


def _frames(feed: LedgerFeed) -> list:
    return BatchReader().feed(feed.take_frame())


def test_recorded_rows_are_shipped_and_the_buffer_emptied() -> None:
    feed = LedgerFeed(container_id="gw")
    feed.record(EventKind.RECEIVED, 10.0, vhost="/", queue="q", gateway_id=7, size=3)
    assert feed.buffered == 1
    [(kind, rows)] = _frames(feed)
    assert kind is BatchKind.ROWS
    assert rows[0][:3] == (10.0, EventKind.RECEIVED, "/") and rows[0][ROW_FIELDS.index("size")] == 3
    assert feed.buffered == 0
    assert _frames(feed) == [(BatchKind.ROWS, [])]  # a tick
    assert (feed.batches, feed.rows_sent) == (2, 1)


def test_headers_are_not_shipped_without_an_allowlist() -> None:
    feed = LedgerFeed(container_id="gw")
    feed.record(EventKind.RECEIVED, 1.0, headers={"big": "x" * 1000})
    [(_, rows)] = _frames(feed)
    assert rows[0][HEADERS] is None


def test_headers_are_shipped_with_an_allowlist() -> None:
    feed = LedgerFeed(container_id="gw", header_allowlist=["tenant"])
    feed.record(EventKind.RECEIVED, 1.0, headers={"tenant": "acme"})
    [(_, rows)] = _frames(feed)
    assert rows[0][HEADERS] == {"tenant": "acme"}


class _Unpicklable:
    def __reduce__(self):
        raise TypeError("not today")

    def __str__(self) -> str:
        return "odd-id"


def test_a_batch_that_does_not_pickle_is_encoded_here() -> None:
    feed = LedgerFeed(container_id="gw", header_allowlist=["tenant"])
    feed.record(EventKind.RECEIVED, 2.0, message_id=_Unpicklable(), headers={"tenant": "acme"})
    feed.record(EventKind.ROUTED, 2.0, routed_to=["q"])
    [(kind, (data, count))] = _frames(feed)
    assert kind is BatchKind.LINES and count == 2
    first, second = (json.loads(line) for line in data.decode().splitlines())
    assert first["message_id"] == "odd-id" and first["headers"] == {"tenant": "acme"}
    assert first["container"] == "gw" and second["routed_to"] == ["q"]
    assert feed.batches_encoded_here == 1


def test_disabled_feed_records_nothing() -> None:
    feed = LedgerFeed(container_id="gw", enabled=False)
    feed.record(EventKind.RECEIVED, 1.0)
    assert feed.buffered == 0


def test_every_row_form_survives_the_trip_to_the_writer_process() -> None:
    from gateway.ledger import Protocol
    from gateway.ledger.buffer import ledger_context, message_key
    from gateway.ledger.encoding import RowEncoder

    feed = LedgerFeed(container_id="gw")
    feed.record(EventKind.RECEIVED, 1.0, gateway_id=5, routed_to=("q",), then=EventKind.ROUTED)
    context = ledger_context("/", "g", Protocol.AMQP091, "c1", 1)
    key = message_key(Protocol.AMQP091, "", "q", "m", None, 5, 3, 1.0)
    row = feed.delivered(2.0, context, key, "q", 0)
    feed.settled(row, 3.0, context, key, "q", 0, "accepted")  # into the delivered row
    feed.settled(None, 4.0, context, key, "q", 0, "released")  # a row of its own
    [(kind, rows)] = _frames(feed)
    data, kept = RowEncoder("gw").encode(rows)
    events = [json.loads(line)["event"] for line in data.decode().splitlines()]
    assert kind is BatchKind.ROWS and kept == 5
    assert events == ["received", "routed", "delivered", "settled", "settled"]


def test_publish_rows_are_referred_to_by_gateway_id_while_the_writer_keeps_them() -> None:
    """``gid_from``: a message with a gateway id from it on was published after the oldest
    frame still within ``KEY_REF_SECONDS``, so the writer has its publish row or gets it
    before the delivery's row."""
    from gateway.ledger.feed import KEY_REF_SECONDS

    ids = iter(range(1, 1000))
    feed = LedgerFeed(container_id="gw")
    assert feed.gid_from == 0, "nothing shipped yet: every publish row is still to come"
    feed.use_gateway_ids(lambda: next(ids))
    feed.take_frame(100.0)  # takes id 1: publishes from 2 on come after it
    assert feed.gid_from == 1
    feed.take_frame(100.1)  # id 2
    feed.take_frame(100.0 + KEY_REF_SECONDS - 0.01)  # id 3
    assert feed.gid_from == 1, "the frame at 100.0 is still within the window"
    feed.take_frame(100.0 + KEY_REF_SECONDS + 0.05)  # id 4
    assert feed.gid_from == 2, "what was published before 100.1 may be gone"
    feed.forget_taken()  # a new writer process: what is shipped from now on only
    assert feed.gid_from == 4
    feed.take_frame(101.6)  # id 5
    assert feed.gid_from == 4, "never back"


def test_without_gateway_ids_no_reference_reaches_past_a_frame() -> None:
    feed = LedgerFeed(container_id="gw")
    feed.take_frame(100.0)
    assert feed.gid_from > 1 << 62


def test_a_delivery_seconds_behind_its_publish_refers_to_it_and_is_written_in_full() -> None:
    """A backlog: the delivery comes 3.5 s after the publish, frames every 0.1 s. The
    delivered row holds the gateway id only (no key built from the message), and the
    writer, which kept the publish row, writes the delivery with the message's fields."""
    from gateway.ledger import Protocol
    from gateway.ledger.buffer import ledger_context
    from gateway.ledger.encoding import RowEncoder

    gid = iter(range(100, 10_000))
    feed = LedgerFeed(container_id="gw")
    feed.use_gateway_ids(lambda: next(gid))
    encoder = RowEncoder("gw")
    context = ledger_context("/", "g", Protocol.AMQP091, "c1", 1)
    feed.take_frame(99.9)
    published = next(gid)  # after the mark just taken
    feed.rows.append((context, "", "q", "m-1", "c-1", published, 3, 100.0, ("q",)))  # routed
    lines = []
    now = 100.0
    while now < 103.5:
        now = round(now + 0.1, 1)
        # other messages published meanwhile (the writer rotates its kept rows by them)
        feed.rows.append((context, "", "q", None, None, next(gid), 3, now, ("q",)))
        [(_, rows)] = BatchReader().feed(feed.take_frame(now))
        lines += encoder.encode(rows)[0].decode().splitlines()
    assert feed.gid_from <= published, "still within KEY_REF_SECONDS: referred to by id"
    feed.rows.append((now, context, published, "q", 0))  # what deliver() buffers then
    [(_, rows)] = BatchReader().feed(feed.take_frame(now + 0.1))
    lines += encoder.encode(rows)[0].decode().splitlines()
    delivered = [json.loads(line) for line in lines if '"delivered"' in line]
    assert len(delivered) == 1
    assert delivered[0]["message_id"] == "m-1" and delivered[0]["correlation_id"] == "c-1"
    assert delivered[0]["routing_key"] == "q" and delivered[0]["size"] == 3
    assert delivered[0]["latency_us"] == 3_500_000
    assert encoder.published.unknown == 0
