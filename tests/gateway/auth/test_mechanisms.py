import pytest
import scramp
from amqp.sasl import AMQPLAIN
from hypothesis import given, settings, strategies as st

from gateway.auth.errors import AuthenticationFailed, LoginThrottled
from gateway.auth.mechanisms import (
    Authenticated, Authenticator, Challenge, is_loopback,
)
from gateway.auth.passwords import hash_password
from gateway.auth.users import User, UserDirectory
from tests.support.example_counts import examples

ALICE = User("alice", hash_password("wonderland"))
GUEST = User("guest", hash_password("guest"), loopback_only=True)
CERT_ONLY = User("device-7", None)
ANON = User("anon", None)


@pytest.fixture(scope="module")
def auth() -> Authenticator:
    return Authenticator(UserDirectory([ALICE, GUEST, CERT_ONLY, ANON]), anonymous_user="anon")


def start(auth, mechanism, *, peer="10.0.0.1", protocol="amqp091", anonymous=False,
          subject=None):
    offered = ["SCRAM-SHA-256"] if mechanism == "SCRAM-SHA-256" else None
    return auth.start(mechanism, peer_host=peer, protocol=protocol,
                      allow_anonymous=anonymous, tls_peer_subject=subject, offered=offered)


def refused(exchange, response) -> str:
    with pytest.raises(AuthenticationFailed) as info:
        exchange.step(response)
    return info.value.reason


# -- offering ---------------------------------------------------------------

def test_mechanisms_per_protocol(auth):
    assert auth.mechanisms(protocol="amqp091", allow_anonymous=False) == [
        "PLAIN", "AMQPLAIN"]
    assert auth.mechanisms(protocol="amqp091", allow_anonymous=False,
                           offered=["SCRAM-SHA-256", "PLAIN"]) == ["SCRAM-SHA-256", "PLAIN"]
    assert auth.mechanisms(protocol="amqp10", allow_anonymous=False) == [
        "SCRAM-SHA-256", "PLAIN"]
    assert auth.mechanisms(protocol="amqp10", allow_anonymous=True,
                           tls_peer_subject="CN=x") == [
        "SCRAM-SHA-256", "PLAIN", "EXTERNAL", "ANONYMOUS"]


def test_anonymous_needs_anonymous_user():
    bare = Authenticator(UserDirectory([ALICE]))
    assert "ANONYMOUS" not in bare.mechanisms(protocol="amqp10", allow_anonymous=True)


def test_offered_restricts_and_orders(auth):
    assert auth.mechanisms(protocol="amqp10", allow_anonymous=False,
                           offered=["PLAIN", "AMQPLAIN", "BOGUS", "SCRAM-SHA-256"]) == [
        "PLAIN", "SCRAM-SHA-256"]


def test_unknown_protocol(auth):
    with pytest.raises(ValueError):
        auth.mechanisms(protocol="mqtt", allow_anonymous=False)


@pytest.mark.parametrize("mechanism, protocol, anonymous, subject", [
    ("AMQPLAIN", "amqp10", False, None),
    ("EXTERNAL", "amqp091", False, None),
    ("ANONYMOUS", "amqp10", False, None),
    ("CRAM-MD5", "amqp091", False, None),
    ("plain", "amqp091", False, None),
])
def test_start_refuses_mechanism_not_offered(auth, mechanism, protocol, anonymous, subject):
    with pytest.raises(AuthenticationFailed) as info:
        start(auth, mechanism, protocol=protocol, anonymous=anonymous, subject=subject)
    assert "is not offered" in info.value.reason


def test_start_respects_offered(auth):
    with pytest.raises(AuthenticationFailed):
        auth.start("PLAIN", peer_host="::1", protocol="amqp10", allow_anonymous=False,
                   offered=["SCRAM-SHA-256"])


# -- PLAIN --------------------------------------------------------------------

def test_plain_right_password(auth):
    result = start(auth, "PLAIN").step(b"\x00alice\x00wonderland")
    assert result == Authenticated(ALICE)


def test_plain_with_matching_authzid(auth):
    assert start(auth, "PLAIN").step(b"alice\x00alice\x00wonderland").user is ALICE


def test_plain_with_other_authzid_refused(auth):
    reason = refused(start(auth, "PLAIN"), b"guest\x00alice\x00wonderland")
    assert "authorization identity" in reason


