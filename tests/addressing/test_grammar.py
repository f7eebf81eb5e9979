from urllib.parse import quote

import pytest
from hypothesis import given, strategies as st

from addressing.address import (
    ExchangeAddress, GlobalAddress, QueueAddress, ServiceAddress, TopicAddress,
)
from addressing.errors import AddressError, AddressErrorKind
from addressing.grammar import parse_global, parse_source, parse_target, percent_decode, split_global

LONG = "x" * 256

# address, expected target, expected source (None: refused for that role)
VALID = [
    ("/exchange/X/RK", ExchangeAddress("X", "RK"), ExchangeAddress("X", "RK")),
    ("/exchange/X/", ExchangeAddress("X", ""), ExchangeAddress("X", "")),
    ("/exchange/X", ExchangeAddress("X", None), ExchangeAddress("X", "")),
    ("/exchange/amq.topic/a.*.#", ExchangeAddress("amq.topic", "a.*.#"),
     ExchangeAddress("amq.topic", "a.*.#")),
    ("/exchange/X/a%2Fb", ExchangeAddress("X", "a%2Fb"), ExchangeAddress("X", "a%2Fb")),
    ("/topic/a.b", TopicAddress("a.b"), TopicAddress("a.b")),
    ("/topic/", TopicAddress(""), TopicAddress("")),
    # /queue/Q and a bare Q declare a missing queue (RabbitMQ's plugin: both are {queue, Q})
    ("/queue/Q", QueueAddress("Q", True), QueueAddress("Q", True)),
    # split at the last '@' (issue 33); a local name with '@' through the v2 forms
    ("/queue/a@b", GlobalAddress("/queue/a", "b"), GlobalAddress("/queue/a", "b")),
    ("/exchange/X/k@org-b", GlobalAddress("/exchange/X/k", "org-b"),
     GlobalAddress("/exchange/X/k", "org-b")),
    ("/exchange/x@y/k", ExchangeAddress("x@y", "k"), ExchangeAddress("x@y", "k")),
    ("/queues/a%40b", QueueAddress("a@b"), QueueAddress("a@b")),
    ("a@b@c", GlobalAddress("a@b", "c"), GlobalAddress("a@b", "c")),
    ("/queue/a%20b", QueueAddress("a%20b", True), QueueAddress("a%20b", True)),  # v1: no decoding
    ("/amq/queue/Q", QueueAddress("Q"), QueueAddress("Q")),
    ("/queue", QueueAddress(None), None),
    ("Q", QueueAddress("Q", True), QueueAddress("Q", True)),
    ("a/b", QueueAddress("a/b", True), QueueAddress("a/b", True)),
    ("amq.gen-123", QueueAddress("amq.gen-123", True), QueueAddress("amq.gen-123", True)),
    ("/queues/Q", QueueAddress("Q"), QueueAddress("Q")),
    ("/queues/a%2Fb", QueueAddress("a/b"), QueueAddress("a/b")),
    ("/queues/caf%C3%A9", QueueAddress("caf\u00e9"), QueueAddress("caf\u00e9")),
    ("/exchanges/X/RK", ExchangeAddress("X", "RK"), ExchangeAddress("X", "RK")),
    ("/exchanges/X", ExchangeAddress("X", ""), ExchangeAddress("X", "")),
    ("/exchanges/X%2FY/a%2Fb", ExchangeAddress("X/Y", "a/b"), ExchangeAddress("X/Y", "a/b")),
    ("/exchanges/X/", ExchangeAddress("X", ""), ExchangeAddress("X", "")),
    ("orders@remote", GlobalAddress("orders", "remote"), GlobalAddress("orders", "remote")),
    ("orders@10.0.0.1:5672", GlobalAddress("orders", "10.0.0.1:5672"),
     GlobalAddress("orders", "10.0.0.1:5672")),
    ("amqp$transfer", ServiceAddress("amqp$transfer"), ServiceAddress("amqp$transfer")),
    ("amqp$management", ServiceAddress("amqp$management"),
     ServiceAddress("amqp$management")),
    ("$management", ServiceAddress("$management"), ServiceAddress("$management")),
    ("x" * 255, QueueAddress("x" * 255, True), QueueAddress("x" * 255, True)),
]


@pytest.mark.parametrize("address, target, source", VALID)
def test_valid_target(address, target, source):
    assert parse_target(address) == target


@pytest.mark.parametrize("address, target, source", VALID)
def test_valid_source(address, target, source):
    if source is None:
        with pytest.raises(AddressError) as info:
            parse_source(address)
        assert info.value.kind is AddressErrorKind.INVALID
    else:
        assert parse_source(address) == source


