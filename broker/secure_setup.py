"""What ``--secure`` makes under a data dir: a throwaway certificate
authority, one certificate for this machine's processes, a token secret
key and a superuser token, and the settings that turn TLS, authentication
and authorization on with them (docs/security.md).

Everything is made once and kept: a second start on the same data dir
uses the same files, so clients keep working. The certificate names
``localhost``, ``127.0.0.1``, ``::1`` and this machine's host name, so the
cluster's own calls (which always check names) and clients that ask for
hostname checks both find theirs. Keys are written readable by their owner
only.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import secrets
import socket
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from protos.tokens import create_secret_key, create_token

SUPERUSER = "admin"
CERT_DAYS = 3650


@dataclass(frozen=True)
class SecureFiles:
    directory: Path

    @property
    def ca(self) -> Path:
        return self.directory / "ca.cert.pem"

    @property
    def certificate(self) -> Path:
        return self.directory / "server.cert.pem"

    @property
    def key(self) -> Path:
        return self.directory / "server.key.pem"

    @property
    def secret_key(self) -> Path:
        return self.directory / "token-secret.key"

    @property
    def admin_token(self) -> Path:
        return self.directory / "admin.token"

    @property
    def raft_secret(self) -> Path:
        return self.directory / "raft.secret"

    def how_to_connect(self, service_url_tls: str) -> str:
        """What --secure prints after the service URL."""
        return (
            f"TLS: {service_url_tls} (CA {self.ca}); superuser token in {self.admin_token}\n"
            f"  Client({service_url_tls!r}, tls_trust_certs_file_path={str(self.ca)!r},\n"
            f"         authentication=AuthenticationToken('file://{self.admin_token}'))\n"
            f"  magnetar-admin --service-url {service_url_tls} "
            f"--tls-trust-certs-file-path {self.ca} --auth-params file://{self.admin_token} "
            "tenants list"
        )

    def settings(self) -> dict[str, object]:
        """The security settings every process of the cluster gets."""
        return {
            "authentication_enabled": True,
            "authorization_enabled": True,
            "superuser_roles": SUPERUSER,
            "token_secret_key": f"file://{self.secret_key}",
            "tls_certificate_file_path": str(self.certificate),
            "tls_key_file_path": str(self.key),
            "tls_trust_certs_file_path": str(self.ca),
        }

    def client_settings(self) -> dict[str, object]:
        """What the broker and the bookie add for their own calls."""
        return {
            "broker_client_auth_params": f"file://{self.admin_token}",
            "broker_client_tls_enabled": True,
        }


def _write(path: Path, data: bytes, private: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def make_ca(common_name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=CERT_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def make_certificate(
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    common_name: str,
    dns_names: list[str],
    ip_addresses: list[str],
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A certificate signed by the CA, for servers and clients alike."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    names: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    names += [x509.IPAddress(ipaddress.ip_address(a)) for a in ip_addresses]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=CERT_DAYS))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return key, cert


def pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def ensure_secure_files(data_dir: Path) -> SecureFiles:
    """The files under ``data_dir/security``, made when missing."""
    files = SecureFiles(data_dir / "security")
    if files.admin_token.exists() and files.certificate.exists():
        return files
    files.directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = make_ca("magnetar local CA")
    host = socket.gethostname()
    key, cert = make_certificate(
        ca_key, ca_cert, host, sorted({"localhost", host}), ["127.0.0.1", "::1"]
    )
    _write(files.ca, pem(ca_cert), private=False)
    _write(files.certificate, pem(cert), private=False)
    _write(files.key, _pem_key(key), private=True)
    secret = create_secret_key()
    _write(files.secret_key, secret, private=True)
    _write(files.raft_secret, secrets.token_hex(32).encode(), private=True)
    _write(files.admin_token, create_token(SUPERUSER, secret_key=secret).encode(), private=True)
    return files