@pytest.mark.parametrize("response", [b"\x00alice\x00wrong", b"\x00nobody\x00wonderland",
                                      b"\x00device-7\x00anything"])
def test_plain_wrong_credentials_same_reason(auth, response):
    assert refused(start(auth, "PLAIN"), response) == "invalid credentials"


@pytest.mark.parametrize("response", [b"", b"alice", b"\x00alice", b"\x00al\xffice\x00pw"])
def test_plain_malformed(auth, response):
    assert "malformed PLAIN response" in refused(start(auth, "PLAIN"), response)


def test_plain_none_response_is_empty(auth):
    assert "empty" in refused(start(auth, "PLAIN"), None)


def test_exchange_finished_after_success_or_failure(auth):
    ok = start(auth, "PLAIN")
    ok.step(b"\x00alice\x00wonderland")
    assert "already finished" in refused(ok, b"\x00alice\x00wonderland")
    bad = start(auth, "PLAIN")
    refused(bad, b"\x00alice\x00wrong")
    assert "already finished" in refused(bad, b"\x00alice\x00wonderland")


# -- loopback-only users ------------------------------------------------------

@pytest.mark.parametrize("peer, allowed", [
    ("127.0.0.1", True), ("127.8.9.10", True), ("::1", True), ("[::1]", True),
    ("::ffff:127.0.0.1", True), ("10.0.0.1", False), ("192.168.1.1", False),
    ("::2", False), ("localhost", False), ("", False),
])
def test_loopback_only_user(auth, peer, allowed):
    exchange = start(auth, "PLAIN", peer=peer)
    if allowed:
        assert exchange.step(b"\x00guest\x00guest").user is GUEST
    else:
        assert refused(exchange, b"\x00guest\x00guest") == (
            "user 'guest' can only connect via localhost")


def test_loopback_reason_only_after_password_checked(auth):
    assert refused(start(auth, "PLAIN", peer="10.0.0.1"),
                   b"\x00guest\x00wrong") == "invalid credentials"


def test_is_loopback_ignores_zone():
    assert is_loopback("::1%lo")


# -- AMQPLAIN -----------------------------------------------------------------

def test_amqplain_right_and_wrong(auth):
    assert start(auth, "AMQPLAIN").step(
        AMQPLAIN("alice", "wonderland").start(None)).user is ALICE
    assert refused(start(auth, "AMQPLAIN"),
                   AMQPLAIN("alice", "nope").start(None)) == "invalid credentials"


def test_amqplain_truncated(auth):
    data = AMQPLAIN("alice", "wonderland").start(None)
    assert "truncated" in refused(start(auth, "AMQPLAIN"), data[:-3])


# -- ANONYMOUS -----------------------------------------------------------------

def test_anonymous_accepted_when_allowed(auth):
    exchange = start(auth, "ANONYMOUS", protocol="amqp10", anonymous=True)
    assert exchange.step(b"trace@example").user is ANON


def test_anonymous_refused_when_not_allowed(auth):
    with pytest.raises(AuthenticationFailed):
        start(auth, "ANONYMOUS", protocol="amqp10", anonymous=False)


def test_anonymous_user_missing_from_directory():
    broken = Authenticator(UserDirectory([ALICE]), anonymous_user="ghost")
    exchange = broken.start("ANONYMOUS", peer_host="::1", protocol="amqp10",
                            allow_anonymous=True)
    assert refused(exchange, b"") == "anonymous login is not available"


# -- EXTERNAL -----------------------------------------------------------------

def test_external_maps_cn_to_user(auth):
    exchange = start(auth, "EXTERNAL", protocol="amqp10", subject="CN=device-7,O=Acme")
    assert exchange.step(b"").user is CERT_ONLY


def test_external_with_matching_authzid(auth):
    exchange = start(auth, "EXTERNAL", subject="/O=Acme/CN=device-7")
    assert exchange.step(b"device-7").user is CERT_ONLY


@pytest.mark.parametrize("subject, response, fragment", [
    ("CN=stranger,O=Acme", b"", "no user for the client certificate"),
    ("O=Acme", b"", "exactly one common name"),
    ("CN=device-7", b"alice", "authorization identity"),
    ("CN=device-7", b"\xff", "not UTF-8"),
])
def test_external_refused(auth, subject, response, fragment):
    exchange = start(auth, "EXTERNAL", subject=subject)
    assert fragment in refused(exchange, response)


