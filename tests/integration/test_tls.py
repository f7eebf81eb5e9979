"""TLS termination over real sockets: modes, version floor, SNI, client certificates, reload."""
from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import time

import pytest

from gateway.protocol_header import AMQP091_HEADER, AMQP10_SASL_HEADER, AMQP10_TLS_HEADER
from tests.support.certificates import TestPKI
from tests.support.gateway_process import default_config

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    ca = TestPKI(str(d))
    other_ca = TestPKI(str(d), ca_name="Other CA")
    return {
        "ca": ca,
        "server": ca.issue("gateway.test", names=("gateway.test", "localhost")),
        "sni": ca.issue("mq.example.org", names=("mq.example.org",)),
        "server_rsa": ca.issue("gateway.test", names=("gateway.test",), tag="rsa-server",
                               key_type="rsa"),
        "alice": ca.issue("alice", server=False),
        "mallory": other_ca.issue("alice", server=False, tag="mallory"),
        "dir": str(d),
    }


def tls_config(pki, mode="on", verify="none", min_version="1.2", sni=False, cert=None,
               extra: str = "") -> str:
    cert = cert or pki["server"]
    extra += (f"    tls: {mode}\n    tls_cert_file: {cert.cert_file}\n"
             f"    tls_key_file: {cert.key_file}\n    tls_ca_file: {pki['ca'].ca_file}\n"
             f"    tls_verify_client: {verify}\n    tls_min_version: '{min_version}'\n")
    if sni:
        extra += (f"    tls_sni:\n      - server_name: mq.example.org\n"
                  f"        cert_file: {pki['sni'].cert_file}\n        key_file: {pki['sni'].key_file}\n")
    return default_config(listener_extra=extra)


def client_context(pki, *, cert=None, max_version=None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=pki["ca"].ca_file)
    ctx.check_hostname = False
    if cert is not None:
        ctx.load_cert_chain(cert.cert_file, cert.key_file)
    if max_version is not None:
        ctx.maximum_version = max_version
    return ctx


def tls_socket(gw, ctx, server_hostname=None, raw=None) -> ssl.SSLSocket:
    raw = raw or socket.create_connection((gw.host, gw.amqp_port), timeout=10)
    return ctx.wrap_socket(raw, server_hostname=server_hostname)


def peer_cn(s: ssl.SSLSocket) -> str:
    subject = dict(x[0] for x in s.getpeercert()["subject"])
    return subject["commonName"]


def read_all(s) -> bytes:
    out = b""
    while True:
        try:
            chunk = s.recv(4096)
        except (ssl.SSLError, ConnectionResetError):
            return out
        if not chunk:
            return out
        out += chunk


def test_tls_on_serves_the_sniffer_inside_tls(fresh_gateway, pki):
    gw = fresh_gateway(config_text=tls_config(pki))
    with tls_socket(gw, client_context(pki)) as s:
        assert s.version() in ("TLSv1.2", "TLSv1.3")
        assert peer_cn(s) == "gateway.test"
        s.sendall(b"NOT AMQP")
        assert read_all(s) == AMQP091_HEADER


def test_tls_on_refuses_plain_bytes(fresh_gateway, pki):
    gw = fresh_gateway(config_text=tls_config(pki))
    with socket.create_connection((gw.host, gw.amqp_port), timeout=10) as s:
        s.sendall(AMQP091_HEADER)
        data = read_all(s)
        assert AMQP091_HEADER not in data and b"\x01\x00\x00" not in data[:3]


def test_version_floor_is_enforced_by_the_server(fresh_gateway, pki):
    gw = fresh_gateway(config_text=tls_config(pki, min_version="1.3"))
    with pytest.raises((ssl.SSLError, ConnectionResetError)):
        with tls_socket(gw, client_context(pki, max_version=ssl.TLSVersion.TLSv1_2)) as s:
            s.sendall(b"x")
            s.recv(10)
    with tls_socket(gw, client_context(pki)) as s:
        assert s.version() == "TLSv1.3"


def s_client(gw, pki, *args) -> subprocess.CompletedProcess:
    """``openssl s_client`` against the gateway, stdin closed at once (no application data)."""
    if not shutil.which("openssl"):
        pytest.skip("openssl not installed")
    return subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{gw.amqp_port}",
                           "-CAfile", pki["ca"].ca_file, *args], input=b"", capture_output=True,
                          timeout=30)


