"""Token authentication and authorization on real processes (issue 23): a
standalone whose broker, bookie and metastore all require tokens, the
broker judging every RPC by Pulsar's model (superusers, tenant admins,
namespace, topic and subscription grants).

The RPC table is checked against the service descriptors, so a new RPC
without a row here (and without a rule in broker/authorizer.py) fails."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from broker.authorizer import OPERATION_RULES
from client import AuthenticationToken, Client, ConsumerType, InitialPosition
from client.admin import Admin
from client.exceptions import (
    AuthenticationError,
    AuthorizationError,
    NotFound,
    PreconditionFailed,
)
from protos import (
    bookie_pb2,
    bookie_pb2_grpc,
    broker_pb2,
    broker_pb2_grpc,
    common_pb2,
    metastore_pb2,
    metastore_pb2_grpc,
)
from protos.access import method_name
from protos.tokens import create_secret_key, create_token
from tests.harness import ROOT, StandaloneCluster, wait_for
from tests.metrics_scrape import scrape

pytestmark = pytest.mark.integration

NS = "acme/ns"
TOPIC = "persistent://acme/ns/orders"
_n = itertools.count()


@dataclass
class Secured:
    cluster: StandaloneCluster
    key: bytes
    tokens: dict[str, str]  # role -> token

    @property
    def url(self) -> str:
        return self.cluster.service_url

    def admin(self, role: str | None = "admin") -> Admin:
        auth = AuthenticationToken(self.tokens[role]) if role else None
        return Admin(self.url, authentication=auth)

    def client(self, role: str | None, **kwargs: Any) -> Client:
        auth = AuthenticationToken(self.tokens[role]) if role else None
        return Client(self.url, authentication=auth, **kwargs)

    def metadata(self, role: str | None) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.tokens[role]}"),) if role else ()


ROLES = ("admin", "acme-admin", "alice", "reader", "mallory")
SECURITY = """authentication_enabled = true
authorization_enabled = true
superuser_roles = "admin"
token_secret_key = "file://{key}"
"""


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    base = tmp_path_factory.mktemp("secured")
    key = create_secret_key()
    (base / "secret.key").write_bytes(key)
    tokens = {role: create_token(role, secret_key=key) for role in ROLES}
    (base / "admin.token").write_text(tokens["admin"])
    own = SECURITY.format(key=base / "secret.key")
    internal = f'broker_client_auth_params = "file://{base / "admin.token"}"\n'
    (base / "magnetar.toml").write_text(
        f"[metastore]\n{own}\n[bookie]\n{own}{internal}\n[broker]\n{own}{internal}"
    )
    cluster = StandaloneCluster(base / "data", ["--config", str(base / "magnetar.toml")])
    cluster.start()
    secured = Secured(cluster, key, tokens)
    try:
        with secured.admin() as admin:
            admin.tenants.create_tenant("acme", admin_roles=["acme-admin"])
            admin.namespaces.create_namespace(NS, bundles=1)
            admin.namespaces.grant_permission_on_namespace(NS, "alice", ["produce", "consume"])
            admin.namespaces.grant_permission_on_namespace(NS, "reader", ["consume"])
        yield secured
    finally:
        cluster.stop()


# ---------------------------------------------------------------- every RPC


def _unary(stub: type, method: str, request: Any) -> Callable[[grpc.Channel, tuple], Any]:
    def call(channel: grpc.Channel, metadata: tuple) -> Any:
        return getattr(stub(channel), method)(request, metadata=metadata, timeout=30)

    return call


def _first_answer(method: str, first: Any) -> Callable[[grpc.Channel, tuple], Any]:
    """A stream's first answer (the stream is cancelled after it)."""

    def call(channel: grpc.Channel, metadata: tuple) -> Any:
        responses = getattr(broker_pb2_grpc.BrokerStub(channel), method)(
            iter([first]), metadata=metadata, timeout=30
        )
        try:
            return next(responses)
        finally:
            responses.cancel()

    return call


def _ok(answer: Any) -> bool:
    """A broker answer without an error (JSON answers carry one in ``error``)."""
    return "error" not in answer.DESCRIPTOR.fields_by_name or answer.error.code == 0


@dataclass
class Row:
    call: Callable[[grpc.Channel, tuple], Any]
    allowed: str  # the least role that may make it
    lacking: str  # a role that may not
    succeeded: Callable[[Any], bool] = _ok
    # A call that carries many streams judges each by itself: a lacking role's
    # stream is refused in its answer, not by ending the call.
    refused_in_band: Callable[[Any], bool] | None = None