# -- SCRAM-SHA-256 ---------------------------------------------------------------

def scram_login(auth, user, password, *, peer="10.0.0.1", protocol="amqp10"):
    client = scramp.ScramClient(["SCRAM-SHA-256"], user, password)
    exchange = start(auth, "SCRAM-SHA-256", peer=peer, protocol=protocol)
    challenge = exchange.step(client.get_client_first().encode())
    assert isinstance(challenge, Challenge)
    client.set_server_first(challenge.data.decode())
    return client, exchange, client.get_client_final().encode()


@pytest.mark.parametrize("protocol", ["amqp091", "amqp10"])
def test_scram_full_exchange(auth, protocol):
    client, exchange, final = scram_login(auth, "alice", "wonderland", protocol=protocol)
    result = exchange.step(final)
    assert isinstance(result, Authenticated) and result.user is ALICE
    client.set_server_final(result.additional_data.decode())  # client verifies the server


def test_scram_wrong_password(auth):
    _, exchange, final = scram_login(auth, "alice", "wrong")
    assert refused(exchange, final) == "invalid credentials"


def test_scram_unknown_user_looks_like_a_real_one(auth):
    first = []
    for _ in range(2):
        client = scramp.ScramClient(["SCRAM-SHA-256"], "nobody", "x")
        challenge = start(auth, "SCRAM-SHA-256").step(client.get_client_first().encode())
        first.append(challenge.data.decode())
    salts = [dict(p.split("=", 1) for p in msg.split(","))["s"] for msg in first]
    assert salts[0] == salts[1]  # stable fake salt
    _, exchange, final = scram_login(auth, "nobody", "x")
    assert refused(exchange, final) == "invalid credentials"


def test_scram_user_without_password(auth):
    _, exchange, final = scram_login(auth, "device-7", "x")
    assert refused(exchange, final) == "invalid credentials"


def test_scram_wrong_nonce(auth):
    _, exchange, final = scram_login(auth, "alice", "wonderland")
    text = final.decode()
    parts = dict(p.split("=", 1) for p in text.split(","))
    tampered = text.replace("r=" + parts["r"], "r=" + parts["r"][:-4] + "AAAA")
    assert refused(exchange, tampered.encode()) == "invalid credentials"


def test_scram_loopback_only(auth):
    _, exchange, final = scram_login(auth, "guest", "guest", peer="10.0.0.1")
    assert "only connect via localhost" in refused(exchange, final)
    _, exchange, final = scram_login(auth, "guest", "guest", peer="127.0.0.1")
    assert exchange.step(final).user is GUEST


@pytest.mark.parametrize("first", [b"", b"\xff\xfe", b"garbage", b"n,,n=alice",
                                   b"p=tls-unique,,n=alice,r=abc", b"n,a=bob,n=alice,r=abc"])
def test_scram_malformed_client_first(auth, first):
    reason = refused(start(auth, "SCRAM-SHA-256"), first)
    assert reason.startswith(("malformed SCRAM", "invalid credentials"))


@settings(max_examples=examples(150), deadline=None)
@given(st.binary(max_size=120), st.binary(max_size=120))
def test_scram_never_raises_other_errors(auth, first, final):
    exchange = start(auth, "SCRAM-SHA-256")
    try:
        exchange.step(first)
        exchange.step(final)
    except AuthenticationFailed:
        pass


@settings(max_examples=examples(100), deadline=None)
@given(st.sampled_from(["PLAIN", "AMQPLAIN", "EXTERNAL", "ANONYMOUS"]), st.binary(max_size=80))
def test_simple_mechanisms_never_raise_other_errors(auth, mechanism, response):
    exchange = auth.start(mechanism, peer_host="10.0.0.1", protocol="amqp091",
                          allow_anonymous=True, tls_peer_subject="CN=device-7")
    try:
        exchange.step(response)
    except AuthenticationFailed:
        pass


# -- the throttle's gate and the claimed user name ------------------------------

class Gate:
    """Records the names it is asked about; refuses when told to."""

    def __init__(self, refuse: bool = False) -> None:
        self.asked: list[str] = []
        self.refuse = refuse

    def __call__(self, user: str) -> None:
        self.asked.append(user)
        if self.refuse:
            raise LoginThrottled(user, "too many failed logins", 0.0)


