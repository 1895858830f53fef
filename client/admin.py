"""Administration, mirroring ``pulsar-admin``'s groups (API.md, Admin).

    from client.admin import Admin
    admin = Admin("magnetar://localhost:6650")
    admin.topics.stats("persistent://public/default/t")   # dict, Pulsar's field names

Calls are blocking gRPC calls to a broker's ``BrokerAdmin`` service; errors
raise the SDK's Pulsar-named exceptions.
"""

from __future__ import annotations

import json
from typing import Any

import grpc

from client._connection import parse_service_url
from client.exceptions import ConnectError, InvalidConfiguration, from_wire
from client.exceptions import LookupError as MagnetarLookupError
from protos import broker_pb2, broker_pb2_grpc, channel


class _Topics:
    def __init__(self, admin: Admin) -> None:
        self._admin = admin

    def stats(self, topic: str) -> dict[str, Any]:
        """msgRateIn/Out, msgThroughputIn/Out, storageSize, backlogSize,
        publishers, subscriptions{name: {msgBacklog, unackedMessages, type,
        consumers[...]}} and counters."""
        return self._admin._json("TopicStats", broker_pb2.TopicStatsRequest(topic=topic))

    def create_partitioned_topic(self, topic: str, partitions: int) -> dict[str, Any]:
        """Create ``topic`` with ``partitions`` partitions (``<topic>-partition-i``)."""
        if not isinstance(partitions, int) or isinstance(partitions, bool):
            raise InvalidConfiguration(f"partitions must be an int, not {partitions!r}")
        return self._admin._json(
            "CreatePartitionedTopic",
            broker_pb2.CreatePartitionedTopicRequest(topic=topic, partitions=partitions),
        )

    def lookup(self, topic: str) -> dict[str, Any]:
        """``{"brokerUrl": "magnetar://host:port"}``: the broker serving ``topic``."""
        address, authoritative = self._admin._address, False
        for _ in range(8):  # bounded redirects
            with grpc.insecure_channel(address) as ch:
                try:
                    resp = broker_pb2_grpc.BrokerStub(ch).Lookup(
                        broker_pb2.LookupRequest(topic=topic, authoritative=authoritative),
                        timeout=self._admin._timeout_s,
                    )
                except grpc.RpcError as exc:
                    raise ConnectError(f"broker {address}: {exc.code().name}") from None
            if resp.error.code != 0:
                raise from_wire(resp.error)
            if not resp.redirect:
                return {"brokerUrl": f"magnetar://{resp.broker_url}"}
            address, authoritative = resp.broker_url, resp.authoritative
        raise MagnetarLookupError(f"lookup of {topic} was redirected too often")

    def create_subscription(
        self, topic: str, subscription: str, earliest: bool = False
    ) -> dict[str, Any]:
        """A durable subscription with no consumer, at the end of the topic (or
        its start with ``earliest``)."""
        return self._admin._json(
            "CreateSubscription",
            broker_pb2.CreateSubscriptionRequest(
                topic=topic, subscription=subscription, earliest=earliest
            ),
        )

    def get_partitioned_topic_metadata(self, topic: str) -> dict[str, Any]:
        """``{"partitions": n}``; 0 for a topic that is not partitioned."""
        try:
            resp = self._admin._broker.GetPartitionedTopicMetadata(
                broker_pb2.PartitionedTopicMetadataRequest(topic=topic),
                timeout=self._admin._timeout_s,
            )
        except grpc.RpcError as exc:
            raise ConnectError(f"broker {self._admin._address}: {exc.code().name}") from None
        if resp.error.code != 0:
            raise from_wire(resp.error)
        return {"partitions": resp.partitions}

    def key_shared_lookup(
        self, topic: str, subscription: str, key: str | None = None, hash: int | None = None
    ) -> dict[str, Any]:
        """For a Key_Shared subscription (beyond pulsar-admin): the ``hash``
        (slot in 0..65535) of ``key`` (or the ``hash`` given), the
        ``consumer`` it goes to, the ``holder`` with unacknowledged messages
        of it, whether it is ``draining`` and the ``unackedMessageIds``
        ("ledger:entry") that hold it."""
        if (key is None) == (hash is None):
            raise InvalidConfiguration("give exactly one of key= and hash=")
        req = broker_pb2.KeySharedLookupRequest(topic=topic, subscription=subscription)
        if key is not None:
            req.key = key
        else:
            req.hash = int(hash)  # type: ignore[arg-type]
        return self._admin._json("KeySharedLookup", req)


class _Brokers:
    def __init__(self, admin: Admin) -> None:
        self._admin = admin

    def list(self) -> list[str]:
        """Addresses of the live brokers."""
        return self._admin._json("ListBrokers", broker_pb2.ListBrokersRequest())  # type: ignore[return-value]

    def get_leader_broker(self) -> dict[str, Any]:
        """``{"serviceUrl": "host:port"}``: the load manager leader."""
        return self._admin._json("LeaderBroker", broker_pb2.LeaderBrokerRequest())


class _Namespaces:
    def __init__(self, admin: Admin) -> None:
        self._admin = admin

    def unload(self, namespace: str, bundle: str | None = None) -> dict[str, Any]:
        """Release ``bundle`` (or every bundle) of ``namespace`` from its owner."""
        return self._admin._json(
            "Unload", broker_pb2.UnloadRequest(namespace=namespace, bundle=bundle or "")
        )

    def split_bundle(self, namespace: str, bundle: str, unload: bool = False) -> dict[str, Any]:
        """Cut ``bundle`` of ``namespace`` in two halves (its owner does it);
        with ``unload`` both halves are released at once, so they can be
        placed on other brokers. ``{"bundle", "splitInto": [low, high]}``."""
        return self._admin._json(
            "SplitBundle",
            broker_pb2.SplitBundleRequest(namespace=namespace, bundle=bundle, unload=unload),
        )

    def bundles(self, namespace: str) -> dict[str, Any]:
        """``{"namespace", "bundles": [{"bundle", "state", "owner"}]}``."""
        return self._admin._json(
            "NamespaceBundles", broker_pb2.NamespaceBundlesRequest(namespace=namespace)
        )

    def set_deduplication(self, namespace: str, enabled: bool) -> dict[str, Any]:
        """Turn broker-side deduplication on or off for every topic of ``namespace``."""
        return self._admin._json(
            "SetNamespaceDeduplication",
            broker_pb2.SetNamespaceDeduplicationRequest(namespace=namespace, enabled=enabled),
        )


class Admin:
    def __init__(
        self, service_url: str, authentication: Any = None, timeout_seconds: float = 30
    ) -> None:
        if authentication is not None:
            raise InvalidConfiguration("authentication is not available yet")
        self._address = parse_service_url(service_url)[0]
        self._timeout_s = timeout_seconds
        self._channel = grpc.insecure_channel(self._address, options=channel.grpc_options())
        self._stub = broker_pb2_grpc.BrokerAdminStub(self._channel)
        self._broker = broker_pb2_grpc.BrokerStub(self._channel)
        self.topics = _Topics(self)
        self.namespaces = _Namespaces(self)
        self.brokers = _Brokers(self)

    def _json(self, method: str, request: Any) -> dict[str, Any]:
        try:
            resp = getattr(self._stub, method)(request, timeout=self._timeout_s)
        except grpc.RpcError as exc:
            raise ConnectError(
                f"broker {self._address}: {exc.code().name} {exc.details()}"
            ) from None
        if resp.error.code != 0:
            raise from_wire(resp.error)
        return json.loads(resp.json)  # type: ignore[no-any-return]

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
