"""What a caller sends to prove who it is: a token in every call's metadata.

Shared by the SDK and by the servers' own clients (broker → metastore,
bookie and other brokers; bookie → metastore), so every channel in
Magnetar is opened by :func:`aio_channel` or :func:`sync_channel` here.

A token travels as gRPC call metadata (``authorization: Bearer <jwt>``,
the header Pulsar's HTTP admin uses). It is asked of its supplier for each
call, so a supplier that returns a fresh token (a callable, or a file
rewritten by a token refresher) is used from the next call on. A channel
without a supplier carries nothing and costs nothing extra.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, cast

import grpc

from protos.tls import TlsClient

AUTHORIZATION = "authorization"
BEARER = "Bearer "

TokenSupplier = Callable[[], str]


class CredentialsError(ValueError):
    """Auth parameters that cannot be used; the message says why."""


class FileToken:
    """A token read from a file, read again whenever the file changes."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._seen: tuple[float, int] | None = None
        self._token = ""
        self()  # a missing or empty file is an error now, not at the first call

    def __call__(self) -> str:
        """The file's token; while a refresher rewrites the file (empty or
        gone for a moment), the last token read."""
        try:
            st = os.stat(self.path)
            seen = (st.st_mtime, st.st_size)
            if seen != self._seen:
                with open(self.path) as f:
                    token = f.read().strip()
                if token:
                    self._token, self._seen = token, seen
        except OSError as exc:
            if not self._token:
                raise CredentialsError(
                    f"cannot read the token file {self.path}: {exc.strerror}"
                ) from None
        if not self._token:
            raise CredentialsError(f"the token file {self.path} is empty")
        return self._token


def token_supplier(params: str) -> TokenSupplier:
    """pulsar-admin's ``--auth-params`` for the token plugin: ``token:<jwt>``
    or ``file:///path`` (a file holding the token)."""
    params = params.strip()
    if params.startswith("token:"):
        token = params.removeprefix("token:").strip()
        if not token:
            raise CredentialsError("auth params 'token:' carries no token")
        return lambda: token
    if params.startswith("file://"):
        return FileToken(params.removeprefix("file://"))
    raise CredentialsError(
        f"auth params {params[:20]!r}...: give token:<jwt> or file:///path/to/token"
    )


def _with_token(metadata: Any, supplier: TokenSupplier) -> tuple[tuple[str, str], ...]:
    return (*tuple(metadata or ()), (AUTHORIZATION, BEARER + supplier()))


class _TokenCalls:
    """A multi-callable whose every call carries the token (as call
    metadata, passed to gRPC directly: no interceptor, so a stream's writes
    take no extra hop)."""

    def __init__(self, inner: Any, supplier: TokenSupplier) -> None:
        self._inner = inner
        self._supplier = supplier

    def __call__(self, *args: Any, metadata: Any = None, **kwargs: Any) -> Any:
        return self._inner(*args, metadata=_with_token(metadata, self._supplier), **kwargs)


class _TokenChannel:
    """A channel whose calls carry the token; everything else is the channel's."""

    def __init__(self, channel: Any, supplier: TokenSupplier) -> None:
        self._channel = channel
        self._supplier = supplier

    def unary_unary(self, *args: Any, **kwargs: Any) -> _TokenCalls:
        return _TokenCalls(self._channel.unary_unary(*args, **kwargs), self._supplier)

    def unary_stream(self, *args: Any, **kwargs: Any) -> _TokenCalls:
        return _TokenCalls(self._channel.unary_stream(*args, **kwargs), self._supplier)

    def stream_unary(self, *args: Any, **kwargs: Any) -> _TokenCalls:
        return _TokenCalls(self._channel.stream_unary(*args, **kwargs), self._supplier)

    def stream_stream(self, *args: Any, **kwargs: Any) -> _TokenCalls:
        return _TokenCalls(self._channel.stream_stream(*args, **kwargs), self._supplier)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._channel, name)

    async def __aenter__(self) -> _TokenChannel:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._channel.close()

    def __enter__(self) -> _TokenChannel:
        return self

    def __exit__(self, *exc: object) -> None:
        self._channel.close()


def with_token(channel: Any, token: TokenSupplier | None) -> Any:
    """``channel`` whose calls carry ``token``'s token (itself when None)."""
    return channel if token is None else _TokenChannel(channel, token)


def aio_channel(
    address: str,
    options: Sequence[tuple[str, Any]],
    token: TokenSupplier | None = None,
    tls: TlsClient | None = None,
) -> grpc.aio.Channel:
    """An asyncio channel to ``address`` (over TLS when given ``tls``, which
    must check names: protos/tls.py) whose calls carry ``token``'s token."""
    if tls is None:
        channel = grpc.aio.insecure_channel(address, options=options)
    else:
        if tls.needs_probe:
            raise ValueError("this channel must check the server's name (use TlsClient.channel)")
        channel = grpc.aio.secure_channel(address, tls.credentials(), options=options)
    return cast(grpc.aio.Channel, with_token(channel, token))


def sync_channel(
    address: str,
    options: Sequence[tuple[str, Any]],
    token: TokenSupplier | None = None,
    tls: TlsClient | None = None,
) -> grpc.Channel:
    """A blocking channel to ``address`` (over TLS when given ``tls``) whose
    calls carry ``token``'s token."""
    if tls is None:
        channel = grpc.insecure_channel(address, options=options)
    else:
        channel = tls.sync_channel(address, list(options))
    return cast(grpc.Channel, with_token(channel, token))