def _stream_ok(kind: str) -> Callable[[Any], bool]:
    return lambda answer: answer.WhichOneof("response") == kind


def _create_frame(stream_id: int, topic: str) -> broker_pb2.ProducerRequestFrame:
    create = broker_pb2.ProducerRequest(create=broker_pb2.CreateProducer(topic=topic))
    return broker_pb2.ProducerRequestFrame(id=stream_id, request=create)


def _broker_rows(n: int) -> dict[str, Row]:
    stub = broker_pb2_grpc.BrokerStub
    return {
        "Broker/Produce": Row(
            _first_answer(
                "Produce",
                broker_pb2.ProducerRequest(create=broker_pb2.CreateProducer(topic=TOPIC)),
            ),
            "alice",
            "reader",
            _stream_ok("created"),
        ),
        "Broker/ProduceMany": Row(
            _first_answer(
                "ProduceMany",
                broker_pb2.ProducerRequestFrames(frames=[_create_frame(1, TOPIC)]),
            ),
            "alice",
            "reader",
            lambda answer: answer.frames[0].response.WhichOneof("response") == "created",
            lambda answer: answer.frames[0].response.error.code == common_pb2.UNAUTHORIZED,
        ),
        "Broker/Consume": Row(
            _first_answer(
                "Consume",
                broker_pb2.ConsumerRequest(
                    subscribe=broker_pb2.Subscribe(
                        topic=TOPIC, subscription=f"rpc-{n}", durable=True
                    )
                ),
            ),
            "reader",
            "mallory",
            _stream_ok("subscribed"),
        ),
        "Broker/Lookup": Row(
            _unary(stub, "Lookup", broker_pb2.LookupRequest(topic=TOPIC)), "reader", "mallory"
        ),
        "Broker/GetPartitionedTopicMetadata": Row(
            _unary(
                stub,
                "GetPartitionedTopicMetadata",
                broker_pb2.PartitionedTopicMetadataRequest(topic=TOPIC),
            ),
            "alice",
            "mallory",
        ),
        "Broker/GetSchema": Row(
            _unary(stub, "GetSchema", broker_pb2.GetSchemaRequest(topic=TOPIC, version=-1)),
            "reader",
            "mallory",
            # Authorized, it answers; TOPIC has no schema, so that answer is NOT_FOUND.
            lambda answer: answer.error.code in (0, common_pb2.NOT_FOUND),
        ),
        "Broker/GetTopicsOfNamespace": Row(
            _unary(stub, "GetTopicsOfNamespace", broker_pb2.TopicsOfNamespaceRequest(namespace=NS)),
            "reader",
            "mallory",
        ),
    }


def _admin_rows(n: int) -> dict[str, Row]:
    call = broker_pb2.AdminCallRequest(
        operation="topics.stats", arguments=json.dumps({"topic": TOPIC})
    )
    table: list[tuple[str, Any, str, str]] = [  # method, request, allowed, lacking
        (
            "KeySharedLookup",
            broker_pb2.KeySharedLookupRequest(topic=TOPIC, subscription="ks", key="k"),
            "reader",
            "mallory",
        ),
        (
            "CreatePartitionedTopic",
            broker_pb2.CreatePartitionedTopicRequest(
                topic=f"persistent://acme/ns/part-{n}", partitions=2
            ),
            "acme-admin",
            "alice",
        ),
        (
            "CreateSubscription",
            broker_pb2.CreateSubscriptionRequest(topic=TOPIC, subscription=f"made-{n}"),
            "reader",
            "mallory",
        ),
        ("ListBrokers", broker_pb2.ListBrokersRequest(), "admin", "acme-admin"),
        (
            "NamespaceBundles",
            broker_pb2.NamespaceBundlesRequest(namespace=NS),
            "acme-admin",
            "alice",
        ),
        ("Unload", broker_pb2.UnloadRequest(namespace="public/default"), "admin", "acme-admin"),
        (
            "SplitBundle",
            broker_pb2.SplitBundleRequest(
                namespace="public/default", bundle="0x00000000_0x40000000"
            ),
            "admin",
            "acme-admin",
        ),
        ("LeaderBroker", broker_pb2.LeaderBrokerRequest(), "admin", "acme-admin"),
        ("Call", call, "reader", "mallory"),
    ]
    stub = broker_pb2_grpc.BrokerAdminStub
    return {
        f"BrokerAdmin/{method}": Row(_unary(stub, method, request), allowed, lacking)
        for method, request, allowed, lacking in table
    }


