"""TLS for every gRPC listener and every channel, from PEM files.

Theory of operation. A process that has a certificate and key
(``tls_certificate_file_path``, ``tls_key_file_path``) listens with TLS on
its own port (``broker_service_port_tls``, ``bookie_port_tls``,
``metastore_port_tls``) beside its plaintext port, which ``-1`` switches
off. With ``tls_require_trusted_client_cert_on_connect`` a caller must
present a certificate signed by ``tls_trust_certs_file_path`` (mutual TLS).

A caller (:class:`TlsClient`) trusts ``trust_certs`` (gRPC's own roots when
None) and, like Pulsar's client, checks the server's name only when asked
(``tls_validate_hostname``). gRPC always checks a name, so when the name is
not to be checked the caller first reads the server's certificate with
Python's ``ssl`` (checking its chain, not its name) and tells gRPC to expect
a name that certificate carries. With ``tls_allow_insecure_connection``
the chain is not checked either: the certificate read is trusted as it is.
The cluster's own calls always check names (the certificates
``magnetar local-cluster --secure`` makes carry them).

When a TLS connection fails, :func:`diagnose` says why in words (the
certificate is not trusted, the name does not match, the port does not
speak TLS), instead of gRPC's UNAVAILABLE.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from dataclasses import dataclass
from typing import Any

import grpc

# How long reading a server's certificate may take.
PROBE_TIMEOUT_S = 5.0
# How long a diagnosis of a failed connection may take: a broker that does
# not answer at all is a broken connection, not a TLS question.
DIAGNOSE_TIMEOUT_S = 1.0


class TlsConfigError(ValueError):
    """TLS files that cannot be used; the message names the file and why."""


class TlsRefused(ConnectionError):
    """The server answered, but the TLS handshake with it failed (its
    certificate, its name, or it does not speak TLS): trying again will not
    help. A server that cannot be reached raises plain ConnectionError."""


def read_pem(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise TlsConfigError(f"{what} {path}: {exc.strerror}") from None
    if b"-----BEGIN" not in data:
        raise TlsConfigError(f"{what} {path} is not PEM")
    return data


def server_credentials(
    certificate_path: str, key_path: str, trust_certs_path: str, require_client_cert: bool
) -> grpc.ServerCredentials:
    """A listener's credentials (mutual TLS with ``require_client_cert``)."""
    certificate = read_pem(certificate_path, "tls_certificate_file_path")
    key = read_pem(key_path, "tls_key_file_path")
    roots = read_pem(trust_certs_path, "tls_trust_certs_file_path") if trust_certs_path else None
    if require_client_cert and roots is None:
        raise TlsConfigError(
            "tls_require_trusted_client_cert_on_connect needs tls_trust_certs_file_path "
            "(the CA that signs the callers' certificates)"
        )
    return grpc.ssl_server_credentials(
        [(key, certificate)], root_certificates=roots, require_client_auth=require_client_cert
    )


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


@dataclass(frozen=True)
class TlsClient:
    """How a caller speaks TLS."""

    trust_certs: bytes | None = None  # PEM roots; None: gRPC's default roots
    validate_hostname: bool = True
    allow_insecure: bool = False
    certificate: bytes | None = None  # the caller's own, for mutual TLS
    private_key: bytes | None = None

    @classmethod
    def from_files(
        cls,
        trust_certs_path: str | None,
        validate_hostname: bool,
        allow_insecure: bool,
        certificate_path: str | None = None,
        key_path: str | None = None,
    ) -> TlsClient:
        if bool(certificate_path) != bool(key_path):
            raise TlsConfigError("a client certificate needs its key (and the key its certificate)")
        return cls(
            trust_certs=read_pem(trust_certs_path, "trust certs") if trust_certs_path else None,
            validate_hostname=validate_hostname,
            allow_insecure=allow_insecure,
            certificate=read_pem(certificate_path, "certificate") if certificate_path else None,
            private_key=read_pem(key_path, "key") if key_path else None,
        )

    @property
    def needs_probe(self) -> bool:
        """Whether a channel needs the server's certificate read first."""
        return self.allow_insecure or not self.validate_hostname

    def credentials(self, roots: bytes | None = None) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            root_certificates=roots if roots is not None else self.trust_certs,
            private_key=self.private_key,
            certificate_chain=self.certificate,
        )

    def ssl_context(self) -> ssl.SSLContext:
        """The same trust in Python's ``ssl`` (reading certificates, diagnosing);
        names are not checked here."""
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        if self.allow_insecure:
            ctx.verify_mode = ssl.CERT_NONE
        elif self.trust_certs is not None:
            ctx = ssl.create_default_context(cadata=self.trust_certs.decode())
            ctx.check_hostname = False
        if self.certificate is not None and self.private_key is not None:
            _load_client_cert(ctx, self.certificate, self.private_key)
        return ctx

    def probe(
        self, address: str, timeout_s: float = PROBE_TIMEOUT_S
    ) -> tuple[bytes | None, str | None]:
        """(roots to trust, name to expect) for a channel to ``address``:
        the server's own certificate when insecure, and a name it carries
        when names are not checked. Blocks for one handshake (the asyncio
        callers run it in a thread). Raises ConnectionError saying why the
        server cannot be trusted."""
        host, port = split_address(address)
        try:
            with (
                socket.create_connection((host, port), timeout_s) as sock,
                self.ssl_context().wrap_socket(sock, server_hostname=host) as tls,
            ):
                der = tls.getpeercert(binary_form=True)
        except ssl.SSLError as exc:
            raise TlsRefused(describe(exc, address)) from None
        except (OSError, TimeoutError) as exc:
            raise ConnectionError(describe(exc, address)) from None
        if der is None:
            raise ConnectionError(f"{address} showed no certificate")
        roots = ssl.DER_cert_to_PEM_cert(der).encode() if self.allow_insecure else None
        return roots, None if self.validate_hostname else _name_in(der)

    def _secure(
        self, address: str, options: list[tuple[str, Any]], probed: tuple[bytes | None, str | None]
    ) -> tuple[grpc.ChannelCredentials, list[tuple[str, Any]]]:
        roots, name = probed
        if name:
            options = [*options, ("grpc.ssl_target_name_override", name)]
        return self.credentials(roots), options

    async def channel(
        self, address: str, options: list[tuple[str, Any]], timeout_s: float = PROBE_TIMEOUT_S
    ) -> grpc.aio.Channel:
        """An asyncio channel to ``address`` over TLS (reading its certificate
        first, when needed, within ``timeout_s``)."""
        probed = (
            await asyncio.to_thread(self.probe, address, timeout_s)
            if self.needs_probe
            else (None, None)
        )
        credentials, options = self._secure(address, options, probed)
        return grpc.aio.secure_channel(address, credentials, options=options)

    def sync_channel(self, address: str, options: list[tuple[str, Any]]) -> grpc.Channel:
        """A blocking channel to ``address`` over TLS (the probe blocks too)."""
        probed = self.probe(address) if self.needs_probe else (None, None)
        credentials, options = self._secure(address, options, probed)
        return grpc.secure_channel(address, credentials, options=options)