# address, fragment of the error text (besides the address itself)
INVALID = [
    ("", "empty address"),
    ("/", "unknown address form '/'"),
    ("/xyz/abc", "unknown address form '/xyz'"),
    ("/Queue/q", "unknown address form '/Queue'"),
    ("/exchange", "missing exchange name"),
    ("/exchange/", "empty exchange name (segment 2)"),
    ("/exchange//rk", "empty exchange name (segment 2)"),
    ("/exchange/X/a/b", "too many segments: unexpected 'b'"),
    ("/topic", "missing routing key"),
    ("/topic/a/b", "too many segments: unexpected 'b'"),
    ("/queue/", "empty queue name (segment 2)"),
    ("/queue/a/b", "too many segments: unexpected 'b'"),
    ("/queue/q/", "too many segments"),
    ("/amq", "unknown form '/amq/'"),
    ("/amq/exchange/x", "unknown form '/amq/exchange'"),
    ("/amq/queue", "missing queue name after '/amq/queue'"),
    ("/amq/queue/", "empty queue name (segment 3)"),
    ("/amq/queue/a/b", "too many segments"),
    ("/queues", "missing queue name after '/queues'"),
    ("/queues/", "empty queue name (segment 2)"),
    ("/queues/a/b", "too many segments: unexpected 'b'"),
    ("/queues/%", "bad percent-encoding in segment '%'"),
    ("/queues/a%2", "bad percent-encoding in segment 'a%2'"),
    ("/queues/a%zz", "bad percent-encoding"),
    ("/queues/%FF", "does not decode to UTF-8"),
    ("/queues/%2", "bad percent-encoding"),
    ("/exchanges", "missing exchange name"),
    ("/exchanges//rk", "empty exchange name (segment 2)"),
    ("/exchanges/%00%", "bad percent-encoding"),
    ("/exchanges/X/a/b", "too many segments: unexpected 'b'"),
    ("@remote", "empty node name"),
    ("orders@", "empty container name"),
    ("@", "empty node name"),
    ("x" * 256, "longer than 255 bytes"),
    ("/queue/" + LONG, "longer than 255 bytes"),
    ("/exchange/X/" + LONG, "routing key"),
    ("/queues/" + "%C3%A9" * 128, "longer than 255 bytes"),
    ("/queue/\ud800", "not valid Unicode"),
]


@pytest.mark.parametrize("parse", [parse_target, parse_source])
@pytest.mark.parametrize("address, fragment", INVALID)
def test_invalid(parse, address, fragment):
    with pytest.raises(AddressError) as info:
        parse(address)
    assert info.value.kind is AddressErrorKind.INVALID
    assert info.value.kind == "invalid"
    assert fragment in info.value.text
    assert repr(address[:40])[:-1] in info.value.text  # the address is named


def test_queue_is_target_only():
    with pytest.raises(AddressError) as info:
        parse_source("/queue")
    assert "target only" in info.value.text


@given(st.text(min_size=1, max_size=60))
def test_v2_queue_percent_roundtrip(name):
    try:
        encoded = quote(name, safe="")
    except UnicodeEncodeError:  # lone surrogates cannot be encoded
        return
    if len(name.encode("utf-8")) <= 255:
        assert parse_source("/queues/" + encoded) == QueueAddress(name)


@given(st.text(max_size=40), st.sampled_from([parse_target, parse_source]))
def test_parse_raises_only_address_error(text, parse):
    for address in (text, "/" + text, "/queues/" + text, "/exchange/" + text):
        try:
            parse(address)
        except AddressError as exc:
            assert exc.kind is AddressErrorKind.INVALID


def test_percent_decode_plain_segment_unchanged():
    assert percent_decode("abc") == "abc"
    assert percent_decode("%41%42") == "AB"


@pytest.mark.parametrize("name, expected", [
    ("orders@remote", GlobalAddress("orders", "remote")),
    ("orders", None), ("a@b@c", GlobalAddress("a@b", "c")), ("@b", None), ("a@", None),
    ("/queue/a@b", GlobalAddress("/queue/a", "b")), ("/exchange/x@y/k", None),
])
def test_parse_global(name, expected):
    assert parse_global(name) == expected


def test_split_global_splits_at_the_last_at_sign():
    assert split_global("a@b@c") == ("a@b", "c")
    assert split_global("plain") is None
    assert split_global("@c") is None and split_global("a@") is None and split_global("@") is None