def _rows() -> dict[str, Row]:
    n = next(_n)
    return {**_broker_rows(n), **_admin_rows(n)}


def _status(call: Callable[..., Any], *args: Any, **kwargs: Any) -> grpc.StatusCode | None:
    """The gRPC status ``call(*args, **kwargs)`` ended with (None: it answered)."""
    try:
        call(*args, **kwargs)
    except grpc.RpcError as exc:
        return exc.code()  # type: ignore[no-any-return]
    return None


def test_the_rpc_table_covers_every_client_facing_and_admin_rpc():
    services = broker_pb2.DESCRIPTOR.services_by_name
    described = {
        method_name(s.full_name, m.name)
        for s in (services["Broker"], services["BrokerAdmin"])
        for m in s.methods
    }
    assert set(_rows()) == described


def test_every_rpc_refuses_no_token_and_a_lacking_role_and_serves_the_right_one(secured):
    with secured.client("alice") as client:  # the topic and a Key_Shared subscription exist
        client.subscribe(TOPIC, "ks", consumer_type=ConsumerType.KeyShared).close()
    with grpc.insecure_channel(secured.cluster.endpoints["broker"]) as channel:
        for method, row in _rows().items():
            refused = _status(row.call, channel, ())
            assert refused == grpc.StatusCode.UNAUTHENTICATED, method
            if row.refused_in_band is not None:
                answer = row.call(channel, secured.metadata(row.lacking))
                assert row.refused_in_band(answer), (method, row.lacking, answer)
            else:
                lacking = _status(row.call, channel, secured.metadata(row.lacking))
                assert lacking == grpc.StatusCode.PERMISSION_DENIED, (method, row.lacking)
            answer = row.call(channel, secured.metadata(row.allowed))
            assert row.succeeded(answer), (method, row.allowed, answer)


def test_each_producer_of_a_produce_many_stream_is_authorized_before_it_is_created(secured):
    # The call is admitted on its role; each stream's create is judged by
    # itself. A refused one (here the first) is answered in its own frames,
    # changes nothing (its topic is not created) and does not end the call:
    # the next stream's producer is created on it.
    elsewhere = "persistent://public/default/not-for-alice"
    frames = [
        broker_pb2.ProducerRequestFrames(frames=[_create_frame(1, elsewhere)]),
        broker_pb2.ProducerRequestFrames(frames=[_create_frame(2, TOPIC)]),
    ]
    answers: dict[int, list[Any]] = {1: [], 2: []}
    with grpc.insecure_channel(secured.cluster.endpoints["broker"]) as channel:
        stream = broker_pb2_grpc.BrokerStub(channel).ProduceMany(
            iter(frames), metadata=secured.metadata("alice"), timeout=30
        )
        try:
            for message in stream:
                for frame in message.frames:
                    answers[frame.id].append(frame)
                if any(f.end for f in answers[1]) and answers[2]:
                    break
        finally:
            stream.cancel()
    refusal = answers[1][0].response
    assert refusal.WhichOneof("response") == "error", refusal
    assert refusal.error.code == common_pb2.UNAUTHORIZED, refusal
    assert answers[1][-1].end
    assert answers[2][0].response.WhichOneof("response") == "created"
    with secured.admin() as admin:
        assert elsewhere not in admin.topics.get_list("public/default")


@pytest.mark.parametrize("operation", sorted(OPERATION_RULES))
def test_every_admin_operation_is_refused_without_a_token_and_to_a_role_with_nothing(
    secured, operation
):
    arguments = json.dumps({"topic": TOPIC, "namespace": NS, "tenant": "acme", "subscription": "s"})
    request = broker_pb2.AdminCallRequest(operation=operation, arguments=arguments)
    with grpc.insecure_channel(secured.cluster.endpoints["broker"]) as channel:
        call = broker_pb2_grpc.BrokerAdminStub(channel).Call
        assert _status(call, request, timeout=30) == grpc.StatusCode.UNAUTHENTICATED
        assert (
            _status(call, request, metadata=secured.metadata("mallory"), timeout=30)
            == grpc.StatusCode.PERMISSION_DENIED
        )


# ---------------------------------------------------------------- bad tokens


def _bad_tokens(key: bytes) -> dict[str, str]:
    import jwt

    return {
        "another key": create_token("admin", secret_key=create_secret_key()),
        "expired": create_token("admin", secret_key=key, expiry_s=-60),
        "no sub": jwt.encode({"role": "admin"}, key, algorithm="HS256"),
        "garbage": "garbage",
    }