def _load_client_cert(ctx: ssl.SSLContext, certificate: bytes, key: bytes) -> None:
    import os
    import tempfile

    # ssl loads a certificate chain from files only.
    with tempfile.TemporaryDirectory() as tmp:
        cert_path, key_path = os.path.join(tmp, "c.pem"), os.path.join(tmp, "k.pem")
        with open(cert_path, "wb") as f:
            f.write(certificate)
        with open(key_path, "wb") as f:
            f.write(key)
        ctx.load_cert_chain(cert_path, key_path)


def _name_in(der: bytes) -> str | None:
    """A name the certificate is for: its first DNS or IP subject alternative
    name, else its common name."""
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    cert = x509.load_der_x509_certificate(der)
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        for name in (
            *sans.get_values_for_type(x509.DNSName),
            *sans.get_values_for_type(x509.IPAddress),
        ):
            return str(name)
    except x509.ExtensionNotFound:
        pass
    common = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(common[0].value) if common else None


def describe(exc: BaseException, address: str) -> str:
    """Why a TLS connection to ``address`` failed, for people."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return (
            f"the certificate of {address} is not trusted ({exc.verify_message}): "
            "check tls_trust_certs_file_path"
        )
    if isinstance(exc, ssl.SSLError):
        if "WRONG_VERSION_NUMBER" in str(exc) or "record layer" in str(exc):
            return f"{address} does not speak TLS (is it a plaintext port? use magnetar://)"
        return f"TLS with {address} failed: {exc.reason or exc}"
    if isinstance(exc, TimeoutError):
        return f"{address} did not complete a TLS handshake in time"
    return f"cannot connect to {address}: {exc}"


def _handshake(address: str, ctx: ssl.SSLContext) -> None:
    host, port = split_address(address)
    with (
        socket.create_connection((host, port), DIAGNOSE_TIMEOUT_S) as sock,
        ctx.wrap_socket(sock, server_hostname=host),
    ):
        pass


def diagnose(address: str, tls: TlsClient | None) -> str | None:
    """Why a channel to ``address`` could not connect, when it is about TLS:
    a plaintext caller at a TLS port, or a TLS caller whose server is not
    trusted, not named as expected, or not speaking TLS. None when a fresh
    handshake works as asked or cannot even connect (the failure is
    elsewhere: a broker down or unreachable). Blocks for at most one
    handshake of DIAGNOSE_TIMEOUT_S."""
    if tls is None:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        try:
            _handshake(address, ctx)
        except (OSError, TimeoutError):
            return None
        return f"{address} speaks TLS: connect with magnetar+tls://"
    ctx = tls.ssl_context()
    if tls.validate_hostname and not tls.allow_insecure:
        ctx.check_hostname = True
    try:
        _handshake(address, ctx)
    except ssl.SSLCertVerificationError as exc:
        if "mismatch" in str(exc.verify_message).lower() or "hostname" in str(exc).lower():
            host = split_address(address)[0]
            return f"the certificate of {address} is not for {host!r} (tls_validate_hostname is on)"
        return describe(exc, address)
    except ssl.SSLError as exc:
        return describe(exc, address)
    except (OSError, TimeoutError):
        return None  # refused, reset or silent: not a TLS question
    return None
