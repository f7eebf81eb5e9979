"""RabbitMQ's list parameters: columns, sort, name filters and paging."""
from __future__ import annotations

import pytest

from gateway.management.http_errors import HttpError
from gateway.management.http_listing import shape_list

QUEUES = [
    {"name": "b", "vhost": "/", "messages": 5, "message_stats": {"publish": 9}},
    {"name": "a", "vhost": "/", "messages": 12, "message_stats": {"publish": 1}},
    {"name": "c.x", "vhost": "v", "messages": 0},
]


def test_without_parameters_the_list_is_as_given():
    assert shape_list(QUEUES, {}) == QUEUES


def test_columns_keep_only_those_fields_dotted_ones_nested():
    assert shape_list(QUEUES, {"columns": ["name,message_stats.publish"]}) == [
        {"name": "b", "message_stats": {"publish": 9}},
        {"name": "a", "message_stats": {"publish": 1}},
        {"name": "c.x"}]


def test_sort_by_a_number_and_reversed():
    assert [q["name"] for q in shape_list(QUEUES, {"sort": ["messages"]})] == ["c.x", "b", "a"]
    assert [q["name"] for q in shape_list(QUEUES, {"sort": ["name"], "sort_reverse": ["true"]})
            ] == ["c.x", "b", "a"]


def test_sort_by_a_field_some_items_lack():
    names = [q["name"] for q in shape_list(QUEUES, {"sort": ["message_stats.publish"]})]
    assert names == ["c.x", "a", "b"]


def test_name_filter_plain_and_regex():
    assert [q["name"] for q in shape_list(QUEUES, {"name": ["."]})] == ["c.x"]
    assert [q["name"] for q in shape_list(QUEUES, {"name": ["^[ab]$"], "use_regex": ["true"]})
            ] == ["b", "a"]


def test_paging_answers_rabbitmq_s_paging_object():
    page = shape_list(QUEUES, {"page": ["2"], "page_size": ["2"], "sort": ["name"]})
    assert page == {"items": [QUEUES[2]], "page": 2, "page_count": 2, "page_size": 2,
                    "filtered_count": 3, "item_count": 1, "total_count": 3}


@pytest.mark.parametrize("query,words", [
    ({"page": ["x"]}, "page must be a whole number"),
    ({"page": ["0"]}, "page must be at least 1"),
    ({"page": ["1"], "page_size": ["501"]}, "page_size must be at most 500"),
    ({"page": ["3"], "page_size": ["2"]}, "page 3 is past the last page, 2"),
    ({"name": ["("], "use_regex": ["true"]}, "name is not a usable regular expression"),
])
def test_bad_parameters_are_400_naming_them(query, words):
    with pytest.raises(HttpError) as info:
        shape_list(QUEUES, query)
    assert info.value.status == 400
    assert words in info.value.reason
    assert info.value.body() == {"error": "bad_request", "reason": info.value.reason}
