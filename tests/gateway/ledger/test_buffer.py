"""EventBuffer: the compact rows, written as the full rows of the same events are."""
from __future__ import annotations

import marshal

import pytest

from gateway.ledger import Outcome, Protocol
from gateway.ledger.batches import BatchReader, rows_frame
from gateway.ledger.buffer import (KEY_LENGTH, PUBLISH_ROW_LENGTH, EventBuffer, ledger_context,
                                   message_key)
from gateway.ledger.encoding import RowEncoder
from gateway.ledger.records import EventKind

CONTEXT = ledger_context("/", "bob", Protocol.AMQP10, "c7", "link-1", "/queues/q")
KEY = message_key(Protocol.AMQP091, "amq.topic", "a.b", "m-1", None, 42, 10, 1000.0)


def _written(items: list) -> list[bytes]:
    data, count = RowEncoder("gw").encode(items)
    lines = data.splitlines()
    assert len(lines) == count
    return lines


def _two_rows(settle_outcome: Outcome, reason: str | None) -> list[bytes]:
    """The two events as full rows (``record``), the form every compact row must match."""
    buf = EventBuffer()
    fields = dict(vhost="/", user="bob", proto_in=Protocol.AMQP091, proto_out=Protocol.AMQP10,
                  connection="c7", link="link-1", address="/queues/q", queue="q",
                  message_id="m-1", gateway_id=42, size=10, delivery_count=1, received_at=1000.0)
    buf.record(EventKind.DELIVERED, 1000.5, exchange="amq.topic", routing_key="a.b", **fields)
    buf.record(EventKind.SETTLED, 1000.75, outcome=settle_outcome, reason=reason, **fields)
    return _written(buf.take())


@pytest.mark.parametrize("outcome, reason", [(Outcome.ACCEPTED, None),
                                             (Outcome.RELEASED, "link closed")])
def test_a_settlement_refers_to_its_delivery_row(outcome, reason):
    buf = EventBuffer()
    row = buf.delivered(1000.5, CONTEXT, KEY, "q", 1)
    buf.settled(row, 1000.75, CONTEXT, KEY, "q", 1, outcome, reason)
    items = buf.take()
    assert items == [row, (1000.75, row, outcome.value, reason)]
    assert _written(items) == _two_rows(outcome, reason)


def test_a_settlement_after_the_flush_is_written_from_its_delivery_row():
    buf = EventBuffer()
    row = buf.delivered(1000.5, CONTEXT, KEY, "q", 1)
    first = buf.take()
    # the fields given here are the delivery's: its row is what the settlement uses
    buf.settled(row, 1000.75, CONTEXT, KEY, "q", 1, Outcome.ACCEPTED)
    second = buf.take()
    assert len(first) == len(second) == 1
    assert _written(first) + _written(second) == _two_rows(Outcome.ACCEPTED, None)


def test_a_publish_row_is_the_key_of_its_deliveries():
    buf = EventBuffer()
    publish = buf.publish_event(EventKind.RECEIVED, EventKind.ROUTED, 1000.0, CONTEXT, KEY,
                                ("q",))
    assert publish[:KEY_LENGTH] == KEY and len(publish) == PUBLISH_ROW_LENGTH
    row = buf.delivered(1000.5, CONTEXT, publish, "q", 1)
    buf.settled(row, 1000.75, CONTEXT, publish, "q", 1, Outcome.ACCEPTED)
    keyed = EventBuffer()
    keyed.delivered(1000.5, CONTEXT, KEY, "q", 1)
    keyed.settled(None, 1000.75, CONTEXT, KEY, "q", 1, Outcome.ACCEPTED)
    assert _written(buf.take())[2:] == _written(keyed.take()) == _two_rows(Outcome.ACCEPTED, None)


def test_each_settlement_is_recorded_and_without_a_row_settled_still_records():
    buf = EventBuffer()
    row = buf.delivered(1000.5, CONTEXT, KEY, "q", 1)
    buf.settled(row, 1000.75, CONTEXT, KEY, "q", 1, Outcome.ACCEPTED)
    buf.settled(row, 1000.9, CONTEXT, KEY, "q", 1, Outcome.RELEASED, "again")
    buf.settled(None, 1001.0, CONTEXT, KEY, "q", 2, Outcome.REJECTED)
    lines = _written(buf.take())
    assert [line.split(b'"event":"')[1].split(b'"')[0] for line in lines] == [
        b"delivered", b"settled", b"settled", b"settled"]
    assert b'"outcome":"released"' in lines[2] and b'"outcome":"rejected"' in lines[3]


def test_delivered_rows_survive_the_batch_frame():
    buf = EventBuffer()
    row = buf.delivered(1000.5, CONTEXT, KEY, "q", 1)
    buf.settled(row, 1000.75, CONTEXT, KEY, "q", 1, Outcome.ACCEPTED)
    items = buf.take()
    frame = rows_frame(items)
    [(_kind, shipped)] = BatchReader().feed(frame)
    assert shipped == marshal.loads(marshal.dumps(items, 4))
    assert _written(shipped) == _written(items)


def test_a_disabled_buffer_records_nothing():
    buf = EventBuffer(enabled=False)
    assert buf.delivered(1.0, CONTEXT, KEY, "q", 0) is None
    buf.settled(None, 2.0, CONTEXT, KEY, "q", 0, Outcome.ACCEPTED)
    assert buf.take() == []
