"""Administration, mirroring ``pulsar-admin``'s groups (API.md, Admin).

    from client.admin import Admin
    admin = Admin("magnetar://localhost:6650")
    admin.topics.stats("persistent://public/default/t")   # dict, Pulsar's field names

Calls are blocking gRPC calls to a broker's ``BrokerAdmin`` service; errors
raise the SDK's Pulsar-named exceptions.

Every call can be answered by any broker (one that does not own what the call
is about forwards it), so it goes to the service URL's brokers in turn, as
the SDK's calls do (``client/_service_brokers.py``): starting at a random
one, past one that cannot be connected to within ``SERVICE_PROBE_S`` (the
last one left gets ``timeout_seconds``), marked down for a backoff, and
past one that answers ``UNAVAILABLE``. One round: when none answers,
``ConnectError`` names each broker tried (there is no connection timeout
to wait out, unlike the SDK's ``connection_timeout_ms``). A call that changes something and is not
idempotent (create a partitioned topic or a subscription, unload, split)
moves on only when nothing was sent (its channel could not connect). Once
the request may have been sent, ``UNAVAILABLE`` is ambiguous (the broker
may have applied it before it died), and asking another broker could
answer "already exists" or act twice, so the call raises ``ConnectError``
saying so, with the broker marked down: the caller checks, and its next
call goes elsewhere. A channel is checked for a connection when first used
and after a call on it failed, so a long-lived ``Admin`` whose broker died
since its last call meets this case too.
"""

from __future__ import annotations

import base64
import json
import queue
import time
from typing import Any

import grpc

from client._admin_bookies import BookieVerbs
from client._admin_compaction import CompactionVerbs
from client._admin_permissions import NamespacePermissionVerbs, TopicPermissionVerbs
from client._admin_policies import PolicyVerbs
from client._admin_schemas import SchemaVerbs
from client._client_options import TLS_OPTIONS, client_tls
from client._connection import (
    LOOKUP_PROBE_S,
    MAX_LOOKUP_REDIRECTS,
    SERVICE_PROBE_S,
    channel_options,
    parse_service_url,
    pick_start,
    rpc_failure,
)
from client._service_brokers import ServiceBrokers, try_next
from client.authentication import token_of
from client.exceptions import ConnectError, InvalidConfiguration, from_wire
from client.exceptions import LookupError as MagnetarLookupError
from client.message import Message, unpack_split
from protos import broker_pb2, broker_pb2_grpc
from protos.credentials import sync_channel
from protos.entry import split_entry
from protos.tls import TlsClient, diagnose

# A channel in one of these states cannot carry a call now (see Connection.ensure_ready).
_CANNOT_CONNECT = (grpc.ChannelConnectivity.TRANSIENT_FAILURE, grpc.ChannelConnectivity.SHUTDOWN)


def wait_connected(
    ch: grpc.Channel, address: str, timeout_s: float, tls: TlsClient | None = None
) -> None:
    """Return once ``ch`` is connected; else ConnectError: at once when
    connecting fails (refused or reset), after ``timeout_s`` when the broker
    does not answer. Called once per channel until it connects (and again
    after a call on it failed), not before every call: gRPC's connectivity
    watch thread can outlive the subscription for up to 0.2 s, and a second
    subscription in that window makes it fail on a channel closed then."""
    states: queue.SimpleQueue[grpc.ChannelConnectivity] = queue.SimpleQueue()
    on_change = states.put
    ch.subscribe(on_change, try_to_connect=True)  # calls on_change with the state now
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                state = states.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise ConnectError(
                    f"cannot connect to the broker at {address} within {timeout_s:g} s"
                ) from None
            if state == grpc.ChannelConnectivity.READY:
                return
            if state in _CANNOT_CONNECT:
                why = diagnose(address, tls) or "connecting failed"
                raise ConnectError(f"cannot connect to the broker at {address} ({why})")
    finally:
        ch.unsubscribe(on_change)


