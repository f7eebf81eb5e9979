"""RowShapes: a row's shape found by its key, made for a new key, retired after its context."""
from __future__ import annotations

from gateway.ledger import records as r
from gateway.ledger.encoding import SHAPE
from gateway.ledger.row_shapes import (FORWARDED, SHAPES_PER_CONTEXT, STRUCTS, DeliveryRow,
                                       ForwardedRow, MessageRow, RowShapes)

T0 = 1_700_000_000.0


def _delivery_key(ctx: int, queue: str) -> tuple:
    return (r.DELIVERED, ctx, queue)


def test_a_key_finds_the_shape_made_for_it_and_a_new_key_gets_a_new_one():
    shapes = RowShapes({7: "open"})
    key = _delivery_key(7, "q")
    assert key not in shapes.ids
    row = shapes.new_row(key, DeliveryRow, (T0, 100, 0, T0 - 1))
    assert row == DeliveryRow(row.shape, T0, 100, 0, T0 - 1)
    assert shapes.ids.get(key) == row.shape
    assert _delivery_key(7, "other") not in shapes.ids
    other = shapes.new_row(_delivery_key(7, "other"), DeliveryRow, (T0, 101, 0, T0))
    assert other.shape != row.shape and shapes.ids.get(_delivery_key(7, "other")) == other.shape


def test_the_key_is_the_declaration_of_its_shape():
    """A key holds the kind tag and the values of the fields its kind fixes; the shape
    declared names them, and the writer gets the declaration ahead of the first row."""
    shapes = RowShapes({7: "open"})
    key = (r.SETTLED, 7, "q", "rejected", "why")
    row = shapes.new_row(key, DeliveryRow, (T0, 100, 1, T0))
    declaration = [SHAPE, row.shape, r.SETTLED, ("ts", "gateway_id", "delivery_count", "received_at"),
                   {"ctx": 7, "queue": "q", "outcome": "rejected", "reason": "why"}]
    assert shapes.declarations == {row.shape: declaration}
    assert shapes.unshipped == [declaration]
    assert shapes.expand([row]) == [("s", T0, 7, 100, "q", 1, T0, "rejected", "why")]
    shapes.shipped(idle=False)
    assert shapes.unshipped == [] and shapes.declarations == {row.shape: declaration}


def test_a_forwarded_arrival_s_shape_is_its_message_row_s_with_the_two_containers():
    shapes = RowShapes({7: "open"})
    message_key = (r.MESSAGE, 7, "", "q", "routed", ("q",), None, None, None)
    message = shapes.new_row(message_key, MessageRow, (T0, 100, "m", None, 10, None))
    key = (FORWARDED, message.shape, "org-x", "org-a")
    row = shapes.new_row(key, ForwardedRow, (T0, 100, "m", None, 10, None, 55))
    assert shapes.ids.get(key) == row.shape != message.shape
    fixed = shapes.declarations[row.shape][4]
    assert fixed == {**shapes.declarations[message.shape][4], "origin_container": "org-x",
                     "peer_container": "org-a"}
    assert shapes.expand([row]) == [("m", T0, 7, 100, "", "q", "m", None, 10, "routed", ("q",),
                                     None, None, None, 55, "org-x", "org-a", None)]


def test_a_closed_context_s_shapes_are_found_no_more_and_retired_once_taken():
    contexts = {7: "open"}
    shapes = RowShapes(contexts)
    key = _delivery_key(7, "q")
    row = shapes.new_row(key, DeliveryRow, (T0, 100, 0, T0))
    shapes.shipped(idle=True)  # nothing closed: nothing retired
    assert shapes.unshipped == [] and row.shape in shapes.declarations
    del contexts[7]
    shapes.context_closed(7)
    assert key not in shapes.ids
    late = shapes.new_row(key, DeliveryRow, (T0 + 1, 101, 0, T0))  # a settlement after the close
    assert late.shape != row.shape and key not in shapes.ids, "a shape of its own, not kept"
    shapes.shipped(idle=False)  # rows of theirs not all taken yet: kept
    assert set(shapes.declarations) == {row.shape, late.shape}
    shapes.shipped(idle=True)
    assert shapes.declarations == {}
    assert shapes.unshipped == [[SHAPE, row.shape], [SHAPE, late.shape]]


def test_a_context_with_as_many_shapes_as_it_may_keep_gets_its_next_records_in_full():
    shapes = RowShapes({7: "open"})
    for n in range(SHAPES_PER_CONTEXT):
        assert shapes.new_row(_delivery_key(7, f"q{n}"), DeliveryRow, (T0, n, 0, T0)).__class__ \
            is DeliveryRow
    record = shapes.new_row(_delivery_key(7, "one more"), DeliveryRow, (T0, 99, 0, T0))
    assert record == STRUCTS[r.DELIVERED](T0, 7, 99, "one more", 0, T0)
    assert _delivery_key(7, "one more") not in shapes.ids
    assert len(shapes.declarations) == SHAPES_PER_CONTEXT
    # another context is not limited by this one's
    assert shapes.new_row(_delivery_key(8, "q"), DeliveryRow, (T0, 1, 0, T0)).__class__ is DeliveryRow
