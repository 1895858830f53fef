"""Who may call what on a server: authentication and authorization of every
RPC, before the servicer sees it.

Theory of operation. When a process has ``authentication_enabled``, every
method it registers (``protos.serving.add_servicer``) is wrapped by an
:class:`AccessGuard`; a method the guard's :class:`Gatekeeper` has no rule
for cannot be registered at all, so a new RPC without a check cannot ship.
Each call:

1. **authenticates**: the ``authorization: Bearer <jwt>`` metadata is
   checked by :class:`protos.tokens.TokenVerifier`; a call without it, or
   with a token that is forged, expired or has no role, ends with gRPC's
   ``UNAUTHENTICATED`` before anything runs;
2. **authorizes** (with ``authorization_enabled``): the gatekeeper judges
   the role against the request — for a client-streaming method, against
   its first message (the one that says which topic or subscription the
   stream is for); a refusal ends the call with ``PERMISSION_DENIED``;
3. runs the servicer with the role in :data:`CALLER_ROLE`. On a stream,
   each later request message first checks the token's expiry: once it has
   expired the stream's requests end (the servicer closes cleanly, as when
   a client leaves) and the call ends with ``UNAUTHENTICATED``, so a client
   reconnects with a fresh token or fails with AuthenticationError.

The gRPC health service is registered apart and answers anyone: probes
carry no token, and it tells nothing but SERVING or NOT_SERVING.
"""

from __future__ import annotations

import contextvars
import inspect
import time
from collections.abc import AsyncIterator, Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import grpc

from protos.credentials import AUTHORIZATION, BEARER
from protos.prometheus_text import Family, counter
from protos.token_types import TokenError, Verified

if TYPE_CHECKING:
    from protos.tokens import TokenVerifier

# The authenticated role of the call being served (None when authentication is off).
CALLER_ROLE: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "caller_role", default=None
)


# The token that call carried: a call forwarded to another broker carries it on.
CALLER_TOKEN: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "caller_token", default=None
)


class AccessDenied(Exception):
    """A role that may not make this call; the message says what it lacks."""


class Gatekeeper(Protocol):
    """A server's authorization rules, one per method it serves."""

    def methods(self) -> Collection[str]:
        """The method names (``Service/Method``, as in :func:`method_name`) it judges."""
        ...

    async def admit(self, method: str, role: str, request: Any) -> None:
        """Return when ``role`` may make this call; else raise AccessDenied."""
        ...


def method_name(service_full_name: str, method: str) -> str:
    return f"{service_full_name.rpartition('.')[2]}/{method}"


class ClusterRoles:
    """The gatekeeper of the cluster-internal servers (bookie, metastore):
    only superuser roles (brokers, bookies and operators' tools
    authenticate as one) may call anything."""

    def __init__(self, superusers: Collection[str], methods: Collection[str], what: str) -> None:
        self.superusers = frozenset(superusers)
        self._methods = frozenset(methods)
        self.what = what

    def methods(self) -> Collection[str]:
        return self._methods

    async def admit(self, method: str, role: str, request: Any) -> None:
        if role not in self.superusers:
            raise AccessDenied(
                f"role {role!r} may not call the {self.what}: only superuser roles "
                "(superuser_roles) may"
            )


def bearer_token(metadata: Any) -> str | None:
    for key, value in metadata or ():
        if key == AUTHORIZATION and isinstance(value, str) and value.startswith(BEARER):
            return value.removeprefix(BEARER).strip()
    return None


@dataclass
class AccessCounts:
    """What the guard decided, for metrics (Pulsar's names in docs/metrics.md)."""

    authenticated: int = 0  # pulsar_authentication_success_total
    unauthenticated: int = 0  # pulsar_authentication_failures_total
    expired: int = 0  # pulsar_expired_token_total (also counted as failures)
    unauthorized: int = 0  # magnetar_authorization_failures_total

    def families(self, label_str: str = "") -> list[Family]:
        return [
            counter(
                "pulsar_authentication_success",
                "Calls whose token was accepted",
                self.authenticated,
                label_str,
            ),
            counter(
                "pulsar_authentication_failures",
                "Calls refused for a missing or invalid token",
                self.unauthenticated,
                label_str,
            ),
            counter(
                "pulsar_expired_token",
                "Calls refused for an expired token",
                self.expired,
                label_str,
            ),
            counter(
                "magnetar_authorization_failures",
                "Calls refused because the role lacks the permission",
                self.unauthorized,
                label_str,
            ),
        ]


