"""Aligned tables for ``amqp-gateway ctl``."""
from __future__ import annotations

from gateway.ctl.tables import render_table


def test_columns_are_padded_and_numbers_right_aligned():
    rows = [{"name": "orders", "messages": 5, "durable": True, "queue": {"vhost": "/"}},
            {"name": "q", "messages": 1200, "durable": False, "queue": {"vhost": "other"}}]
    lines = render_table(rows, [("name", "name"), ("messages", "messages"),
                                ("durable", "durable"), ("vhost", "queue.vhost")])
    assert lines == [
        "name    messages  durable  vhost",
        "orders         5  true     /",
        "q           1200  false    other",
    ]


def test_missing_fields_are_blank_and_an_empty_list_is_the_header():
    assert render_table([{"a": None}], [("a", "a"), ("b", "b.c")]) == ["a  b", ""]
    assert render_table([], [("name", "name")]) == ["name"]