def test_a_bad_token_is_refused_and_changes_nothing(secured):
    with grpc.insecure_channel(secured.cluster.endpoints["broker"]) as channel:
        call = broker_pb2_grpc.BrokerAdminStub(channel).Call
        for why, token in _bad_tokens(secured.key).items():
            request = broker_pb2.AdminCallRequest(
                operation="tenants.create", arguments=json.dumps({"tenant": "forged"})
            )
            metadata = (("authorization", f"Bearer {token}"),)
            assert (
                _status(call, request, metadata=metadata, timeout=30)
                == grpc.StatusCode.UNAUTHENTICATED
            ), why
            forged = AuthenticationToken(token)
            with pytest.raises(AuthenticationError), Admin(secured.url, forged) as admin:
                admin.tenants.get_tenants()
    with secured.admin() as admin:
        assert "forged" not in admin.tenants.get_tenants()


def test_the_sdk_raises_pulsars_errors(secured):
    with secured.client(None) as client, pytest.raises(AuthenticationError):
        client.create_producer(TOPIC)
    with secured.client("mallory") as client, pytest.raises(AuthorizationError):
        client.create_producer(TOPIC)
    with secured.client("reader") as client:
        with pytest.raises(AuthorizationError):
            client.create_producer(TOPIC)
        client.subscribe(TOPIC, f"sdk-{next(_n)}").close()


# ---------------------------------------------------------------- grants


def test_topic_and_subscription_grants(secured):
    topic = f"persistent://acme/ns/granted-{next(_n)}"
    sub = f"audit-{next(_n)}"
    with secured.admin("acme-admin") as admin:  # a tenant admin grants
        admin.topics.grant_permission(topic, "mallory", ["produce"])
        assert admin.topics.get_permissions(topic)["mallory"] == ["produce"]
        admin.namespaces.grant_permission_on_subscription(NS, sub, ["alice"])
    with secured.client("mallory") as client:
        client.create_producer(topic).send(b"x")  # the topic grant
        with pytest.raises(AuthorizationError):
            client.create_producer(f"{topic}-other")
    # reader may consume, but the subscription is alice's
    with secured.client("reader") as client, pytest.raises(AuthorizationError):
        client.subscribe(topic, sub)
    with secured.client("alice") as client:
        client.subscribe(topic, sub).close()
    with secured.admin("acme-admin") as admin:
        admin.topics.revoke_permissions(topic, "mallory")
        admin.namespaces.revoke_permission_on_subscription(NS, sub, "alice")
        with pytest.raises(PreconditionFailed):  # nothing left to revoke on the topic itself
            admin.topics.revoke_permissions(topic, "mallory")
    with secured.client("mallory") as client, pytest.raises(AuthorizationError):
        client.create_producer(topic)
    # alice is not a tenant admin
    with secured.admin("alice") as admin, pytest.raises(AuthorizationError):
        admin.namespaces.grant_permission_on_namespace(NS, "alice", ["produce"])


def test_revoking_consume_closes_a_connected_consumer_and_refuses_it_again(secured):
    topic = f"persistent://acme/ns/revoked-{next(_n)}"
    with secured.admin() as admin:
        admin.namespaces.grant_permission_on_namespace(NS, "revokee", ["consume"])
    secured.tokens["revokee"] = create_token("revokee", secret_key=secured.key)
    with secured.client("alice") as writer, secured.client("revokee") as reader:
        consumer = reader.subscribe(
            topic, "r", initial_position=InitialPosition.Earliest, receiver_queue_size=1
        )
        producer = writer.create_producer(topic)
        producer.send(b"before")
        assert consumer.receive(timeout_millis=10000).data() == b"before"
        with secured.admin() as admin:
            admin.namespaces.revoke_permissions_on_namespace(NS, "revokee")
        for i in range(3):
            producer.send(f"after-{i}".encode())

        def refused() -> bool:
            try:
                consumer.receive(timeout_millis=200)
            except AuthorizationError:
                return True
            except Exception:
                return False
            return False

        wait_for(refused, 30, "the revoked consumer to fail with AuthorizationError")
        with pytest.raises(AuthorizationError):
            reader.subscribe(topic, "r")


# ---------------------------------------------------------------- expiry