class AccessGuard:
    def __init__(self, verifier: TokenVerifier, gatekeeper: Gatekeeper | None) -> None:
        self.verifier = verifier
        self.gatekeeper = gatekeeper  # None: authorization_enabled is off
        self.counts = AccessCounts()

    def check_covers(self, service_full_name: str, methods: Collection[str]) -> None:
        """Registration of a method without a rule is refused."""
        if self.gatekeeper is None:
            return
        known = set(self.gatekeeper.methods())
        missing = [m for m in methods if method_name(service_full_name, m) not in known]
        if missing:
            raise ValueError(
                f"{service_full_name}: no authorization rule for {', '.join(sorted(missing))}"
            )

    async def _authenticate(self, context: grpc.aio.ServicerContext) -> Verified:
        token = bearer_token(context.invocation_metadata())
        if token is None:
            self.counts.unauthenticated += 1
            await context.abort(
                grpc.StatusCode.UNAUTHENTICATED,
                "authentication is required: send a token (authorization: Bearer <jwt>)",
            )
        try:
            verified = self.verifier.verify(token)  # type: ignore[arg-type]
        except TokenError as exc:
            self.counts.unauthenticated += 1
            if exc.expired:
                self.counts.expired += 1
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, f"authentication failed: {exc}")
            raise  # not reached: abort raises
        self.counts.authenticated += 1
        CALLER_TOKEN.set(token)
        return verified

    async def _authorize(
        self, context: grpc.aio.ServicerContext, method: str, role: str, request: Any
    ) -> None:
        if self.gatekeeper is None:
            return
        try:
            await self.gatekeeper.admit(method, role, request)
        except AccessDenied as exc:
            self.counts.unauthorized += 1
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, str(exc))

    def wrap(
        self,
        service_full_name: str,
        method: str,
        client_streaming: bool,
        server_streaming: bool,
        behaviour: Callable[..., Any],
    ) -> Callable[..., Any]:
        """``behaviour`` behind authentication and this method's rule."""
        name = method_name(service_full_name, method)
        if client_streaming:
            return self._stream_in(name, behaviour)
        if server_streaming or inspect.isasyncgenfunction(behaviour):
            return self._stream_out(name, behaviour)
        return self._unary(name, behaviour)

    def _unary(self, name: str, behaviour: Callable[..., Any]) -> Callable[..., Any]:
        async def guarded(request: Any, context: grpc.aio.ServicerContext) -> Any:
            verified = await self._authenticate(context)
            await self._authorize(context, name, verified.role, request)
            CALLER_ROLE.set(verified.role)
            return await behaviour(request, context)

        return guarded

    def _stream_out(self, name: str, behaviour: Callable[..., Any]) -> Callable[..., Any]:
        async def guarded(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            verified = await self._authenticate(context)
            await self._authorize(context, name, verified.role, request)
            CALLER_ROLE.set(verified.role)
            async for response in behaviour(request, context):
                yield response

        return guarded

    def _stream_in(self, name: str, behaviour: Callable[..., Any]) -> Callable[..., Any]:
        async def guarded(
            request_iterator: AsyncIterator[Any], context: grpc.aio.ServicerContext
        ) -> AsyncIterator[Any]:
            verified = await self._authenticate(context)
            first = await anext(aiter(request_iterator), None)
            if first is None:
                return
            await self._authorize(context, name, verified.role, first)
            CALLER_ROLE.set(verified.role)
            expired = False

            async def requests() -> AsyncIterator[Any]:
                nonlocal expired
                yield first
                async for request in request_iterator:
                    if verified.expires_s is not None and time.time() >= verified.expires_s:
                        expired = True
                        return
                    yield request

            async for response in behaviour(requests(), context):
                yield response
            if expired:
                self.counts.unauthenticated += 1
                self.counts.expired += 1
                await context.abort(
                    grpc.StatusCode.UNAUTHENTICATED,
                    f"the token of role {verified.role!r} expired during the stream",
                )

        return guarded