class _Tenants:
    def __init__(self, admin: Admin) -> None:
        self._admin = admin

    def get_tenants(self) -> list[str]:
        return self._admin._op("tenants.list")  # type: ignore[no-any-return]

    def get_tenant_info(self, tenant: str) -> dict[str, Any]:
        """``{"adminRoles": [...], "allowedClusters": [...]}``."""
        return self._admin._op("tenants.get", tenant=tenant)  # type: ignore[no-any-return]

    def create_tenant(
        self,
        tenant: str,
        admin_roles: list[str] | None = None,
        allowed_clusters: list[str] | None = None,
    ) -> dict[str, Any]:
        """A new tenant (allowed in this cluster unless ``allowed_clusters`` says)."""
        return self._admin._op(  # type: ignore[no-any-return]
            "tenants.create",
            idempotent=False,
            tenant=tenant,
            admin_roles=admin_roles,
            allowed_clusters=allowed_clusters,
        )

    def update_tenant(
        self,
        tenant: str,
        admin_roles: list[str] | None = None,
        allowed_clusters: list[str] | None = None,
    ) -> dict[str, Any]:
        """Change what is given; the rest stays."""
        return self._admin._op(  # type: ignore[no-any-return]
            "tenants.update",
            tenant=tenant,
            admin_roles=admin_roles,
            allowed_clusters=allowed_clusters,
        )

    def delete_tenant(self, tenant: str, force: bool = False) -> dict[str, Any]:
        """Refused while it has namespaces, unless ``force`` (which deletes them all)."""
        return self._admin._op(  # type: ignore[no-any-return]
            "tenants.delete", idempotent=False, tenant=tenant, force=force
        )


