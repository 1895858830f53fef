"""Calls to another broker's admin service: unloading or splitting a bundle
it owns (the admin service forwards such calls; the load manager leader
makes them). A refusal comes back as the owner's typed error.

A call forwarded for a client carries that client's own token, so the
owner judges the client's role itself; a call the broker makes on its own
(the load manager's) carries the broker's token (broker_client_auth_params).
"""

from __future__ import annotations

import json
from typing import Any

from broker.broker_addresses import BrokerAddresses
from protos import broker_pb2, broker_pb2_grpc, common_pb2
from protos.access import CALLER_TOKEN
from protos.credentials import TokenSupplier, aio_channel
from protos.errors import MagnetarServerError
from protos.tls import TlsClient

# How long a forwarded unload or split may take on the owner.
UNLOAD_TIMEOUT_S = 30.0
SPLIT_TIMEOUT_S = 60.0


def _answer(resp: broker_pb2.JsonResponse) -> Any:
    if resp.error.code:
        raise MagnetarServerError.from_proto(resp.error)
    return json.loads(resp.json)


class PeerBrokers:
    def __init__(
        self,
        token: TokenSupplier | None,
        tls: TlsClient | None = None,
        addresses: BrokerAddresses | None = None,
    ) -> None:
        self.token = token  # the broker's own (broker_client_auth_params)
        self.tls = tls  # broker_client_tls_enabled: to the owner's TLS port
        self.addresses = addresses

    async def _channel(self, owner: str) -> Any:
        caller = CALLER_TOKEN.get()
        token = self.token if caller is None else (lambda: caller)
        if self.tls is None or self.addresses is None:
            return aio_channel(owner, (), token)
        target = (await self.addresses.of(owner)).tls
        if not target:
            raise MagnetarServerError(
                f"broker {owner} has no TLS port (broker_client_tls_enabled is on here)",
                common_pb2.SERVICE_NOT_READY,
            )
        return aio_channel(target, (), token, self.tls)

    async def call(
        self,
        owner: str,
        operation: str,
        arguments: dict[str, Any],
        timeout_s: float = SPLIT_TIMEOUT_S,
    ) -> Any:
        """An admin operation (by name) on the broker that owns what it is about."""
        async with await self._channel(owner) as channel:
            resp = await broker_pb2_grpc.BrokerAdminStub(channel).Call(
                broker_pb2.AdminCallRequest(
                    operation=operation, arguments=json.dumps(arguments), forwarded=True
                ),
                timeout=timeout_s,
            )
        return _answer(resp)

    async def unload(
        self, owner: str, namespace: str, bundle: str, timeout_s: float = UNLOAD_TIMEOUT_S
    ) -> Any:
        async with await self._channel(owner) as channel:
            resp = await broker_pb2_grpc.BrokerAdminStub(channel).Unload(
                broker_pb2.UnloadRequest(namespace=namespace, bundle=bundle), timeout=timeout_s
            )
        return _answer(resp)

    async def split(
        self,
        owner: str,
        namespace: str,
        bundle: str,
        unload: bool,
        timeout_s: float = SPLIT_TIMEOUT_S,
    ) -> Any:
        async with await self._channel(owner) as channel:
            resp = await broker_pb2_grpc.BrokerAdminStub(channel).SplitBundle(
                broker_pb2.SplitBundleRequest(namespace=namespace, bundle=bundle, unload=unload),
                timeout=timeout_s,
            )
        return _answer(resp)
