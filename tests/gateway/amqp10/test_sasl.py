"""The SASL layer on its own: frames, mechanisms, outcomes, hand-off to proton."""
from __future__ import annotations

import base64
import struct

import pytest
import scramp
from proton import Connection, Transport

from gateway.amqp10.conditions import SaslCode
from gateway.auth import LoginThrottled
from gateway.amqp10.sasl import (
    AMQP_HEADER,
    SASL_CHALLENGE,
    SASL_HEADER,
    SASL_INIT,
    SASL_MECHANISMS,
    SASL_OUTCOME,
    SASL_RESPONSE,
    SaslFrameError,
    SaslServer,
    SaslState,
    decode_sasl_frames,
    encode_sasl_frame,
)
from proton import symbol


def _server(authenticator, **kw) -> SaslServer:
    kw.setdefault("peer_host", "127.0.0.1")
    kw.setdefault("allow_anonymous", False)
    return SaslServer(authenticator, **kw)


def _frames(data: bytes) -> list:
    assert data[:8] == SASL_HEADER or not data.startswith(b"AMQP")
    body = bytearray(data[8:] if data.startswith(b"AMQP") else data)
    return decode_sasl_frames(body, 1 << 20)


def _init(mechanism: str, response: bytes | None, hostname: str | None = None) -> bytes:
    return encode_sasl_frame(SASL_INIT, [symbol(mechanism), response, hostname])


def test_server_announces_header_and_mechanisms(authenticator):
    server = _server(authenticator)
    out = server.data_to_send()
    assert out.startswith(SASL_HEADER)
    [(descriptor, fields)] = _frames(out)
    assert descriptor == SASL_MECHANISMS
    assert list(fields[0]) == ["SCRAM-SHA-256", "PLAIN"]
    assert server.data_to_send() == b""


def test_anonymous_is_offered_only_where_the_listener_allows_it(authenticator):
    out = _server(authenticator, allow_anonymous=True).data_to_send()
    assert "ANONYMOUS" in list(_frames(out)[0][1][0])


@pytest.mark.parametrize("chunking", ["whole", "bytewise"])
def test_plain_success_then_leftover_goes_to_proton(authenticator, chunking):
    server = _server(authenticator)
    server.data_to_send()
    pipelined = _init("PLAIN", b"\0alice\0secret", "vhost:/") + AMQP_HEADER + b"\0\0\0\x08\x02\0\0\0"
    if chunking == "whole":
        server.receive_data(pipelined)
    else:
        for i in range(len(pipelined)):
            server.receive_data(pipelined[i:i + 1])
    [(descriptor, fields)] = _frames(server.data_to_send())
    assert descriptor == SASL_OUTCOME and fields[0] == SaslCode.OK
    assert server.state is SaslState.DONE
    assert server.result.user.name == "alice" and server.result.mechanism == "PLAIN"
    assert server.result.hostname == "vhost:/"
    assert server.leftover == AMQP_HEADER + b"\0\0\0\x08\x02\0\0\0"


def test_outcome_waits_for_the_amqp_header(authenticator):
    server = _server(authenticator)
    server.receive_data(_init("PLAIN", b"\0alice\0secret"))
    assert server.state is SaslState.AWAIT_AMQP_HEADER
    server.receive_data(AMQP_HEADER[:3])
    assert server.state is SaslState.DONE and server.leftover == AMQP_HEADER[:3]
    server.receive_data(AMQP_HEADER[3:])
    assert server.leftover == AMQP_HEADER


@pytest.mark.parametrize("mechanism, response", [
    ("PLAIN", b"\0alice\0wrong"),
    ("PLAIN", b"\0nobody\0secret"),
    ("PLAIN", b"garbage"),
    ("ANONYMOUS", b""),  # not offered on this listener
    ("CRAM-MD5", b"x"),
])
def test_failed_login_sends_auth_outcome(authenticator, mechanism, response):
    server = _server(authenticator)
    server.data_to_send()
    server.receive_data(_init(mechanism, response))
    [(descriptor, fields)] = _frames(server.data_to_send())
    assert descriptor == SASL_OUTCOME and fields[0] == SaslCode.AUTH
    assert server.state is SaslState.FAILED and server.failure
    server.receive_data(AMQP_HEADER)  # ignored after failure
    assert server.leftover == b""


def test_a_refusal_keeps_the_exception_and_the_claimed_user(authenticator):
    server = _server(authenticator)
    server.receive_data(_init("PLAIN", b"\0mallory\0wrong"))
    assert server.claimed_user == "mallory" and server.mechanism_name == "PLAIN"
    assert server.refusal is not None and server.refusal.reason == "invalid credentials"