class _Topics(TopicPermissionVerbs, PolicyVerbs, CompactionVerbs):
    _level = "topic"

    def __init__(self, admin: Admin) -> None:
        super().__init__(admin)
        self._admin: Admin = admin

    def stats(self, topic: str) -> dict[str, Any]:
        """msgRateIn/Out, msgThroughputIn/Out, storageSize, backlogSize,
        publishers, subscriptions{name: {msgBacklog, unackedMessages, type,
        consumers[...]}} and counters."""
        return self._admin._op("topics.stats", topic=topic)  # type: ignore[no-any-return]

    def delete(self, topic: str, force: bool = False) -> dict[str, Any]:
        """Delete ``topic`` (a partitioned one: all its partitions); refused
        while producers or consumers are connected unless ``force``."""
        return self._admin._op(  # type: ignore[no-any-return]
            "topics.delete", idempotent=False, topic=topic, force=force
        )

    def unsubscribe(self, topic: str, subscription: str, force: bool = False) -> dict[str, Any]:
        """Delete a subscription (refused while consumers are connected unless ``force``)."""
        return self._admin._op(  # type: ignore[no-any-return]
            "topics.unsubscribe",
            idempotent=False,
            topic=topic,
            subscription=subscription,
            force=force,
        )

    def expire_messages(
        self, topic: str, subscription: str, expire_time_s: float
    ) -> dict[str, Any]:
        """Acknowledge the messages of ``subscription`` published more than
        ``expire_time_s`` seconds ago; ``{"expired": n}``."""
        return self._admin._op(  # type: ignore[no-any-return]
            "topics.expire-messages",
            topic=topic,
            subscription=subscription,
            expire_time_s=expire_time_s,
        )

    def expire_messages_all_subscriptions(self, topic: str, expire_time_s: float) -> dict[str, Any]:
        """:meth:`expire_messages` on every subscription; ``{"expired": {sub: n}}``."""
        return self._admin._op(  # type: ignore[no-any-return]
            "topics.expire-messages-all-subscriptions", topic=topic, expire_time_s=expire_time_s
        )

    def partitioned_stats(self, topic: str, per_partition: bool = False) -> dict[str, Any]:
        """The stats of a partitioned topic, its partitions added up, with
        ``metadata.partitions`` (and ``partitions``: each one's stats)."""
        return self._admin._op(  # type: ignore[no-any-return]
            "topics.partitioned-stats", topic=topic, per_partition=per_partition
        )

    def terminate(self, topic: str) -> dict[str, Any]:
        """Seal ``topic``: sends are refused with TopicTerminated from now on,
        and readers see the end of the topic once they read up to the last
        message, whose id this answers (per partition index for a partitioned topic)."""
        return self._admin._op("topics.terminate", idempotent=False, topic=topic)  # type: ignore[no-any-return]

    def last_message_id(self, topic: str) -> dict[str, Any]:
        """``{"ledgerId", "entryId", "partitionIndex", "batchIndex"}`` of the last message."""
        return self._admin._op("topics.last-message-id", topic=topic)  # type: ignore[no-any-return]

    def peek_messages(self, topic: str, subscription: str, n: int = 1) -> list[Message]:
        """The first ``n`` messages ``subscription`` has not acknowledged
        (batches unpacked here, as pulsar-admin does), without acknowledging
        or delivering them."""
        answer = self._admin._op(
            "topics.peek-messages", topic=topic, subscription=subscription, count=n
        )
        out: list[Message] = []
        for e in answer["entries"]:
            meta, payload = split_entry(base64.b64decode(e["entry"]))
            out.extend(
                unpack_split(
                    meta,
                    payload,
                    e["ledgerId"],
                    e["entryId"],
                    answer["partition"],
                    answer["topic"],
                    0,
                )
            )
        return out[:n]

    def stats_internal(self, topic: str) -> dict[str, Any]:
        """The managed ledger view: ``ledgers`` (ledgerId, entries, size),
        ``cursors`` (markDeletePosition, readPosition,
        individuallyDeletedMessages), ``lastConfirmedEntry``, ``state``."""
        return self._admin._op("topics.stats-internal", topic=topic)  # type: ignore[no-any-return]

    def skip(self, topic: str, subscription: str, n: int) -> dict[str, Any]:
        """Acknowledge the oldest entries of ``subscription`` holding at most
        ``n`` messages; ``{"skipped": messages}``."""
        return self._admin._op(  # type: ignore[no-any-return]
            "topics.skip", idempotent=False, topic=topic, subscription=subscription, count=n
        )

    def reset_cursor(
        self,
        topic: str,
        subscription: str,
        timestamp_ms: int | None = None,
        message_id: str | None = None,
        exclude: bool = False,
    ) -> Any:
        """Move ``subscription`` to the first message published at or after
        ``timestamp_ms``, or to ``message_id`` ("ledger:entry"; with
        ``exclude``, just after it). Its consumers reconnect and receive from there."""
        return self._admin._op(
            "topics.reset-cursor",
            topic=topic,
            subscription=subscription,
            timestamp_ms=timestamp_ms,
            message_id=message_id,
            exclude=exclude,
        )

    def clear_backlog(self, topic: str, subscription: str) -> dict[str, Any]:
        """Acknowledge every message of ``subscription``."""
        return self._admin._op(  # type: ignore[no-any-return]
            "topics.clear-backlog", topic=topic, subscription=subscription
        )

    def create_partitioned_topic(self, topic: str, partitions: int) -> dict[str, Any]:
        """Create ``topic`` with ``partitions`` partitions (``<topic>-partition-i``)."""
        if not isinstance(partitions, int) or isinstance(partitions, bool):
            raise InvalidConfiguration(f"partitions must be an int, not {partitions!r}")
        return self._admin._json(
            "CreatePartitionedTopic",
            broker_pb2.CreatePartitionedTopicRequest(topic=topic, partitions=partitions),
            idempotent=False,
        )

    def lookup(self, topic: str) -> dict[str, Any]:
        """``{"brokerUrl": "magnetar://host:port", "brokerUrlTls":
        "magnetar+tls://host:port"}`` (Pulsar's fields; each only when the
        broker serving ``topic`` has that port)."""
        resp, address = self._admin._call_with_address(
            broker_pb2_grpc.BrokerStub, "Lookup", broker_pb2.LookupRequest(topic=topic)
        )
        for _ in range(MAX_LOOKUP_REDIRECTS):
            if resp.error.code != 0:
                raise from_wire(resp.error)
            if not resp.redirect:
                return {
                    **({"brokerUrl": f"magnetar://{resp.broker_url}"} if resp.broker_url else {}),
                    **(
                        {"brokerUrlTls": f"magnetar+tls://{resp.broker_url_tls}"}
                        if resp.broker_url_tls
                        else {}
                    ),
                }
            address = resp.broker_url_tls if self._admin._tls is not None else resp.broker_url
            resp = self._admin._call_at(
                address,
                broker_pb2_grpc.BrokerStub,
                "Lookup",
                broker_pb2.LookupRequest(topic=topic, authoritative=resp.authoritative),
                LOOKUP_PROBE_S,
            )
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
            idempotent=False,
        )

    def get_partitioned_topic_metadata(self, topic: str) -> dict[str, Any]:
        """``{"partitions": n}``; 0 for a topic that is not partitioned."""
        resp = self._admin._call(
            broker_pb2_grpc.BrokerStub,
            "GetPartitionedTopicMetadata",
            broker_pb2.PartitionedTopicMetadataRequest(topic=topic),
        )
        if resp.error.code != 0:
            raise from_wire(resp.error)
        return {"partitions": resp.partitions}

    def get_list(self, namespace: str, include_system_topic: bool = False) -> list[str]:
        """The topics of ``namespace`` (tenant/namespace), persistent and
        non-persistent, partitioned ones as their partitions; sorted. System
        topics (``magnetar/system``, names starting ``__``) only when asked for."""
        resp = self._admin._call(
            broker_pb2_grpc.BrokerStub,
            "GetTopicsOfNamespace",
            broker_pb2.TopicsOfNamespaceRequest(
                namespace=namespace,
                mode=broker_pb2.ALL_DOMAINS,
                include_system_topic=include_system_topic,
            ),
        )
        if resp.error.code != 0:
            raise from_wire(resp.error)
        return sorted(resp.topics)

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


