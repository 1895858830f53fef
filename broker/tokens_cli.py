"""``magnetar tokens``: `pulsar tokens`' verbs for the keys and tokens of
token authentication (docs/security.md)."""

from __future__ import annotations

import base64
import json
import os
import re
import sys

import click

from protos.token_types import HMAC_ALGORITHMS, KEY_PAIR_ALGORITHMS, TokenError

_UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
_DURATION = re.compile(r"^\s*(\d+)\s*([smhdwy]?)\s*$")


def parse_duration_s(text: str) -> int:
    """``30s``, ``10m``, ``1h``, ``7d``, ``2w``, ``1y`` (a bare number is seconds)."""
    m = _DURATION.match(text)
    if m is None:
        raise click.BadParameter(f"{text!r} is not a duration such as 30s, 10m, 1h, 7d, 2w, 1y")
    return int(m.group(1)) * _UNITS_S[m.group(2) or "s"]


def _write_private(path: str, data: bytes) -> None:
    """Keys are secrets: the file is created readable by its owner only."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _token_from(token: str | None, token_file: str | None) -> str:
    if (token is None) == (token_file is None):
        raise click.UsageError("give the token with -i/--token or -f/--token-file")
    if token_file is not None:
        with open(token_file) as f:
            return f.read().strip()
    assert token is not None
    return token.strip()


def _fail(exc: TokenError) -> None:
    raise click.ClickException(str(exc))


@click.group()
def tokens() -> None:
    """Create and inspect the keys and tokens of token authentication."""


@tokens.command("create-secret-key")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="File to write it to.")
@click.option("-b", "--base64", "as_base64", is_flag=True, help="Write the key base64-encoded.")
@click.option(
    "-a",
    "--signature-algorithm",
    type=click.Choice(HMAC_ALGORITHMS),
    default="HS256",
    show_default=True,
)
def create_secret_key_cmd(output: str | None, as_base64: bool, signature_algorithm: str) -> None:
    """A new secret key (HS256): token_secret_key = file:///<output>."""
    from protos.tokens import create_secret_key

    key = create_secret_key()
    data = base64.b64encode(key) if as_base64 else key
    if output:
        _write_private(output, data)
    elif as_base64:
        click.echo(data.decode())
    else:
        sys.stdout.buffer.write(data)


@tokens.command("create-key-pair")
@click.option("--output-private-key", required=True, type=click.Path(dir_okay=False))
@click.option("--output-public-key", required=True, type=click.Path(dir_okay=False))
@click.option(
    "-a",
    "--signature-algorithm",
    type=click.Choice(KEY_PAIR_ALGORITHMS),
    default="RS256",
    show_default=True,
)
def create_key_pair_cmd(
    output_private_key: str, output_public_key: str, signature_algorithm: str
) -> None:
    """A new key pair (DER): sign with the private key, check with the public one."""
    from protos.tokens import create_key_pair

    private, public = create_key_pair(signature_algorithm)
    _write_private(output_private_key, private)
    with open(output_public_key, "wb") as f:
        f.write(public)


@tokens.command("create")
@click.option("-sk", "--secret-key", help="file:///path or data:;base64,... of a secret key.")
@click.option("-pk", "--private-key", help="file:///path or data:;base64,... of a private key.")
@click.option("-s", "--subject", required=True, help="The role the token stands for.")
@click.option("-e", "--expiry-time", help="Valid for this long (30m, 1h, 7d, 1y); none: forever.")
@click.option("-a", "--signature-algorithm", help="HS256 for a secret key; RS256/ES256... else.")
@click.option("--claim", default="sub", show_default=True, help="Claim that holds the role.")
def create_cmd(
    secret_key: str | None,
    private_key: str | None,
    subject: str,
    expiry_time: str | None,
    signature_algorithm: str | None,
    claim: str,
) -> None:
    """A signed token for a role (printed)."""
    from protos.tokens import create_token, read_key_url

    if (secret_key is None) == (private_key is None):
        raise click.UsageError("give exactly one of --secret-key and --private-key")
    try:
        token = create_token(
            subject,
            secret_key=read_key_url(secret_key) if secret_key else None,
            private_key=read_key_url(private_key) if private_key else None,
            algorithm=signature_algorithm,
            expiry_s=parse_duration_s(expiry_time) if expiry_time else None,
            claim=claim,
        )
    except TokenError as exc:
        _fail(exc)
    click.echo(token)


@tokens.command("show")
@click.option("-i", "--token", help="The token.")
@click.option("-f", "--token-file", type=click.Path(exists=True, dir_okay=False))
def show_cmd(token: str | None, token_file: str | None) -> None:
    """A token's header and claims, unchecked."""
    from protos.tokens import show_token

    try:
        header, claims = show_token(_token_from(token, token_file))
    except TokenError as exc:
        _fail(exc)
    click.echo(json.dumps(header))
    click.echo(json.dumps(claims))


@tokens.command("validate")
@click.option("-i", "--token", help="The token.")
@click.option("-f", "--token-file", type=click.Path(exists=True, dir_okay=False))
@click.option("-sk", "--secret-key", help="file:///path or data:;base64,... of the secret key.")
@click.option("-pk", "--public-key", help="file:///path or data:;base64,... of the public key.")
@click.option("--claim", default="sub", show_default=True, help="Claim that holds the role.")
def validate_cmd(
    token: str | None,
    token_file: str | None,
    secret_key: str | None,
    public_key: str | None,
    claim: str,
) -> None:
    """Check a token's signature and expiry; prints its claims (exit 1 when invalid)."""
    from protos.tokens import TokenVerifier, read_key_url, show_token

    if (secret_key is None) == (public_key is None):
        raise click.UsageError("give exactly one of --secret-key and --public-key")
    text = _token_from(token, token_file)
    try:
        verifier = TokenVerifier(
            secret_key=read_key_url(secret_key) if secret_key else None,
            public_key=read_key_url(public_key) if public_key else None,
            claim=claim,
            max_cached=0,
        )
        verifier.verify(text)
        _, claims = show_token(text)
    except TokenError as exc:
        _fail(exc)
    click.echo(json.dumps(claims))
