"""The PROXY protocol parser: whole, one octet at a time, with trailing bytes, and Hypothesis."""
from __future__ import annotations

import ipaddress
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.proxy_header import (
    DEFAULT_MAX_LENGTH, V1_MAX_LENGTH, V2_SIGNATURE, ProxyCommand, ProxyHeader, ProxyHeaderError,
    parse_proxy_header,
)
from gateway.protocol_header import AMQP091_HEADER, AMQP10_SASL_HEADER
from tests.support.example_counts import examples


def v2(src: tuple[str, int] | None, dst: tuple[str, int] | None = None, *, command: int = 1,
       tlvs: bytes = b"", family: int | None = None, version: int = 2) -> bytes:
    """A v2 header as haproxy writes it (built here with struct, independently of the parser)."""
    if src is None:
        block, fam = b"", 0 if family is None else family
    else:
        dst = dst or ("127.0.0.1", 5672)
        ip = ipaddress.ip_address(src[0])
        fam = (1 if ip.version == 4 else 2) if family is None else family
        block = ip.packed + ipaddress.ip_address(dst[0]).packed + struct.pack("!HH", src[1], dst[1])
    block += tlvs
    return V2_SIGNATURE + bytes([version << 4 | command, fam << 4 | 1]) + struct.pack("!H", len(block)) + block


def v1(src: tuple[str, int], dst: tuple[str, int] = ("127.0.0.1", 5672)) -> bytes:
    family = "TCP4" if ipaddress.ip_address(src[0]).version == 4 else "TCP6"
    return f"PROXY {family} {src[0]} {dst[0]} {src[1]} {dst[1]}\r\n".encode()


VALID = [
    (v2(("203.0.113.9", 40001)), ("203.0.113.9", 40001), ProxyCommand.PROXY),
    (v2(("2001:db8::7", 1), ("::1", 5672)), ("2001:db8::7", 1), ProxyCommand.PROXY),
    (v2(("127.0.0.2", 65535), tlvs=b"\x01\x00\x02h2\x05\x00\x01x"), ("127.0.0.2", 65535),
     ProxyCommand.PROXY),
    (v2(None, command=0), None, ProxyCommand.LOCAL),
    (v2(("10.0.0.1", 9), command=0), None, ProxyCommand.LOCAL),   # LOCAL ignores addresses
    (v2(None, family=0), None, ProxyCommand.PROXY),                # UNSPEC
    (v2(None, family=3) + b"", None, ProxyCommand.PROXY),          # UNIX: no IP address
    (v1(("203.0.113.9", 40001)), ("203.0.113.9", 40001), ProxyCommand.PROXY),
    (v1(("2001:db8::7", 0), ("::1", 5672)), ("2001:db8::7", 0), ProxyCommand.PROXY),
    (b"PROXY UNKNOWN\r\n", None, ProxyCommand.PROXY),
    (b"PROXY UNKNOWN ffff:f...f:ffff 1.2.3.4 65535 65535\r\n", None, ProxyCommand.PROXY),
]


@pytest.mark.parametrize("data,source,command", VALID)
def test_whole_header(data, source, command):
    header = parse_proxy_header(data)
    assert header == ProxyHeader(header.version, command, source, header.destination, len(data))
    assert header.version == (1 if data.startswith(b"PROXY") else 2)


@pytest.mark.parametrize("data,source,command", VALID)
def test_trailing_bytes_are_left_for_the_amqp_header(data, source, command):
    header = parse_proxy_header(data + AMQP091_HEADER + b"\x01\x00")
    assert header.source == source
    assert header.length == len(data)


@pytest.mark.parametrize("data,source,command", VALID)
def test_fed_one_octet_at_a_time_needs_more_until_whole(data, source, command):
    for n in range(len(data)):
        assert parse_proxy_header(data[:n]) is None
    assert parse_proxy_header(data).source == source