def test_a_throttled_login_gets_sys_temp_without_a_password_check(authenticator):
    asked = []

    def gate(user):
        asked.append(user)
        raise LoginThrottled(user, 3, 3)

    server = _server(authenticator, gate=gate)
    server.data_to_send()
    server.receive_data(_init("PLAIN", b"\0alice\0secret"))
    [(descriptor, fields)] = _frames(server.data_to_send())
    assert descriptor == SASL_OUTCOME and fields[0] == SaslCode.SYS_TEMP
    assert asked == ["alice"] and isinstance(server.refusal, LoginThrottled)
    assert server.state is SaslState.FAILED and server.result is None


def test_anonymous_maps_to_configured_user(authenticator):
    server = _server(authenticator, allow_anonymous=True)
    server.receive_data(_init("ANONYMOUS", b"trace"))
    assert server.state is SaslState.AWAIT_AMQP_HEADER
    assert server.result.user.name == "anon"


def test_scram_sha_256_challenge_and_server_final(authenticator):
    server = _server(authenticator)
    server.data_to_send()
    client = scramp.ScramClient(["SCRAM-SHA-256"], "alice", "secret")
    server.receive_data(_init("SCRAM-SHA-256", client.get_client_first().encode()))
    [(descriptor, fields)] = _frames(server.data_to_send())
    assert descriptor == SASL_CHALLENGE
    assert server.state is SaslState.AWAIT_RESPONSE
    client.set_server_first(fields[0].decode())
    server.receive_data(encode_sasl_frame(SASL_RESPONSE, [client.get_client_final().encode()]))
    [(descriptor, fields)] = _frames(server.data_to_send())
    assert descriptor == SASL_OUTCOME and fields[0] == SaslCode.OK
    client.set_server_final(fields[1].decode())  # raises if the server proof is wrong
    assert server.result.user.name == "alice"


def _raw_frame(size: int, doff: int, ftype: int, body: bytes = b"") -> bytes:
    return struct.pack(">IBBH", size, doff, ftype, 0) + body


@pytest.mark.parametrize("data, text", [
    (_raw_frame(4, 2, 1), "malformed frame header"),
    (_raw_frame(8, 1, 1), "malformed frame header"),
    (_raw_frame(16, 5, 1), "malformed frame header"),
    (_raw_frame(70000, 2, 1), "exceeds"),
    (_raw_frame(12, 2, 0, b"\0\0\0\0"), "frame type 0"),
    (_raw_frame(10, 2, 1, b"\xa1\x00"), "not a described list"),
    (_raw_frame(9, 2, 1, b"\xff"), "undecodable"),
    (encode_sasl_frame(SASL_RESPONSE, [b"x"]), "unexpected SASL performative"),
])
def test_malformed_input_fails_without_outcome(authenticator, data, text):
    server = _server(authenticator)
    server.data_to_send()
    server.receive_data(data)
    assert server.state is SaslState.FAILED
    assert text in server.failure
    assert server.data_to_send() == b""


def test_decode_frames_keeps_incomplete_frame():
    frame = encode_sasl_frame(SASL_INIT, [symbol("PLAIN"), b"\0a\0b", None])
    buffer = bytearray(frame[:-1])
    assert decode_sasl_frames(buffer, 512) == []
    assert len(buffer) == len(frame) - 1
    buffer += frame[-1:] + b"\0\0\0\x08\x02\x01\0\0" + b"\0\0"
    frames = decode_sasl_frames(buffer, 512)
    assert frames == [(SASL_INIT, ["PLAIN", b"\0a\0b", None])]
    assert buffer == b"\0\0"  # the empty frame was skipped, the partial one kept


def test_decode_rejects_oversized_before_it_arrives():
    with pytest.raises(SaslFrameError) as info:
        decode_sasl_frames(bytearray(_raw_frame(1000, 2, 1)), 512)
    assert "1000 bytes exceeds 512" in info.value.text


def test_interop_with_proton_client_sasl(authenticator):
    client = Transport()
    connection = Connection()
    connection.user, connection.password = "alice", "secret"
    sasl = client.sasl()
    sasl.allowed_mechs("PLAIN")
    sasl.allow_insecure_mechs = True
    client.bind(connection)
    connection.open()
    server = _server(authenticator)

    def client_out() -> bytes:
        n = client.pending()
        data = bytes(client.peek(n)) if n > 0 else b""
        client.pop(max(n, 0))
        return data

    assert client_out() == SASL_HEADER
    for _ in range(5):
        client.push(server.data_to_send())
        server.receive_data(client_out())
    assert server.state is SaslState.DONE
    assert server.leftover.startswith(AMQP_HEADER)
    assert sasl.outcome == sasl.OK
