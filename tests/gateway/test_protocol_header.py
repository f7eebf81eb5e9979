import pytest

from gateway.protocol_header import (
    AMQP091_HEADER, AMQP10_SASL_HEADER, HeaderKind, classify, reply_header_for,
)

ROWS = [
    (b"AMQP\x00\x00\x09\x01", HeaderKind.AMQP091),
    (b"AMQP\x01\x01\x00\x09", HeaderKind.AMQP09),
    (b"AMQP\x01\x01\x08\x00", HeaderKind.AMQP08),
    (b"AMQP\x01\x01\x09\x01", HeaderKind.AMQP08),
    (b"AMQP\x03\x01\x00\x00", HeaderKind.AMQP10_SASL),
    (b"AMQP\x00\x01\x00\x00", HeaderKind.AMQP10_PLAIN),
    (b"AMQP\x02\x01\x00\x00", HeaderKind.AMQP10_TLS),
    (b"\x16\x03\x01\x02\x00\x01\x00\x01", HeaderKind.TLS_CLIENT_HELLO),
    (b"AMQP\x01\x01\x00\x0a", HeaderKind.UNKNOWN),      # 0-10
    (b"GET / HTTP/1.1\r\n", HeaderKind.UNKNOWN),
    (b"AMQP\x00\x00\x09\x02", HeaderKind.UNKNOWN),
    (b"\x00\x00\x00\x00\x00\x00\x00\x00", HeaderKind.UNKNOWN),
]


@pytest.mark.parametrize("data,kind", ROWS)
def test_whole_header(data, kind):
    assert classify(data) is kind


@pytest.mark.parametrize("data,kind", ROWS)
def test_trailing_bytes_do_not_matter(data, kind):
    assert classify(data + b"\x01\x00\x00garbage") is kind


@pytest.mark.parametrize("data,kind", [r for r in ROWS if r[0].startswith(b"AMQP")
                                       and r[1] is not HeaderKind.UNKNOWN])
def test_fed_byte_by_byte_needs_more_until_complete(data, kind):
    for n in range(0, 8):
        assert classify(data[:n]) is HeaderKind.NEED_MORE
    assert classify(data) is kind


def test_garbage_is_decided_before_eight_bytes():
    assert classify(b"G") is HeaderKind.UNKNOWN
    assert classify(b"AMQX") is HeaderKind.UNKNOWN
    assert classify(b"AMQP\x07") is HeaderKind.UNKNOWN


def test_tls_needs_two_bytes():
    assert classify(b"\x16") is HeaderKind.NEED_MORE
    assert classify(b"\x16\x03") is HeaderKind.TLS_CLIENT_HELLO
    assert classify(b"\x16\x01") is HeaderKind.UNKNOWN


def test_reply_headers():
    assert reply_header_for(HeaderKind.UNKNOWN) == AMQP091_HEADER
    assert reply_header_for(HeaderKind.AMQP08) == AMQP091_HEADER
    assert reply_header_for(HeaderKind.TLS_CLIENT_HELLO) == AMQP091_HEADER
    assert reply_header_for(HeaderKind.AMQP10_TLS) == AMQP10_SASL_HEADER
    assert reply_header_for(HeaderKind.AMQP10_PLAIN) == AMQP10_SASL_HEADER
