import struct

import pytest
from amqp.sasl import AMQPLAIN
from hypothesis import given, strategies as st

from gateway.auth.errors import AuthenticationFailed
from gateway.auth.responses import common_name, parse_amqplain, parse_plain


def long_string(name: bytes, value: bytes, kind: bytes = b"S") -> bytes:
    return bytes([len(name)]) + name + kind + struct.pack(">I", len(value)) + value


# -- PLAIN ------------------------------------------------------------------

@pytest.mark.parametrize("response, expected", [
    (b"\x00guest\x00pw", ("", "guest", "pw")),
    (b"guest\x00guest\x00pw", ("guest", "guest", "pw")),
    ("\x00j\u00fcrgen\x00p\u00e4ss".encode(), ("", "j\u00fcrgen", "p\u00e4ss")),
])
def test_plain_valid(response, expected):
    assert parse_plain(response) == expected


@pytest.mark.parametrize("response, fragment", [
    (b"", "empty"),
    (b"guest", "expected authzid NUL authcid NUL password"),
    (b"guest\x00pw", "expected authzid"),
    (b"\x00a\x00b\x00c", "expected authzid"),
    (b"\x00\x00pw", "empty user name or password"),
    (b"\x00guest\x00", "empty user name or password"),
    (b"\x00gu\xffest\x00pw", "not UTF-8"),
])
def test_plain_malformed(response, fragment):
    with pytest.raises(AuthenticationFailed) as info:
        parse_plain(response)
    assert fragment in info.value.reason


@given(st.binary(max_size=64))
def test_plain_never_raises_other_errors(data):
    try:
        parse_plain(data)
    except AuthenticationFailed:
        pass


# -- AMQPLAIN ---------------------------------------------------------------

def test_amqplain_as_py_amqp_sends_it():
    assert parse_amqplain(AMQPLAIN("guest", "pw").start(None)) == ("guest", "pw")


def test_amqplain_any_order_and_extra_string_fields():
    data = (long_string(b"PASSWORD", b"pw") + long_string(b"CLIENT", b"x")
            + long_string(b"LOGIN", "\u00e9".encode()))
    assert parse_amqplain(data) == ("\u00e9", "pw")


GOOD = long_string(b"LOGIN", b"guest") + long_string(b"PASSWORD", b"pw")


@pytest.mark.parametrize("cut", range(1, len(GOOD)))
def test_amqplain_truncated_everywhere(cut):
    with pytest.raises(AuthenticationFailed) as info:
        parse_amqplain(GOOD[:cut])
    assert "malformed AMQPLAIN response" in info.value.reason


@pytest.mark.parametrize("data, fragment", [
    (b"", "empty"),
    (long_string(b"LOGIN", b"guest"), "LOGIN and PASSWORD required"),
    (GOOD + long_string(b"LOGIN", b"other"), "duplicate LOGIN"),
    (long_string(b"LOGIN", b"guest", b"s") + long_string(b"PASSWORD", b"pw"),
     "must be a long string"),
    (long_string(b"LOGIN", b"g\xff") + long_string(b"PASSWORD", b"pw"), "not UTF-8"),
    (long_string(b"LOGIN", b"") + long_string(b"PASSWORD", b"pw"), "empty user name"),
    (struct.pack(">I", len(GOOD)) + GOOD, "malformed AMQPLAIN"),  # with length prefix
    (GOOD + b"\x05LOGI", "truncated"),
])
def test_amqplain_malformed(data, fragment):
    with pytest.raises(AuthenticationFailed) as info:
        parse_amqplain(data)
    assert fragment in info.value.reason


@given(st.binary(max_size=80))
def test_amqplain_never_raises_other_errors(data):
    try:
        parse_amqplain(data)
    except AuthenticationFailed:
        pass


@given(st.text(min_size=1, max_size=20), st.text(min_size=1, max_size=20))
def test_amqplain_roundtrip(login, password):
    data = long_string(b"LOGIN", login.encode("utf-8", "surrogatepass")) + long_string(
        b"PASSWORD", password.encode("utf-8", "surrogatepass"))
    try:
        result = parse_amqplain(data)
    except AuthenticationFailed:
        # only lone surrogates are not valid UTF-8
        assert any(0xD800 <= ord(c) <= 0xDFFF for c in login + password)
    else:
        assert result == (login, password)


# -- certificate subject ------------------------------------------------------

@pytest.mark.parametrize("subject, expected", [
    ("CN=alice,OU=ops,O=Example", "alice"),
    ("O=Example,CN=alice", "alice"),
    ("cn=alice", "alice"),
    ("commonName=alice,O=x", "alice"),
    ("2.5.4.3=alice", "alice"),
    ("CN=alice+UID=7,O=x", "alice"),
    (r"CN=Smith\, John,O=x", "Smith, John"),
    (r"CN=caf\C3\A9", "caf\u00e9"),
    ("CN = spaced , O=x", "spaced"),
    ("/C=DE/O=Example/CN=alice", "alice"),
])
def test_common_name(subject, expected):
    assert common_name(subject) == expected


@pytest.mark.parametrize("subject", [
    "", "   ", "O=Example", "CN=,O=x", "CN=a,CN=b", "/O=x/CN=a/CN=b", r"CN=\FF",
])
def test_common_name_refused(subject):
    with pytest.raises(AuthenticationFailed):
        common_name(subject)


@given(st.text(max_size=60))
def test_common_name_never_raises_other_errors(subject):
    try:
        common_name(subject)
    except AuthenticationFailed:
        pass