class _Namespaces(NamespacePermissionVerbs, PolicyVerbs):
    _level = "namespace"

    def __init__(self, admin: Admin) -> None:
        super().__init__(admin)
        self._admin: Admin = admin

    def get_namespaces(self, tenant: str) -> list[str]:
        """The namespaces of ``tenant`` (``tenant/ns``)."""
        return self._admin._op("namespaces.list", tenant=tenant)  # type: ignore[no-any-return]

    def create_namespace(
        self, namespace: str, bundles: int | None = None, clusters: list[str] | None = None
    ) -> dict[str, Any]:
        """A new namespace of an existing tenant (``bundles`` default:
        the broker's default_number_of_namespace_bundles)."""
        return self._admin._op(  # type: ignore[no-any-return]
            "namespaces.create",
            idempotent=False,
            namespace=namespace,
            bundles=bundles,
            clusters=clusters,
        )

    def get_policies(self, namespace: str) -> dict[str, Any]:
        """The whole Policies document (Pulsar's field names)."""
        return self._admin._op("namespaces.policies", namespace=namespace)  # type: ignore[no-any-return]

    def get_topics(self, namespace: str) -> list[str]:
        """Every topic of ``namespace`` (partitions one by one)."""
        return self._admin._op("namespaces.topics", namespace=namespace)  # type: ignore[no-any-return]

    def delete_namespace(self, namespace: str, force: bool = False) -> dict[str, Any]:
        """Refused while it has topics, unless ``force`` (which deletes them)."""
        return self._admin._op(  # type: ignore[no-any-return]
            "namespaces.delete", idempotent=False, namespace=namespace, force=force
        )

    def clear_backlog(self, namespace: str, subscription: str = "") -> dict[str, Any]:
        """Clear ``subscription`` (or every subscription) on every topic."""
        return self._admin._op(  # type: ignore[no-any-return]
            "namespaces.clear-backlog", namespace=namespace, subscription=subscription
        )

    def unsubscribe(self, namespace: str, subscription: str) -> dict[str, Any]:
        """Delete ``subscription`` from every topic that has it."""
        return self._admin._op(  # type: ignore[no-any-return]
            "namespaces.unsubscribe",
            idempotent=False,
            namespace=namespace,
            subscription=subscription,
        )

    def set_auto_topic_creation(
        self,
        namespace: str,
        enable: bool,
        topic_type: str = "non-partitioned",
        num_partitions: int = 1,
    ) -> Any:
        doc: dict[str, Any] = {"allowAutoTopicCreation": enable, "topicType": topic_type}
        if topic_type == "partitioned":
            doc["defaultNumPartitions"] = num_partitions
        return self.set_policy(namespace, "auto-topic-creation", doc)

    def set_auto_subscription_creation(self, namespace: str, enable: bool) -> Any:
        return self.set_policy(
            namespace, "auto-subscription-creation", {"allowAutoSubscriptionCreation": enable}
        )

    def set_subscription_expiration_time(self, namespace: str, minutes: int) -> Any:
        return self.set_policy(namespace, "subscription-expiration-time", minutes)

    def set_max_topics_per_namespace(self, namespace: str, n: int) -> Any:
        return self.set_policy(namespace, "max-topics-per-namespace", n)

    def unload(self, namespace: str, bundle: str | None = None) -> dict[str, Any]:
        """Release ``bundle`` (or every bundle) of ``namespace`` from its owner."""
        return self._admin._json(
            "Unload",
            broker_pb2.UnloadRequest(namespace=namespace, bundle=bundle or ""),
            idempotent=False,
        )

    def split_bundle(self, namespace: str, bundle: str, unload: bool = False) -> dict[str, Any]:
        """Cut ``bundle`` of ``namespace`` in two halves (its owner does it);
        with ``unload`` both halves are released at once, so they can be
        placed on other brokers. ``{"bundle", "splitInto": [low, high]}``."""
        return self._admin._json(
            "SplitBundle",
            broker_pb2.SplitBundleRequest(namespace=namespace, bundle=bundle, unload=unload),
            idempotent=False,
        )

    def bundles(self, namespace: str) -> dict[str, Any]:
        """``{"namespace", "bundles": [{"bundle", "state", "owner"}]}``."""
        return self._admin._json(
            "NamespaceBundles", broker_pb2.NamespaceBundlesRequest(namespace=namespace)
        )


