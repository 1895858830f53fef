"""Service URLs and the gRPC channel to the broker."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import grpc

from client.exceptions import ConnectError, InvalidUrl
from protos import broker_pb2_grpc, serving


def parse_service_url(url: str) -> list[str]:
    """``magnetar://h:p[,h2:p2]`` or bare ``h:p`` -> ``["h:p", ...]``."""
    if not isinstance(url, str) or not url.strip():
        raise InvalidUrl(f"service URL {url!r} is empty")
    rest = url.strip()
    if "://" in rest:
        scheme, rest = rest.split("://", 1)
        if scheme == "magnetar+tls":
            raise InvalidUrl(f"service URL {url!r}: TLS is not available yet; use magnetar://")
        if scheme != "magnetar":
            raise InvalidUrl(
                f"service URL {url!r}: the scheme must be magnetar:// or magnetar+tls://"
            )
    rest = rest.rstrip("/")
    hosts = []
    for part in rest.split(","):
        host, sep, port = part.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise InvalidUrl(f"service URL {url!r}: {part!r} is not host:port")
        hosts.append(f"{host}:{port}")
    return hosts


def call_in_loop(loop: asyncio.AbstractEventLoop, fn: Callable[[], object]) -> None:
    """Run ``fn`` on ``loop``: now when already on it, else at its next turn."""
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        fn()
    else:
        loop.call_soon_threadsafe(fn)


class Connection:
    """One channel to a broker; producers and consumers share it."""

    def __init__(self, address: str, connection_timeout_ms: int) -> None:
        self.address = address
        self.connection_timeout_s = connection_timeout_ms / 1000
        self.channel = grpc.aio.insecure_channel(
            address, options=serving.grpc_options(serving.MAX_GRPC_MESSAGE_BYTES)
        )
        self.stub = broker_pb2_grpc.BrokerStub(self.channel)
        self._ready = False

    async def ensure_ready(self) -> None:
        if self._ready:
            return
        try:
            await asyncio.wait_for(self.channel.channel_ready(), self.connection_timeout_s)
        except TimeoutError:
            raise ConnectError(
                f"cannot connect to the broker at {self.address} within "
                f"{self.connection_timeout_s:g} s"
            ) from None
        self._ready = True

    async def close(self) -> None:
        await self.channel.close()