def server_alert(r: subprocess.CompletedProcess) -> int | None:
    """The TLS alert number the *server* sent (s_client prints "SSL alert number N" only
    for an alert it received), or None."""
    m = re.search(rb"SSL alert number (\d+)", r.stderr)
    return int(m.group(1)) if m else None


def negotiated_cipher(r: subprocess.CompletedProcess) -> str:
    m = re.search(rb"Cipher is (\S+)", r.stdout)
    return m.group(1).decode() if m else ""


ALERT_HANDSHAKE_FAILURE, ALERT_PROTOCOL_VERSION = 40, 70
# SECLEVEL=0: OpenSSL 3 otherwise refuses to even offer TLS 1.0/1.1 itself, and the test
# would pass without the server having refused anything
OLD_PROTOCOL_CIPHERS = "DEFAULT@SECLEVEL=0"


@pytest.mark.parametrize("old", ["-tls1", "-tls1_1"])
def test_server_refuses_tls_below_12_with_a_protocol_version_alert(fresh_gateway, pki, old):
    gw = fresh_gateway(config_text=tls_config(pki))
    r = s_client(gw, pki, old, "-cipher", OLD_PROTOCOL_CIPHERS)
    assert r.returncode != 0
    assert b"written 0 bytes" not in r.stdout            # the ClientHello really went out
    assert server_alert(r) == ALERT_PROTOCOL_VERSION, r.stderr
    assert negotiated_cipher(r) == "(NONE)"
    r = s_client(gw, pki, "-tls1_2")
    assert r.returncode == 0, r.stderr
    assert b"Protocol  : TLSv1.2" in r.stdout
    assert server_alert(r) is None


def test_openssl_s_client_sees_sni(fresh_gateway, pki):
    gw = fresh_gateway(config_text=tls_config(pki, sni=True))
    r = s_client(gw, pki, "-tls1_2", "-servername", "mq.example.org")
    assert r.returncode == 0, r.stderr
    assert b"CN = mq.example.org" in r.stdout or b"CN=mq.example.org" in r.stdout
    assert b"Verify return code: 0 (ok)" in r.stdout
    r = s_client(gw, pki, "-tls1_2", "-servername", "other.example.org")
    assert b"CN = gateway.test" in r.stdout or b"CN=gateway.test" in r.stdout


@pytest.mark.parametrize("weak", [
    "AES128-SHA",                   # static RSA key exchange, CBC
    "AES256-GCM-SHA384",            # static RSA key exchange (no forward secrecy)
    "ECDHE-RSA-AES128-SHA",         # forward secret, but CBC with SHA-1 (no AEAD)
    "ECDHE-RSA-AES256-SHA384",      # forward secret, but CBC (no AEAD)
])
def test_default_cipher_list_refuses_suites_without_ecdhe_and_aead(fresh_gateway, pki, weak):
    # an RSA certificate: with an EC one the RSA suites could never be chosen anyway
    gw = fresh_gateway(config_text=tls_config(pki, cert=pki["server_rsa"]))
    r = s_client(gw, pki, "-tls1_2", "-cipher", weak)
    assert r.returncode != 0
    assert server_alert(r) == ALERT_HANDSHAKE_FAILURE, r.stderr
    r = s_client(gw, pki, "-tls1_2", "-cipher", "ECDHE-RSA-AES128-GCM-SHA256")
    assert r.returncode == 0, r.stderr
    assert negotiated_cipher(r) == "ECDHE-RSA-AES128-GCM-SHA256"


def test_configured_tls_ciphers_are_the_only_suites_negotiated(fresh_gateway, pki):
    only = "ECDHE-ECDSA-CHACHA20-POLY1305"
    gw = fresh_gateway(config_text=tls_config(pki, extra=f"    tls_ciphers: '{only}'\n"))
    r = s_client(gw, pki, "-tls1_2")                      # the client offers its whole list
    assert r.returncode == 0, r.stderr
    assert negotiated_cipher(r) == only                   # the default would pick AES256-GCM
    r = s_client(gw, pki, "-tls1_2", "-cipher", "ECDHE-ECDSA-AES256-GCM-SHA384")
    assert r.returncode != 0                              # allowed by default, not by this list
    assert server_alert(r) == ALERT_HANDSHAKE_FAILURE, r.stderr


def test_sni_picks_the_certificate(fresh_gateway, pki):
    gw = fresh_gateway(config_text=tls_config(pki, sni=True))
    with tls_socket(gw, client_context(pki), server_hostname="mq.example.org") as s:
        assert peer_cn(s) == "mq.example.org"
    with tls_socket(gw, client_context(pki), server_hostname="gateway.test") as s:
        assert peer_cn(s) == "gateway.test"


