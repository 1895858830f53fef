"""How a client proves who it is: Pulsar's ``AuthenticationToken``.

The token is sent with every call (gRPC metadata ``authorization: Bearer
<jwt>``); the broker takes the role from it. Give the token itself, a
zero-argument callable that returns the current one (asked again for every
call, so a refreshed token is used from the next call on), or
``"file:///path"`` to read it from a file (read again when the file
changes). The official client's other authentication classes (TLS, Basic,
OAuth2, Athenz) are not supported by Magnetar: passing anything else as
``authentication`` raises InvalidConfiguration naming it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from client.exceptions import InvalidConfiguration
from protos.credentials import CredentialsError, FileToken, TokenSupplier


class Authentication:
    """Base of the authentication methods (as in the official client)."""

    def supplier(self) -> TokenSupplier:
        raise NotImplementedError


class AuthenticationToken(Authentication):
    def __init__(self, token: str | Callable[[], str]) -> None:
        if callable(token):
            supplier: TokenSupplier = _checked(token)
        elif isinstance(token, str) and token.startswith("file://"):
            try:
                supplier = FileToken(token.removeprefix("file://"))
            except CredentialsError as exc:
                raise InvalidConfiguration(str(exc)) from None
        elif isinstance(token, str) and token.strip():
            value = token.strip()
            supplier = lambda: value  # noqa: E731
        else:
            raise ValueError(
                "AuthenticationToken takes a token (str), a callable returning one, "
                f"or 'file:///path'; got {type(token).__name__}"
            )
        self._supplier = supplier

    def supplier(self) -> TokenSupplier:
        return self._supplier


def _checked(fn: Callable[[], str]) -> TokenSupplier:
    def supply() -> str:
        token = fn()
        if not isinstance(token, str) or not token.strip():
            raise InvalidConfiguration(
                f"the token supplier returned {type(token).__name__}, not a token string"
            )
        return token.strip()

    return supply


def token_of(authentication: Any) -> TokenSupplier | None:
    """The token supplier of a Client's or Admin's ``authentication``."""
    if authentication is None:
        return None
    if isinstance(authentication, Authentication):
        return authentication.supplier()
    raise InvalidConfiguration(
        f"authentication={type(authentication).__name__}: Magnetar supports "
        "AuthenticationToken only (TLS, Basic, OAuth2 and Athenz are not available)"
    )