class Admin:
    def __init__(
        self,
        service_url: str,
        authentication: Any = None,
        timeout_seconds: float = 30,
        **tls: Any,
    ) -> None:
        """``tls``: the Client's TLS options (``tls_trust_certs_file_path``,
        ``tls_allow_insecure_connection``, ``tls_validate_hostname``,
        ``tls_certificate_file_path``, ``tls_private_key_file_path``) for a
        ``magnetar+tls://`` URL."""
        unknown = set(tls) - set(TLS_OPTIONS)
        if unknown:
            raise InvalidConfiguration(f"Admin() got unknown options {sorted(unknown)}")
        self._tls = client_tls(service_url, tls)
        self._token = token_of(authentication)
        addresses = list(dict.fromkeys(parse_service_url(service_url)))
        self._brokers = ServiceBrokers(addresses, pick_start(len(addresses)))
        self._timeout_s = timeout_seconds
        self._channels: dict[str, grpc.Channel] = {}  # opened when first asked
        self._connected: set[str] = set()  # channels that connected and have not failed since
        self.tenants = _Tenants(self)
        self.topics = _Topics(self)
        self.namespaces = _Namespaces(self)
        self.brokers = _Brokers(self)
        self.bookies = BookieVerbs(self)
        self.schemas = SchemaVerbs(self)

    def _channel(self, address: str) -> grpc.Channel:
        ch = self._channels.get(address)
        if ch is None:
            try:
                ch = sync_channel(address, channel_options(), self._token, self._tls)
            except ConnectionError as exc:  # reading its certificate failed
                raise ConnectError(f"cannot connect to the broker at {address}: {exc}") from None
            self._channels[address] = ch
        return ch

    def _connect(self, address: str, probe_s: float) -> grpc.Channel:
        """The channel to ``address``, connected (else ConnectError: nothing was sent)."""
        ch = self._channel(address)
        if address not in self._connected:
            wait_connected(ch, address, min(probe_s, self._timeout_s), self._tls)
            self._connected.add(address)
        return ch

    def _op(self, operation: str, idempotent: bool = True, **arguments: Any) -> Any:
        """An operation of the broker's ``Call`` RPC (``group.verb``) with
        JSON arguments (None ones left out: the broker's default applies)."""
        args = {k: v for k, v in arguments.items() if v is not None}
        request = broker_pb2.AdminCallRequest(operation=operation, arguments=json.dumps(args))
        return self._json("Call", request, idempotent)

    def _json(self, method: str, request: Any, idempotent: bool = True) -> Any:
        resp = self._call(broker_pb2_grpc.BrokerAdminStub, method, request, idempotent)
        if resp.error.code != 0:
            raise from_wire(resp.error)
        return json.loads(resp.json)  # type: ignore[no-any-return]

    def _call(self, stub: type, method: str, request: Any, idempotent: bool = True) -> Any:
        return self._call_with_address(stub, method, request, idempotent)[0]

    def _call_with_address(
        self, stub: type, method: str, request: Any, idempotent: bool = True
    ) -> tuple[Any, str]:
        """``method`` on the service URL's brokers in turn (see the module
        docstring): its answer and the broker that gave it."""
        tried: list[str] = []
        failures: list[str] = []
        while (address := self._brokers.pick(time.monotonic() * 1000, tried)) is not None:
            tried.append(address)
            last = len(tried) == len(self._brokers.addresses)
            try:
                ch = self._connect(address, self._timeout_s if last else SERVICE_PROBE_S)
                resp = getattr(stub(ch), method)(request, timeout=self._timeout_s)
            except ConnectError as exc:
                failures.append(str(exc))  # never sent: any call may go on
            except grpc.RpcError as exc:
                self._connected.discard(address)
                if not try_next(exc.code()):
                    raise rpc_failure(address, exc) from None
                if not idempotent:
                    self._brokers.mark_down(address, time.monotonic() * 1000)
                    raise ConnectError(
                        f"broker {address} became unavailable during {method}; it may or may "
                        "not have been applied: check before trying again"
                    ) from None
                failures.append(f"broker {address}: {exc.code().name}")
            else:
                self._brokers.mark_up(address)
                return resp, address
            self._brokers.mark_down(address, time.monotonic() * 1000)
        raise ConnectError(f"{method}: no broker of the service URL answers: {'; '.join(failures)}")

    def _call_at(self, address: str, stub: type, method: str, request: Any, probe_s: float) -> Any:
        """``method`` on the broker at ``address`` (named by a lookup)."""
        try:
            return getattr(stub(self._connect(address, probe_s)), method)(
                request, timeout=self._timeout_s
            )
        except grpc.RpcError as exc:
            self._connected.discard(address)
            raise rpc_failure(address, exc) from None

    def close(self) -> None:
        for ch in self._channels.values():
            ch.close()
        self._channels.clear()
        self._connected.clear()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