def test_an_expired_token_is_refused_on_the_next_call_and_a_refreshed_one_goes_on(secured):
    topic = f"persistent://acme/ns/expiring-{next(_n)}"
    lifetime_s = 3
    expiring = create_token("alice", secret_key=secured.key, expiry_s=lifetime_s)
    expires_at = time.time() + lifetime_s
    refreshed = {"token": expiring}

    def supplier() -> str:
        return refreshed["token"]

    static = Client(secured.url, authentication=AuthenticationToken(expiring))
    refreshing = Client(secured.url, authentication=AuthenticationToken(supplier))
    try:
        fixed = static.create_producer(topic, batching_enabled=False)
        renewed = refreshing.create_producer(topic, batching_enabled=False)
        fixed.send(b"in time")
        renewed.send(b"in time")
        wait_for(lambda: time.time() > expires_at + 0.5, lifetime_s + 5, "the token to expire")
        refreshed["token"] = create_token("alice", secret_key=secured.key, expiry_s=3600)
        with pytest.raises(AuthenticationError):
            fixed.send(b"too late")
        renewed.send(b"with a new token")
    finally:
        static.close()
        refreshing.close()


# ---------------------------------------------------------------- the cluster's own


def test_the_bookie_and_the_metastore_refuse_all_but_the_cluster_role(secured):
    calls = {
        "bookie": lambda ch, md: bookie_pb2_grpc.BookieStub(ch).Stats(
            bookie_pb2.StatsRequest(), metadata=md, timeout=10
        ),
        "metastore": lambda ch, md: metastore_pb2_grpc.MetastoreStub(ch).Get(
            metastore_pb2.GetRequest(key="/admin/tenants/acme"), metadata=md, timeout=10
        ),
    }
    for role, call in calls.items():
        with grpc.insecure_channel(secured.cluster.endpoints[role]) as channel:
            assert _status(call, channel, ()) == grpc.StatusCode.UNAUTHENTICATED
            assert (
                _status(call, channel, secured.metadata("acme-admin"))
                == grpc.StatusCode.PERMISSION_DENIED
            )
            call(channel, secured.metadata("admin"))


# ---------------------------------------------------------------- the admin command


def _admin_cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "client.admin_cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
    )


def test_magnetar_admin_takes_pulsar_admins_auth_flags(secured, tmp_path: Path):
    url = ["--service-url", secured.url]
    refused = _admin_cli([*url, "tenants", "list"], {})
    assert refused.returncode == 1 and "AuthenticationError" in refused.stderr
    token = tmp_path / "admin.token"
    token.write_text(secured.tokens["admin"])
    listed = _admin_cli([*url, "--auth-params", f"file://{token}", "tenants", "list"], {})
    assert listed.returncode == 0, listed.stderr
    assert "acme" in json.loads(listed.stdout)
    granted = _admin_cli(
        [*url, "namespaces", "grant-permission", NS, "--role", "cli", "--actions", "produce"],
        {"MAGNETAR_AUTH_PARAMS": f"token:{secured.tokens['acme-admin']}"},
    )
    assert granted.returncode == 0, granted.stderr
    assert json.loads(granted.stdout)["cli"] == ["produce"]
    with secured.admin() as admin:
        assert admin.namespaces.get_permissions(NS)["cli"] == ["produce"]
        with pytest.raises(NotFound):
            admin.namespaces.get_permissions("acme/none")


# ---------------------------------------------------------------- metrics


def test_what_the_guard_decides_is_counted_in_pulsars_metrics(secured):
    before = scrape(int(secured.cluster.endpoints["metrics"]["broker"]))
    expired = create_token("alice", secret_key=secured.key, expiry_s=-1)
    with grpc.insecure_channel(secured.cluster.endpoints["broker"]) as channel:
        lookup = broker_pb2_grpc.BrokerStub(channel).Lookup
        request = broker_pb2.LookupRequest(topic=TOPIC)
        for metadata in (
            (),
            (("authorization", f"Bearer {expired}"),),
            secured.metadata("mallory"),
        ):
            _status(lookup, request, metadata=metadata, timeout=30)
        lookup(request, metadata=secured.metadata("alice"), timeout=30)

    def counted() -> bool:
        after = scrape(int(secured.cluster.endpoints["metrics"]["broker"]))
        return all(
            after.value(name) >= before.value(name) + n
            for name, n in (
                ("pulsar_authentication_failures_total", 2),
                ("pulsar_expired_token_total", 1),
                ("magnetar_authorization_failures_total", 1),
                ("pulsar_authentication_success_total", 2),
            )
        )

    wait_for(counted, 30, "the refusals to be counted")
