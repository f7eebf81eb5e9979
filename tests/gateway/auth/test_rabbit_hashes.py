"""RabbitMQ's password hashes (``gateway/auth/rabbit_hashes.py``), checked against hashes a
real RabbitMQ 3.10.8 exported (``PUT /api/users/bob {"password": "pw"}``, then
``GET /api/definitions``)."""
from __future__ import annotations

import pytest
import scramp

from gateway.auth import AuthenticationFailed, Authenticator, User, UserDirectory
from gateway.auth.passwords import check_stored, scram_capable, verify_password
from gateway.auth.rabbit_hashes import hash_rabbit, parse_rabbit, rabbit_stored

#: (password, password_hash) as RabbitMQ 3.10.8 exported them (rabbit_password_hashing_sha256)
EXPORTED = [("pw", "PxXaU889YAVUbjL0LOUHxJsrjUYYpMa7o+n7hHDuBj4d+T/J"),
            ("guest", "00IRjBP3KkMUyRpOg183oI3Twq2sJzazk8x6ZkCHbaiNqBoH")]


@pytest.mark.parametrize("password,exported", EXPORTED)
def test_hashes_rabbitmq_exported_verify_their_password_only(password, exported):
    stored = rabbit_stored("rabbit_password_hashing_sha256", exported)
    check_stored(stored)
    assert verify_password(stored, password)
    assert not verify_password(stored, password + "x")
    assert not verify_password(stored, "")
    assert parse_rabbit(stored).encoded == exported   # exported again as it came


def test_sha512_and_our_own_rabbit_hashes_round_trip():
    for algorithm in ("rabbit_password_hashing_sha256", "rabbit_password_hashing_sha512"):
        stored = hash_rabbit("s3cret", algorithm)
        assert verify_password(stored, "s3cret") and not verify_password(stored, "S3cret")
        assert not scram_capable(stored)


@pytest.mark.parametrize("algorithm,encoded,words", [
    ("rabbit_password_hashing_md5", "AAAA", "unknown hashing algorithm"),
    ("rabbit_password_hashing_sha256", "not base64!", "not base64"),
    ("rabbit_password_hashing_sha256", "AAAAAAAA", "is 36 bytes (salt and digest), not 6"),
])
def test_malformed_rabbit_hashes_are_refused_naming_the_problem(algorithm, encoded, words):
    with pytest.raises(ValueError) as info:
        rabbit_stored(algorithm, encoded)
    assert words in str(info.value)


def test_a_user_with_a_rabbit_hash_logs_in_with_plain_and_not_with_scram():
    stored = rabbit_stored("rabbit_password_hashing_sha256", EXPORTED[0][1])
    auth = Authenticator(UserDirectory([User("bob", stored)]))
    assert auth.check_password("bob", "pw").name == "bob"
    with pytest.raises(AuthenticationFailed):
        auth.check_password("bob", "wrong")
    exchange = auth.start("SCRAM-SHA-256", peer_host="127.0.0.1", protocol="amqp10",
                          allow_anonymous=False)
    client = scramp.ScramClient(["SCRAM-SHA-256"], "bob", "pw")
    challenge = exchange.step(client.get_client_first().encode())
    client.set_server_first(challenge.data.decode())
    with pytest.raises(AuthenticationFailed):
        exchange.step(client.get_client_final().encode())