def gated(auth, mechanism, gate, **kwargs):
    offered = ["SCRAM-SHA-256"] if mechanism == "SCRAM-SHA-256" else None
    return auth.start(mechanism, peer_host="10.0.0.1", protocol=kwargs.get("protocol", "amqp091"),
                      allow_anonymous=True, tls_peer_subject=kwargs.get("subject"),
                      offered=offered, gate=gate)


@pytest.mark.parametrize("mechanism,response", [
    ("PLAIN", b"\0alice\0wrong"),
    ("AMQPLAIN", AMQPLAIN("alice", "wrong").start(None)),
])
def test_password_mechanisms_ask_the_gate_before_checking(auth, mechanism, response):
    gate = Gate()
    exchange = gated(auth, mechanism, gate)
    assert refused(exchange, response) == "invalid credentials"
    assert gate.asked == ["alice"] and exchange.claimed_user == "alice"


def test_a_refusing_gate_stops_the_password_check(auth, monkeypatch):
    checked = []
    monkeypatch.setattr(auth, "check_password", lambda *a: checked.append(a))
    exchange = gated(auth, "PLAIN", Gate(refuse=True))
    with pytest.raises(LoginThrottled) as info:
        exchange.step(b"\0alice\0wonderland")
    assert checked == [] and info.value.user == "alice" and exchange.finished
    assert "too many failed logins" in info.value.reason


def test_scram_asks_the_gate_at_client_first(auth):
    gate = Gate()
    client = scramp.ScramClient(["SCRAM-SHA-256"], "alice", "wonderland")
    exchange = gated(auth, "SCRAM-SHA-256", gate, protocol="amqp10")
    assert isinstance(exchange.step(client.get_client_first().encode()), Challenge)
    assert gate.asked == ["alice"] and exchange.claimed_user == "alice"
    refusing = gated(auth, "SCRAM-SHA-256", Gate(refuse=True), protocol="amqp10")
    with pytest.raises(LoginThrottled):   # not turned into "invalid credentials" by scramp
        refusing.step(scramp.ScramClient(["SCRAM-SHA-256"], "bob", "x").get_client_first().encode())
    assert refusing.claimed_user == "bob"


def test_external_and_anonymous_claim_a_name_without_the_gate(auth):
    gate = Gate(refuse=True)
    external = gated(auth, "EXTERNAL", gate, protocol="amqp10", subject="CN=device-7")
    assert external.step(b"").user is CERT_ONLY and external.claimed_user == "device-7"
    anonymous = gated(auth, "ANONYMOUS", gate, protocol="amqp10")
    assert anonymous.step(b"trace").user is ANON and anonymous.claimed_user == "anon"
    assert gate.asked == []


def test_plain_with_other_authzid_claims_the_user_name(auth):
    exchange = start(auth, "PLAIN")
    refused(exchange, b"bob\0alice\0wonderland")
    assert exchange.claimed_user == "alice"


# -- renewing a secret (0-9-1 connection.update-secret) -----------------------

@pytest.mark.parametrize("mechanism", ["PLAIN", "AMQPLAIN", "SCRAM-SHA-256"])
def test_renew_secret_checks_the_password_and_re_reads_the_user(mechanism):
    users = UserDirectory([ALICE])
    auth = Authenticator(users)
    assert auth.renew_secret(mechanism, "alice", b"wonderland") is ALICE
    rotated = User("alice", hash_password("rotated"))
    users.replace([rotated])
    assert auth.renew_secret(mechanism, "alice", b"rotated") is rotated
    with pytest.raises(AuthenticationFailed, match="invalid credentials"):
        auth.renew_secret(mechanism, "alice", b"wonderland")


@pytest.mark.parametrize("mechanism", ["EXTERNAL", "ANONYMOUS"])
def test_renew_secret_is_refused_where_the_login_had_no_secret(auth, mechanism):
    with pytest.raises(AuthenticationFailed, match=f"a {mechanism} login has no secret to update"):
        auth.renew_secret(mechanism, "device-7", b"anything")


def test_renew_secret_refuses_a_secret_that_is_not_utf8(auth):
    with pytest.raises(AuthenticationFailed, match="not UTF-8"):
        auth.renew_secret("PLAIN", "alice", b"\xff\xfe")
