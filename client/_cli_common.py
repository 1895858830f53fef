"""What the ``magnetar-admin`` modules share: one admin call printed as
JSON, and the parameter types of pulsar-admin's suffixed values
(client/_units.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

from client._connection import is_tls_url
from client._units import TIME_NAMES, parse_size, parse_time
from client.admin import Admin
from client.authentication import AuthenticationToken
from client.exceptions import MagnetarError
from protos.credentials import CredentialsError, token_supplier

DEFAULT_SERVICE_URL = "magnetar://localhost:6650"


# The key of the command's authentication in click's context meta.
AUTHENTICATION = "magnetar.authentication"
TOKEN_PLUGINS = ("token", "org.apache.pulsar.client.impl.auth.AuthenticationToken")


def authentication_of(plugin: str | None, params: str | None) -> AuthenticationToken | None:
    """pulsar-admin's ``--auth-plugin`` / ``--auth-params`` as the SDK's authentication."""
    if plugin is not None and plugin not in TOKEN_PLUGINS:
        raise click.UsageError(
            f"--auth-plugin {plugin}: only token authentication is available "
            f"({' or '.join(TOKEN_PLUGINS)})"
        )
    if not params:
        if plugin is not None:
            raise click.UsageError(
                "--auth-plugin needs --auth-params (token:<jwt> or file:///path)"
            )
        return None
    try:  # the same forms as the servers' broker_client_auth_params
        return AuthenticationToken(token_supplier(params))
    except CredentialsError as exc:
        raise click.UsageError(f"--auth-params: {exc}") from None


TLS = "magnetar.tls"


def tls_options(
    service_url: str, trust_certs: str | None, allow_insecure: bool, validate_hostname: bool
) -> dict[str, object]:
    """pulsar-admin's TLS flags as the Admin's TLS options (only those given)."""
    given = {
        "tls_trust_certs_file_path": trust_certs,
        "tls_allow_insecure_connection": allow_insecure or None,
        "tls_validate_hostname": validate_hostname or None,
    }
    options: dict[str, object] = {k: v for k, v in given.items() if v is not None}
    if options and not is_tls_url(service_url):
        raise click.UsageError(
            f"{', '.join(sorted(options))}: TLS flags need a magnetar+tls:// service URL"
        )
    return options


def admin_call(service_url: str, fn: Callable[[Admin], object]) -> None:
    """Print ``fn``'s answer as JSON (``null`` for None); an SDK error prints
    ``Error: <PulsarName>: <message>`` and exits 1. The authentication is
    the command's (``--auth-params``)."""
    ctx = click.get_current_context(silent=True)
    authentication = ctx.meta.get(AUTHENTICATION) if ctx is not None else None
    tls = (ctx.meta.get(TLS) if ctx is not None else None) or {}
    try:
        with Admin(service_url, authentication=authentication, **tls) as a:
            click.echo(json.dumps(fn(a), indent=2, sort_keys=True))
    except MagnetarError as exc:
        raise click.ClickException(f"{type(exc).__name__}: {exc}") from None


def names(value: str | None) -> list[str] | None:
    """A comma-separated list of names (``r1,r2``); None when not given."""
    if value is None:
        return None
    return [n.strip() for n in value.split(",") if n.strip()]


def switch_given(ctx: click.Context, param: click.Parameter, value: bool | None) -> bool | None:
    """Callback of an on/off flag pair that must be given (``--enable/--disable``):
    click does not enforce ``required`` on a pair whose default is None."""
    if value is None and not ctx.resilient_parsing:
        on, off = "/".join(param.opts), "/".join(getattr(param, "secondary_opts", []))
        raise click.UsageError(f"give {on} or {off}", ctx)
    return value


class TimeType(click.ParamType):
    """A time like ``3h`` as a whole number of ``unit``; a bare number is ``bare``."""

    name = "time"

    def __init__(self, unit: str = "s", bare: str | None = None) -> None:
        self.unit = unit
        self.bare = bare or unit

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return f"TIME[{TIME_NAMES[self.bare]}]"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            return parse_time(str(value), self.unit, self.bare)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class SizeType(click.ParamType):
    """A size like ``10G`` (bare number: bytes) as a whole number of ``unit``."""

    name = "size"

    def __init__(self, unit: str = "B") -> None:
        self.unit = unit

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "SIZE[bytes]"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            return parse_size(str(value), self.unit)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


SECONDS = TimeType("s")
MINUTES = TimeType("m")  # subscription expiration: a bare number is minutes
RETENTION_MINUTES = TimeType("m", bare="s")  # pulsar-admin: a bare -t is seconds
BYTES = SizeType("B")
MEGABYTES = SizeType("M")
