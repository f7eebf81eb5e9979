"""The SCRAM-SHA-256 SASL client on its own, against the gateway's own SASL server."""
from __future__ import annotations

import pytest
import scramp
from proton import Array, Data, UNDESCRIBED, symbol, ubyte

from gateway.amqp10.conditions import SaslCode
from gateway.amqp10.sasl import (AMQP_HEADER, SASL_HEADER, SASL_CHALLENGE, SASL_INIT,
                                 SASL_MECHANISMS, SASL_OUTCOME, SaslServer, SaslState,
                                 decode_sasl_frames, encode_sasl_frame)
from gateway.amqp10.sasl_client import ScramClientState, ScramSaslClient


def _server(authenticator) -> SaslServer:
    return SaslServer(authenticator, peer_host="127.0.0.1", allow_anonymous=False)


def _talk(client: ScramSaslClient, server: SaslServer, chunk: int | None = None) -> None:
    """Pass bytes both ways until neither side has more to say. The client's SASL header
    is the sniffer's to read in the gateway, so the server never sees it."""
    first = client.data_to_send()
    assert first[:8] == SASL_HEADER
    server.receive_data(first[8:])
    for _ in range(20):
        to_server, to_client = client.data_to_send(), server.data_to_send()
        if not to_server and not to_client:
            return
        for data, peer in ((to_server, server), (to_client, client)):
            step = chunk or max(1, len(data))
            for i in range(0, len(data), step):
                peer.receive_data(data[i:i + step])


@pytest.mark.parametrize("chunk", [None, 1, 7])
def test_a_scram_login_completes_and_hands_the_rest_to_proton(authenticator, chunk):
    client, server = ScramSaslClient("alice", "secret", "vhost:/"), _server(authenticator)
    _talk(client, server, chunk)
    assert client.state is ScramClientState.DONE, client.failure
    assert server.result.user.name == "alice" and server.result.mechanism == "SCRAM-SHA-256"
    assert server.result.hostname == "vhost:/"
    # what the server sends after its outcome is the AMQP layer's: proton's to read
    server.receive_data(AMQP_HEADER)
    client.receive_data(AMQP_HEADER + b"open...")
    assert client.leftover == AMQP_HEADER + b"open..."


def test_a_wrong_password_is_refused_with_the_outcome_named(authenticator):
    client, server = ScramSaslClient("alice", "wrong"), _server(authenticator)
    _talk(client, server)
    assert client.state is ScramClientState.FAILED
    assert client.failure == "the remote refused the SCRAM-SHA-256 login (sasl-outcome auth)"
    assert server.state is SaslState.FAILED


def _mechanisms(*names: str) -> bytes:
    return SASL_HEADER + encode_sasl_frame(
        SASL_MECHANISMS, [Array(UNDESCRIBED, Data.SYMBOL, *(symbol(n) for n in names))])


def test_a_remote_without_scram_is_named_with_what_it_offers():
    client = ScramSaslClient("alice", "secret")
    client.receive_data(_mechanisms("PLAIN", "ANONYMOUS"))
    assert client.state is ScramClientState.FAILED
    assert client.failure == "the remote does not offer SCRAM-SHA-256 (it offers: PLAIN, ANONYMOUS)"


def test_a_remote_that_skips_sasl_is_refused():
    client = ScramSaslClient("alice", "secret")
    client.receive_data(AMQP_HEADER)
    assert client.failure == "the remote answered AMQP without SASL, not SASL"


def test_an_outcome_ok_without_the_server_signature_is_refused():
    """A remote that says "ok" without proving it knows the keys may be an impostor."""
    client = ScramSaslClient("alice", "secret")
    client.receive_data(_mechanisms("SCRAM-SHA-256"))
    [(descriptor, fields)] = decode_sasl_frames(bytearray(client.data_to_send()[8:]), 1 << 16)
    assert descriptor == SASL_INIT and fields[0] == "SCRAM-SHA-256"
    client.receive_data(encode_sasl_frame(SASL_OUTCOME, [ubyte(SaslCode.OK)]))
    assert client.state is ScramClientState.FAILED
    assert "without proving it knows the password" in client.failure


def test_a_forged_server_signature_is_refused():
    """An impostor server that runs SCRAM with keys made from another password: the
    client's check of the server signature fails."""
    client = ScramSaslClient("alice", "secret")
    client.receive_data(_mechanisms("SCRAM-SHA-256"))
    [(_, init)] = decode_sasl_frames(bytearray(client.data_to_send()[8:]), 1 << 16)
    mechanism = scramp.ScramMechanism("SCRAM-SHA-256")
    salt, stored, server_key, iterations = mechanism.make_auth_info("not-secret")
    impostor = mechanism.make_server(lambda _user: (salt, stored, server_key, iterations))
    impostor.set_client_first(init[1].decode())
    client.receive_data(encode_sasl_frame(SASL_CHALLENGE, [impostor.get_server_first().encode()]))
    assert client.state is ScramClientState.AWAIT_OUTCOME
    # the impostor cannot check the proof; it answers ok with a signature of its own keys
    forged = "v=" + "A" * 44
    client.receive_data(encode_sasl_frame(SASL_OUTCOME, [ubyte(SaslCode.OK), forged.encode()]))
    assert client.state is ScramClientState.FAILED
    assert client.failure.startswith("SCRAM-SHA-256 exchange failed")


def test_malformed_frames_fail_without_raising():
    client = ScramSaslClient("alice", "secret")
    client.receive_data(SASL_HEADER + b"\x00\x00\x00\x08\x02\x00\x00\x00" + b"\x00\x00\x00\x04\x02\x00\x00\x00")
    assert client.state is ScramClientState.FAILED
    assert client.failure.startswith("malformed SASL from the remote")
