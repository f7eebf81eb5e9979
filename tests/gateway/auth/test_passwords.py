import base64

import pytest
import scramp
from hypothesis import given, settings, strategies as st

from gateway.auth.passwords import hash_password, parse_stored, verify_password
from tests.support.example_counts import examples

SALT = b"0123456789abcdef"


def test_format_matches_scramp_auth_info():
    stored = hash_password("pencil", salt=SALT)
    salt, stored_key, server_key, iterations = scramp.ScramMechanism(
        "SCRAM-SHA-256").make_auth_info("pencil", iteration_count=4096, salt=SALT)
    b64 = lambda b: base64.b64encode(b).decode()
    assert stored == f"SCRAM-SHA-256$4096:{b64(salt)}${b64(stored_key)}:{b64(server_key)}"


def test_verify_right_and_wrong():
    stored = hash_password("s3cret")
    assert verify_password(stored, "s3cret")
    assert not verify_password(stored, "s3cret ")
    assert not verify_password(stored, "")


def test_random_salt_differs():
    assert hash_password("a") != hash_password("a")


def test_iterations_are_kept():
    stored = hash_password("a", iterations=5000)
    assert parse_stored(stored).iterations == 5000
    assert verify_password(stored, "a")


def test_saslprep_normalises():
    # U+00A0 (no-break space) maps to a plain space under SASLprep.
    stored = hash_password("a\u00a0b")
    assert verify_password(stored, "a b")


def test_password_refused_by_saslprep_still_works_for_plain():
    stored = hash_password("bad\u0007char")  # control character: prohibited
    assert verify_password(stored, "bad\u0007char")
    assert not verify_password(stored, "badchar")


@pytest.mark.parametrize("kwargs, fragment", [
    ({"iterations": 1000}, "iterations must be between"),
    ({"iterations": 10_000_001}, "iterations must be between"),
    ({"salt": b"short"}, "salt must be at least 12"),
])
def test_hash_rejects_bad_parameters(kwargs, fragment):
    with pytest.raises(ValueError) as info:
        hash_password("x", **kwargs)
    assert fragment in str(info.value)


GOOD = hash_password("x", salt=SALT)


@pytest.mark.parametrize("stored, fragment", [
    ("", "expected"),
    ("plain-text-password", "expected"),
    (GOOD.replace("SCRAM-SHA-256", "SCRAM-SHA-1"), "unknown scheme"),
    (GOOD.replace("$4096:", "$04096:"), "iteration count"),
    (GOOD.replace("$4096:", "$abc:"), "iteration count"),
    (GOOD.replace("$4096:", "$100:"), "outside"),
    (GOOD.replace("$4096:", "$4096"), "expected"),
    (GOOD.replace(":", "!", 2), "expected"),
    (GOOD.split("$")[0] + "$4096:!!!!$" + GOOD.split("$")[2], "salt is not base64"),
    (GOOD.split("$")[0] + "$4096:" + base64.b64encode(b"short").decode() + "$"
     + GOOD.split("$")[2], "salt shorter"),
    (GOOD.rsplit(":", 1)[0] + ":" + base64.b64encode(b"x" * 31).decode(), "32 bytes"),
    (GOOD + "$extra", "expected"),
])
def test_parse_rejects_malformed(stored, fragment):
    with pytest.raises(ValueError) as info:
        verify_password(stored, "x")
    assert fragment in str(info.value)
    assert str(info.value).startswith("malformed stored password")


def test_parse_roundtrip():
    stored = hash_password("x", salt=SALT, iterations=4100)
    parsed = parse_stored(stored)
    assert (parsed.iterations, parsed.salt) == (4100, SALT)
    assert len(parsed.stored_key) == len(parsed.server_key) == 32


@settings(max_examples=examples(25), deadline=None)
@given(st.text(max_size=20), st.text(max_size=20))
def test_verify_only_accepts_the_password(password, other):
    stored = hash_password(password, salt=SALT)
    assert verify_password(stored, password)
    if other != password:
        # SASLprep may map two different strings to the same one.
        from scramp.utils import ScramException, saslprep
        try:
            same = saslprep(other) == saslprep(password)
        except ScramException:
            same = False
        assert verify_password(stored, other) is same


@settings(max_examples=examples(200))
@given(st.text(max_size=120))
def test_parse_never_raises_anything_but_value_error(text):
    try:
        parse_stored(text)
    except ValueError:
        pass
