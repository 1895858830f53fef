"""The security settings every server process has (Pulsar's names in
snake_case), and what a process builds from them: the guard in front of
its RPCs and the token its own calls to other processes carry.

docs/security.md explains them together.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

import grpc
from google.protobuf.descriptor import FileDescriptor, ServiceDescriptor

from protos.access import AccessGuard, ClusterRoles, Gatekeeper, method_name
from protos.credentials import CredentialsError, TokenSupplier, token_supplier
from protos.serving import StartRefused, add_servicer
from protos.settings import setting
from protos.tokens import TokenError, TokenVerifier


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


def access_guard(settings: SecuritySettings, gatekeeper: Gatekeeper) -> AccessGuard | None:
    """The guard in front of a process's RPCs; None when authentication is off."""
    if settings.authorization_enabled and not settings.authentication_enabled:
        raise SecurityConfigError(
            "authorization_enabled needs authentication_enabled (a role comes from a token)"
        )
    if not settings.authentication_enabled:
        return None
    try:
        verifier = TokenVerifier.from_settings(
            settings.token_secret_key,
            settings.token_public_key,
            settings.token_auth_claim,
            settings.token_cache_max_entries,
        )
    except TokenError as exc:
        raise SecurityConfigError(str(exc)) from None
    return AccessGuard(verifier, gatekeeper if settings.authorization_enabled else None)


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
    """The guard of a cluster-internal server (bookie, metastore): superusers only."""
    methods = [method_name(service.full_name, m.name) for m in service.methods]
    return access_guard(settings, ClusterRoles(superusers(settings), methods, what))


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