INVALID = [
    (AMQP091_HEADER, "no PROXY protocol header"),
    (AMQP10_SASL_HEADER, "no PROXY protocol header"),
    (b"GET / HTTP/1.1\r\n", "no PROXY protocol header"),
    (b"PROXZ", "no PROXY protocol header"),
    (b"\r\n\r\n\x00\r\nQUIX", "no PROXY protocol header"),
    (b"PROXY TCP5 1.2.3.4 1.2.3.4 1 2\r\n", "family"),
    (b"PROXY TCP4 1.2.3.4 1.2.3.4 1\r\n", "fields"),
    (b"PROXY TCP4 1.2.3 1.2.3.4 1 2\r\n", "address"),
    (b"PROXY TCP4 ::1 1.2.3.4 1 2\r\n", "address"),
    (b"PROXY TCP4 1.2.3.4 1.2.3.4 65536 2\r\n", "port"),
    (b"PROXY TCP4 1.2.3.4 1.2.3.4 +1 2\r\n", "port"),
    (b"PROXY TCP4 1.2.3.4 1.2.3.4 01 2\r\n", "port"),
    (b"PROXY TCP4 1.2.3.4 1.2.3.4 1 2\n", "CRLF"),
    (b"PROXY " + b"x" * V1_MAX_LENGTH, "CRLF"),
    (v2(("1.2.3.4", 1), version=1), "version 1"),
    (v2(("1.2.3.4", 1), command=2), "command 2"),
    (v2(None, family=4), "family 4"),
    (V2_SIGNATURE + b"\x21\x11\x00\x04" + b"\x01\x02\x03\x04", "shorter than 12"),
    (V2_SIGNATURE + b"\x21\x11\xff\xff", f"longer than {DEFAULT_MAX_LENGTH}"),
]


@pytest.mark.parametrize("data,reason", INVALID)
def test_refused_with_a_reason(data, reason):
    with pytest.raises(ProxyHeaderError) as caught:
        parse_proxy_header(data)
    assert reason in caught.value.reason


def test_an_amqp_client_is_refused_at_its_first_octet():
    with pytest.raises(ProxyHeaderError):
        parse_proxy_header(b"A")


def test_a_v2_version_is_checked_before_the_length_arrives():
    with pytest.raises(ProxyHeaderError, match="version 1"):
        parse_proxy_header(V2_SIGNATURE + b"\x11")


def test_max_length_is_a_parameter():
    big = v2(("1.2.3.4", 1), tlvs=b"\x04\x00\x64" + b"x" * 100)
    assert parse_proxy_header(big).source == ("1.2.3.4", 1)
    with pytest.raises(ProxyHeaderError, match="longer than 64"):
        parse_proxy_header(big, max_length=64)


addresses = st.one_of(st.ip_addresses(v=4), st.ip_addresses(v=6)).map(str)
ports = st.integers(0, 65535)


@st.composite
def headers(draw):
    """A v1 or v2 header (v2 with TLVs) and the client address it carries."""
    src = (draw(addresses), draw(ports))
    dst = (src[0], draw(ports))   # same family as the source
    if draw(st.booleans()):
        return v2(src, dst, tlvs=draw(st.binary(max_size=64))), src
    return v1(src, dst), src


@given(headers(), st.binary(max_size=32), st.integers(1, 16))
@settings(max_examples=examples(300), deadline=None)
def test_any_valid_header_in_any_chunks(made, rest, step):
    data, src = made
    stream = data + rest
    fed = b""
    header = None
    for i in range(0, len(stream), step):
        fed = stream[:i + step]
        header = parse_proxy_header(fed)
        if header is not None:
            break
        assert len(fed) < len(data)
    assert header is not None and header.source == src and header.length == len(data)
    assert stream[header.length:] == rest


@given(st.binary(max_size=200))
@settings(max_examples=examples(500), deadline=None)
def test_any_bytes_are_a_header_a_prefix_or_a_refusal(data):
    try:
        header = parse_proxy_header(data)
    except ProxyHeaderError as exc:
        assert exc.reason
        return
    if header is None:
        # a prefix that may still become a header: never longer than a header may be
        assert len(data) < max(V1_MAX_LENGTH, DEFAULT_MAX_LENGTH)
        assert data.startswith(V2_SIGNATURE[:len(data)]) or data.startswith(b"PROXY "[:len(data)]) \
            or data.startswith(V2_SIGNATURE) or data.startswith(b"PROXY ")
    else:
        assert 0 < header.length <= len(data)


@given(st.binary(min_size=1, max_size=120))
@settings(max_examples=examples(300), deadline=None)
def test_mutated_v2_headers_never_raise_anything_else(noise):
    base = bytearray(v2(("192.0.2.1", 1000), tlvs=b"\x03\x00\x04abcd"))
    for i, b in enumerate(noise):
        base[(i * 7) % len(base)] ^= b
    try:
        parse_proxy_header(bytes(base))
    except ProxyHeaderError:
        pass