def test_client_certificate_required_and_verified(fresh_gateway, pki):
    gw = fresh_gateway(config_text=tls_config(pki, verify="required"))
    with tls_socket(gw, client_context(pki, cert=pki["alice"])) as s:
        s.sendall(b"garbage!")
        assert read_all(s) == AMQP091_HEADER
    for cert in (None, pki["mallory"]):
        with pytest.raises((ssl.SSLError, ConnectionResetError, BrokenPipeError)):
            with tls_socket(gw, client_context(pki, cert=cert)) as s:
                s.sendall(b"garbage!")
                if not s.recv(100):
                    raise ConnectionResetError("closed without an answer")


def test_auto_mode_serves_plain_and_tls_on_one_port(fresh_gateway, pki):
    gw = fresh_gateway(config_text=tls_config(pki, mode="auto"))
    with socket.create_connection((gw.host, gw.amqp_port), timeout=10) as s:
        s.sendall(b"GARBAGE!")
        assert read_all(s) == AMQP091_HEADER
    with tls_socket(gw, client_context(pki)) as s:
        assert peer_cn(s) == "gateway.test"
        s.sendall(b"GARBAGE!")
        assert read_all(s) == AMQP091_HEADER


def test_amqp10_tls_header_upgrades_then_sniffs_again(fresh_gateway, pki):
    gw = fresh_gateway(config_text=tls_config(pki, mode="auto"))
    raw = socket.create_connection((gw.host, gw.amqp_port), timeout=10)
    raw.sendall(AMQP10_TLS_HEADER)
    got = b""
    while len(got) < 8:
        got += raw.recv(8 - len(got))
    assert got == AMQP10_TLS_HEADER
    with tls_socket(gw, client_context(pki), raw=raw) as s:
        assert peer_cn(s) == "gateway.test"
        s.sendall(AMQP10_TLS_HEADER)           # no TLS inside TLS
        assert read_all(s) == AMQP10_SASL_HEADER


def test_amqp10_tls_header_refused_without_tls(gateway):
    with socket.create_connection((gateway.host, gateway.amqp_port), timeout=10) as s:
        s.sendall(AMQP10_TLS_HEADER)
        assert read_all(s) == AMQP10_SASL_HEADER


@pytest.mark.process
def test_sighup_reloads_certificate_for_new_connections_only(fresh_gateway, pki, tmp_path):
    cert_file, key_file = tmp_path / "live.crt", tmp_path / "live.key"
    shutil.copy(pki["server"].cert_file, cert_file)
    shutil.copy(pki["server"].key_file, key_file)
    from tests.support.certificates import Issued
    live = Issued(str(cert_file), str(key_file), "")
    gw = fresh_gateway(config_text=tls_config(pki, cert=live), process=True)  # SIGHUP
    old = tls_socket(gw, client_context(pki))
    assert peer_cn(old) == "gateway.test"
    renewed = pki["ca"].issue("renewed.test", names=("renewed.test",))
    shutil.copy(renewed.cert_file, cert_file)
    shutil.copy(renewed.key_file, key_file)
    gw.signal(signal.SIGHUP)
    assert gw.wait_for_log("TLS material reloaded")
    with tls_socket(gw, client_context(pki)) as s:
        assert peer_cn(s) == "renewed.test"
    old.sendall(b"GARBAGE!")                   # the old connection is still up and served
    assert read_all(old) == AMQP091_HEADER
    old.close()
    # a broken file keeps the previous material
    with open(cert_file, "w") as f:
        f.write("not a certificate")
    gw.signal(signal.SIGHUP)
    assert gw.wait_for_log("TLS reload failed, keeping the previous certificates")
    with tls_socket(gw, client_context(pki)) as s:
        assert peer_cn(s) == "renewed.test"


@pytest.mark.process  # runs the CLI as a process
def test_check_config_reports_a_bad_certificate(tmp_path, pki):
    import sys
    from tests.support.gateway_process import REPO
    bad = tmp_path / "bad.crt"
    bad.write_text("garbage")
    cfg = tmp_path / "gw.yaml"
    cfg.write_text(f"listeners:\n  - tls: on\n    tls_cert_file: {bad}\n"
                   f"    tls_key_file: {pki['server'].key_file}\n")
    r = subprocess.run([sys.executable, "-m", "gateway.cli", "check-config", str(cfg)], cwd=REPO,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "cannot load certificate" in r.stderr and str(bad) in r.stderr
