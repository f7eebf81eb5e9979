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


def test_keys_are_referred_to_by_gateway_id_once_shipped_and_while_recent() -> None:
    from gateway.ledger.buffer import key_ref
    from gateway.ledger.feed import KEY_REF_SECONDS

    feed = LedgerFeed(container_id="gw")
    row = ("0-9-1", "", "q", None, None, 77, 1, 100.0, 100.0, "received>routed",
           ("/", "u", None, "c", 1, None), ("q",), None, None)
    assert key_ref(feed, row) is row, "not shipped yet"
    feed.take_frame(100.05)
    assert key_ref(feed, row) == 77
    assert key_ref(feed, row[:8]) == row[:8], "a key without a publish row: never"
    feed.take_frame(100.0 + KEY_REF_SECONDS + 0.01)
    assert key_ref(feed, row) is row, "older than the writer is sure to keep"
    fresh = row[:8] + (101.5,) + row[9:]
    feed.forget_shipped()
    assert key_ref(feed, fresh) is fresh, "a new writer process was not sent it"
    feed.take_frame(101.6)
    assert key_ref(feed, fresh) is fresh and key_ref(feed, row[:8] + (101.55,) + row[9:]) == 77
