"""Test certificates, made by the tests themselves with ``cryptography`` (never checked in).

One CA signs a server certificate for 127.0.0.1/localhost, an expired one, and a client certificate
whose CN names a broker user; a second, unrelated CA plays the wrong authority.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ("Pki", "make_pki")

_NOW = datetime.datetime.now(datetime.UTC)


@dataclass(frozen=True)
class Pki:
    """Paths of PEM files."""

    ca: Path
    server_cert: Path
    server_key: Path
    expired_cert: Path
    expired_key: Path
    client_cert: Path
    client_key: Path
    client_user: str
    other_ca: Path


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write(path: Path, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey | None = None) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    if key is not None:
        path.with_suffix(".key").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )


def _ca(cn: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(_name(cn))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_NOW - datetime.timedelta(days=1))
        .not_valid_after(_NOW + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _leaf(
    cn: str,
    ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey],
    *,
    server: bool,
    expired: bool = False,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    import ipaddress

    key = _key()
    start, end = (
        (_NOW - datetime.timedelta(days=30), _NOW - datetime.timedelta(days=1))
        if expired
        else (_NOW - datetime.timedelta(days=1), _NOW + datetime.timedelta(days=30))
    )
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(ca[0].subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca[1].public_key()), critical=False)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
    return builder.sign(ca[1], hashes.SHA256()), key


def make_pki(directory: Path, client_user: str) -> Pki:
    """Write a CA, server, expired-server and client certificates (and keys) under ``directory``."""
    ca = _ca("Gear test CA")
    other = _ca("Some other CA")
    _write(directory / "ca.pem", ca[0])
    _write(directory / "other-ca.pem", other[0])
    for name, (cert, key) in {
        "server": _leaf("localhost", ca, server=True),
        "expired": _leaf("localhost", ca, server=True, expired=True),
        "client": _leaf(client_user, ca, server=False),
    }.items():
        _write(directory / f"{name}.pem", cert, key)
    return Pki(
        ca=directory / "ca.pem",
        server_cert=directory / "server.pem",
        server_key=directory / "server.key",
        expired_cert=directory / "expired.pem",
        expired_key=directory / "expired.key",
        client_cert=directory / "client.pem",
        client_key=directory / "client.key",
        client_user=client_user,
        other_ca=directory / "other-ca.pem",
    )
