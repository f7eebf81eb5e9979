"""Test PKI made on the fly with ``cryptography``: a CA, server and client certificates.

Private keys are generated per test run and never committed.
"""
from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass
class Issued:
    cert_file: str
    key_file: str
    subject: str


def _key(key_type: str = "ec"):
    """A fresh private key: P-256 by default; ``"rsa"`` for tests of RSA key exchange
    and ECDHE-RSA suites (an EC certificate cannot negotiate those at all)."""
    if key_type == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return ec.generate_private_key(ec.SECP256R1())


def _write(path: str, data: bytes) -> str:
    with open(path, "wb") as f:
        f.write(data)
    return path


def _name(cn: str, org: str = "amqp-gateway tests") -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, org),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


class TestPKI:
    __test__ = False

    def __init__(self, directory: str, ca_name: str = "Test CA") -> None:
        self.dir = directory
        self.ca_key = _key()
        now = datetime.datetime.now(datetime.timezone.utc)
        self.ca_cert = (
            x509.CertificateBuilder().subject_name(_name(ca_name)).issuer_name(_name(ca_name))
            .public_key(self.ca_key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False),
                           critical=True)
            .sign(self.ca_key, hashes.SHA256()))
        self.ca_file = _write(os.path.join(directory, f"{ca_name.replace(' ', '_')}.pem"),
                              self.ca_cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, cn: str, *, server: bool = True, names: tuple[str, ...] = ("localhost",),
              tag: str | None = None, key_type: str = "ec") -> Issued:
        key = _key(key_type)
        now = datetime.datetime.now(datetime.timezone.utc)
        builder = (
            x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(self.ca_cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False))
        if server:
            alt = [x509.DNSName(n) for n in names] + [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
        cert = builder.sign(self.ca_key, hashes.SHA256())
        stem = os.path.join(self.dir, tag or cn.replace(" ", "_"))
        cert_file = _write(stem + ".crt", cert.public_bytes(serialization.Encoding.PEM))
        key_file = _write(stem + ".key", key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption()))
        return Issued(cert_file, key_file, cert.subject.rfc4514_string())
