import pytest
from hypothesis import given, strategies as st

from addressing.reply_to import reply_to_for_amqp091, reply_to_for_amqp10


@pytest.mark.parametrize("value, expected", [
    ("replies", "/queue/replies"),
    ("amq.gen-XyZ", "/queue/amq.gen-XyZ"),
    ("/queue/replies", "/queue/replies"),
    ("/exchange/X/rk", "/exchange/X/rk"),
    ("replies@gw-2", "replies@gw-2"),
    ("", ""),
])
def test_to_amqp10(value, expected):
    assert reply_to_for_amqp10(value) == expected


@pytest.mark.parametrize("value, expected", [
    ("/queue/replies", "replies"),
    ("/amq/queue/replies", "replies"),
    ("/queues/a%2Fb", "a/b"),
    ("/exchange/X/rk", "/exchange/X/rk"),
    ("/topic/rk", "/topic/rk"),
    ("/queue/a/b", "/queue/a/b"),  # malformed: unchanged
    ("/queues/%zz", "/queues/%zz"),
    ("/queues/", "/queues/"),
    ("/queue/" + "x" * 300, "x" * 300),  # no length limit on reply-to
    ("replies@gw-1", "replies@gw-1"),
    ("plain", "plain"),
    ("", ""),
])
def test_to_amqp091(value, expected):
    assert reply_to_for_amqp091(value) == expected


@given(st.text(alphabet=st.characters(blacklist_characters="/@", blacklist_categories=("Cs",)),
               min_size=1, max_size=300))
def test_round_trip_of_queue_names(name):
    assert reply_to_for_amqp091(reply_to_for_amqp10(name)) == name
