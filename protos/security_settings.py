"""The security settings every server process has (Pulsar's names in
snake_case), and what a process builds from them: the guard in front of
its RPCs and the token its own calls to other processes carry.

docs/security.md explains them together.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import grpc
from google.protobuf.descriptor import FileDescriptor, ServiceDescriptor

from protos.access import AccessGuard, ClusterRoles, Gatekeeper, method_name
from protos.credentials import CredentialsError, TokenSupplier, token_supplier
from protos.serving import StartRefused, add_servicer
from protos.settings import setting
from protos.tls import TlsClient, TlsConfigError, server_credentials
from protos.token_types import TokenError


def authentication_enabled_setting() -> Any:
    return setting(
        False,
        "Every RPC (but the gRPC health service) must carry a valid token "
        "(authorization: Bearer <jwt>); others are refused with UNAUTHENTICATED. "
        "Needs token_secret_key or token_public_key.",
    )


def authorization_enabled_setting() -> Any:
    return setting(
        False,
        "Check what the token's role may do (superusers, tenant admins, namespace, topic "
        "and subscription permissions; bookies and metastore: superusers only). Needs "
        "authentication_enabled.",
    )


def superuser_roles_setting() -> Any:
    return setting(
        "",
        "Comma-separated roles that may do everything, on every process; the cluster's "
        "own processes authenticate as one of them (broker_client_auth_params).",
    )


def token_secret_key_setting() -> Any:
    return setting(
        "",
        "Secret key that checks HS256/384/512 tokens: file:///path (its raw bytes) or "
        "data:;base64,<key>. Set this or token_public_key.",
    )


def token_public_key_setting() -> Any:
    return setting(
        "",
        "Public key (DER or PEM) that checks RS256/384/512 or ES256/384/512 tokens: "
        "file:///path or data:;base64,<key>. Set this or token_secret_key.",
    )


def token_auth_claim_setting() -> Any:
    return setting("sub", "The token claim that holds the role.")


def token_cache_max_entries_setting() -> Any:
    return setting(
        1000,
        "Verified tokens remembered (role and expiry), so a client's calls cost one "
        "signature check; the expiry is checked on every call. 0 = none.",
    )


def broker_client_auth_params_setting() -> Any:
    return setting(
        "",
        "The token this process's own calls to other cluster processes carry "
        "(token:<jwt> or file:///path to a file holding it); its role should be one of "
        "superuser_roles. Empty = none (for a cluster without authentication).",
    )


def tls_certificate_file_path_setting() -> Any:
    return setting(
        "",
        "PEM certificate (chain) of this process's TLS listeners; with tls_key_file_path it "
        "opens the TLS port. Empty = no TLS listener.",
    )


def tls_key_file_path_setting() -> Any:
    return setting("", "PEM private key of tls_certificate_file_path (unencrypted).")


def tls_trust_certs_file_path_setting() -> Any:
    return setting(
        "",
        "PEM certificates this process trusts: the CA of the cluster's certificates, for its "
        "own TLS calls to other processes and for the callers' certificates of mutual TLS. "
        "Empty = the system's roots (gRPC's).",
    )


def tls_require_trusted_client_cert_on_connect_setting() -> Any:
    return setting(
        False,
        "Mutual TLS: a caller of the TLS port must present a certificate signed by "
        "tls_trust_certs_file_path, or the handshake fails.",
    )


def broker_client_tls_enabled_setting() -> Any:
    return setting(
        False,
        "This process's own calls to other cluster processes use their TLS ports (trusting "
        "tls_trust_certs_file_path, presenting its own certificate for mutual TLS, always "
        "checking the peer's name); the metastore setting then lists TLS ports.",
    )


def metrics_tls_enabled_setting() -> Any:
    return setting(
        False,
        "Serve the HTTP port (/metrics, /status.html) over TLS with this process's "
        "certificate (https://).",
    )


def port_tls_setting(default: int, what: str) -> Any:
    return setting(
        default,
        f"TLS gRPC port for {what}, open when tls_certificate_file_path and tls_key_file_path "
        "are set (0 = pick a free port, -1 = off). The plaintext port is switched off with "
        "port = -1.",
    )


class SecuritySettings(Protocol):
    @property
    def authentication_enabled(self) -> bool: ...
    @property
    def authorization_enabled(self) -> bool: ...
    @property
    def superuser_roles(self) -> str: ...
    @property
    def token_secret_key(self) -> str: ...
    @property
    def token_public_key(self) -> str: ...
    @property
    def token_auth_claim(self) -> str: ...
    @property
    def token_cache_max_entries(self) -> int: ...


class SecurityConfigError(StartRefused):
    """Security settings that cannot work together: the process does not
    start, and the message says why."""


def superusers(settings: SecuritySettings) -> frozenset[str]:
    return frozenset(r.strip() for r in settings.superuser_roles.split(",") if r.strip())


def access_guard(
    settings: SecuritySettings, gatekeeper: Gatekeeper, always_authorize: bool = False
) -> AccessGuard | None:
    """The guard in front of a process's RPCs; None when authentication is
    off. ``always_authorize``: the gatekeeper judges even without
    authorization_enabled (the cluster's own servers: superusers only)."""
    if settings.authorization_enabled and not settings.authentication_enabled:
        raise SecurityConfigError(
            "authorization_enabled needs authentication_enabled (a role comes from a token)"
        )
    if not settings.authentication_enabled:
        return None
    from protos.tokens import TokenVerifier  # pyjwt is loaded only when it is needed

    try:
        verifier = TokenVerifier.from_settings(
            settings.token_secret_key,
            settings.token_public_key,
            settings.token_auth_claim,
            settings.token_cache_max_entries,
        )
    except TokenError as exc:
        raise SecurityConfigError(str(exc)) from None
    authorize = settings.authorization_enabled or always_authorize
    return AccessGuard(verifier, gatekeeper if authorize else None)


def client_token(auth_params: str) -> TokenSupplier | None:
    """The token a process's own calls carry (broker_client_auth_params)."""
    if not auth_params:
        return None
    try:
        return token_supplier(auth_params)
    except CredentialsError as exc:
        raise SecurityConfigError(f"broker_client_auth_params: {exc}") from None


def cluster_guard(
    settings: SecuritySettings, service: ServiceDescriptor, what: str
) -> AccessGuard | None:
    """The guard of a cluster-internal server (bookie, metastore): with
    authentication on, superusers only, whether authorization_enabled is on
    or not (a token of any role must not reach the metadata or the entries)."""
    methods = [method_name(service.full_name, m.name) for m in service.methods]
    gatekeeper = ClusterRoles(superusers(settings), methods, what)
    return access_guard(settings, gatekeeper, always_authorize=True)


def add_cluster_servicer(
    server: grpc.aio.Server,
    servicer: object,
    file: FileDescriptor,
    name: str,
    settings: SecuritySettings,
    request_deserializers: Mapping[str, Callable[[bytes], Any]] | None = None,
) -> None:
    """Register the service ``name`` of ``file`` (bookie, metastore) behind its guard."""
    service = file.services_by_name[name]
    guard = cluster_guard(settings, service, service.name.lower())
    add_servicer(server, servicer, service, request_deserializers, guard)


class TlsSettings(Protocol):
    @property
    def tls_certificate_file_path(self) -> str: ...
    @property
    def tls_key_file_path(self) -> str: ...
    @property
    def tls_trust_certs_file_path(self) -> str: ...
    @property
    def tls_require_trusted_client_cert_on_connect(self) -> bool: ...


def tls_server_credentials(settings: TlsSettings) -> grpc.ServerCredentials | None:
    """The TLS port's credentials; None when no certificate is set."""
    if not settings.tls_certificate_file_path and not settings.tls_key_file_path:
        if settings.tls_require_trusted_client_cert_on_connect:
            raise SecurityConfigError(
                "tls_require_trusted_client_cert_on_connect needs a TLS port "
                "(tls_certificate_file_path, tls_key_file_path)"
            )
        return None
    if not settings.tls_certificate_file_path or not settings.tls_key_file_path:
        raise SecurityConfigError(
            "a TLS port needs both tls_certificate_file_path and tls_key_file_path"
        )
    try:
        return server_credentials(
            settings.tls_certificate_file_path,
            settings.tls_key_file_path,
            settings.tls_trust_certs_file_path,
            settings.tls_require_trusted_client_cert_on_connect,
        )
    except TlsConfigError as exc:
        raise SecurityConfigError(str(exc)) from None


def internal_tls(settings: TlsSettings, enabled: bool) -> TlsClient | None:
    """How this process's own calls speak TLS (broker_client_tls_enabled):
    trusting tls_trust_certs_file_path, checking names, and presenting its
    own certificate (for mutual TLS)."""
    if not enabled:
        return None
    try:
        return TlsClient.from_files(
            settings.tls_trust_certs_file_path or None,
            validate_hostname=True,
            allow_insecure=False,
            certificate_path=settings.tls_certificate_file_path or None,
            key_path=settings.tls_key_file_path or None,
        )
    except TlsConfigError as exc:
        raise SecurityConfigError(f"broker_client_tls_enabled: {exc}") from None


class ServerTlsSettings(TlsSettings, Protocol):
    @property
    def metrics_tls_enabled(self) -> bool: ...


@dataclass(frozen=True)
class ServerTls:
    """What a server's TLS settings make (protos/tls.py)."""

    credentials: grpc.ServerCredentials | None  # of the TLS gRPC port (None: no TLS port)
    metrics: ssl.SSLContext | None  # of the HTTP port (None: plain HTTP)
    # The HTTP port's own health check, when the only gRPC port is the TLS one:
    # the process asks itself, so it trusts the certificate it is shown.
    health: TlsClient | None


def server_tls(settings: ServerTlsSettings) -> ServerTls:
    credentials = tls_server_credentials(settings)
    metrics = None
    if settings.metrics_tls_enabled:
        if credentials is None:
            raise SecurityConfigError(
                "metrics_tls_enabled needs tls_certificate_file_path and tls_key_file_path"
            )
        metrics = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        metrics.load_cert_chain(settings.tls_certificate_file_path, settings.tls_key_file_path)
    health = None
    if credentials is not None:
        health = TlsClient.from_files(
            None,
            validate_hostname=False,
            allow_insecure=True,
            certificate_path=settings.tls_certificate_file_path,
            key_path=settings.tls_key_file_path,
        )
    return ServerTls(credentials, metrics, health)
