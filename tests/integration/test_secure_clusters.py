"""``magnetar standalone --secure`` and ``local-cluster --secure`` (issue 23,
point 4): a CA, certificates, a token key and a superuser token made under
the data dir; every process with TLS, tokens and authorization, their own
calls over TLS with the superuser's token; what they print; a broker with
its plaintext port off."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from broker.local_cluster import (
    BOOKIE_METRICS,
    BOOKIE_PORT,
    BOOKIE_TLS,
    BROKER_METRICS,
    BROKER_PORT,
    BROKER_TLS,
    METASTORE_METRICS,
    METASTORE_PORT,
    METASTORE_TLS,
    port_is_free,
)
from client import AuthenticationToken, Client, InitialPosition
from client.admin import Admin
from client.exceptions import AuthenticationError, AuthorizationError
from protos import bookie_pb2, bookie_pb2_grpc, metastore_pb2, metastore_pb2_grpc
from protos.tokens import create_token
from tests.harness import ROOT, StandaloneCluster, wait_for
from tests.integration.test_local_cluster import _start, _stop

pytestmark = pytest.mark.integration

TLS_PORTS_FREE = ["--metastore-port-tls", "0", "--bookie-port-tls", "0", "--broker-port-tls", "0"]


def _secure_client(url: str, security: dict) -> Client:
    return Client(
        url,
        tls_trust_certs_file_path=security["ca"],
        authentication=AuthenticationToken(f"file://{security['admin_token']}"),
    )


def _round_trip(client: Client, topic: str) -> bytes:
    consumer = client.subscribe(topic, "s", initial_position=InitialPosition.Earliest)
    client.create_producer(topic).send(b"secured")
    return consumer.receive(timeout_millis=20000).data()


def _refused_without_token(address: str, call) -> grpc.StatusCode | None:
    with grpc.insecure_channel(address) as channel:
        try:
            call(channel)
        except grpc.RpcError as exc:
            return exc.code()  # type: ignore[no-any-return]
    return None


def test_standalone_secure_with_the_brokers_plaintext_port_off(tmp_path: Path):
    cluster = StandaloneCluster(
        tmp_path / "data", ["--secure", *TLS_PORTS_FREE, "--broker-port", "-1"]
    ).start()
    try:
        endpoints, security = cluster.endpoints, cluster.endpoints["security"]
        assert endpoints["service_url"].startswith("magnetar+tls://")
        files = tmp_path / "data" / "security"
        for secret in ("server.key.pem", "token-secret.key", "admin.token", "raft.secret"):
            assert stat.S_IMODE((files / secret).stat().st_mode) == 0o600, secret
        with _secure_client(endpoints["service_url"], security) as client:
            assert _round_trip(client, "persistent://public/default/sec") == b"secured"
        stats = lambda ch: bookie_pb2_grpc.BookieStub(ch).Stats(  # noqa: E731
            bookie_pb2.StatsRequest(), timeout=10
        )
        get = lambda ch: metastore_pb2_grpc.MetastoreStub(ch).Get(  # noqa: E731
            metastore_pb2.GetRequest(key="/admin/tenants/public"), timeout=10
        )
        assert _refused_without_token(endpoints["bookie"], stats) == grpc.StatusCode.UNAUTHENTICATED
        assert (
            _refused_without_token(endpoints["metastore"], get) == grpc.StatusCode.UNAUTHENTICATED
        )
        # Stopped and started again: the same CA and token still work.
        cluster.stop()
        cluster.start()
        with _secure_client(cluster.endpoints["service_url"], security) as client:
            assert _round_trip(client, "persistent://public/default/sec-2") == b"secured"
    finally:
        cluster.stop()


def test_standalone_secure_with_mutual_tls_between_its_processes(tmp_path: Path):
    """The bookie and the metastore demand a client certificate: the broker's
    and the bookie's own calls present theirs (broker_client_tls_enabled)."""
    config = tmp_path / "mtls.toml"
    demand = "tls_require_trusted_client_cert_on_connect = true\n"
    config.write_text(f"[metastore]\n{demand}[bookie]\n{demand}")
    cluster = StandaloneCluster(
        tmp_path / "data", ["--secure", *TLS_PORTS_FREE, "--config", str(config)]
    ).start()
    try:
        endpoints = cluster.endpoints
        with _secure_client(endpoints["service_url_tls"], endpoints["security"]) as client:
            assert _round_trip(client, "persistent://public/default/mtls") == b"secured"
    finally:
        cluster.stop()


def _free_secure_offset() -> int:
    bases = (BOOKIE_PORT, BROKER_PORT, METASTORE_METRICS, BOOKIE_METRICS, BROKER_METRICS)
    for offset in range(20011, 40000, 89):
        ports = [METASTORE_PORT + offset + i for i in range(6)]
        for base in (*bases, METASTORE_TLS, BOOKIE_TLS, BROKER_TLS):
            ports += [base + offset + i for i in range(3)]
        if all(port_is_free(p) for p in ports):
            return offset
    raise AssertionError("no free port range for the cluster")


def test_local_cluster_secure_prints_how_to_connect_and_serves_only_tokens(tmp_path: Path):
    offset = _free_secure_offset()
    proc, endpoints = _start(
        tmp_path, "--secure", "--port-offset", str(offset), "--brokers", "2", "--bookies", "2"
    )
    try:
        security = endpoints["security"]
        printed = (tmp_path / "supervisor.log").read_text()
        assert "magnetar+tls://" in printed and "--auth-params file://" in printed
        tls_url = security["how_to_connect"].split()[1]
        assert tls_url.count(",") == 1  # both brokers
        with _secure_client(tls_url, security) as client:
            for i in range(4):  # topics on both brokers
                assert _round_trip(client, f"persistent://public/default/lc-{i}") == b"secured"
        with Client(endpoints["service_url"]) as client, pytest.raises(AuthenticationError):
            client.create_producer("persistent://public/default/lc-plain")
        _a_forwarded_call_carries_the_callers_role(tls_url, security, tmp_path)
        health = subprocess.run(
            [
                sys.executable,
                "-m",
                "broker.cli",
                "health",
                "--tls",
                tls_url.split(",")[-1].removeprefix("magnetar+tls://"),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert health.returncode == 0, health.stdout + health.stderr
    finally:
        _stop(proc, tmp_path)
    wait_for(lambda: proc.poll() is not None, 30, "the cluster to stop")


def _a_forwarded_call_carries_the_callers_role(
    tls_url: str, security: dict, tmp_path: Path
) -> None:
    """An admin call made at the broker that does not own the topic is
    forwarded with the caller's token: a role with consume gets the stats
    through either broker, one with nothing through neither."""
    key = (tmp_path / "data-cluster" / "security" / "token-secret.key").read_bytes()
    ca = {"tls_trust_certs_file_path": security["ca"]}
    admin_token = AuthenticationToken(f"file://{security['admin_token']}")
    with Admin(tls_url, authentication=admin_token, **ca) as admin:
        admin.tenants.create_tenant("acme")
        admin.namespaces.create_namespace("acme/ns", bundles=4)
        admin.namespaces.grant_permission_on_namespace("acme/ns", "app", ["consume"])
    topics = [f"persistent://acme/ns/fwd-{i}" for i in range(8)]
    with _secure_client(tls_url, security) as client:
        for topic in topics:  # loaded somewhere: bundles spread over both brokers
            client.create_producer(topic).send(b"x")
    brokers = [a.removeprefix("magnetar+tls://") for a in tls_url.split(",")]
    for role, allowed in (("app", True), ("nobody", False)):
        token = AuthenticationToken(create_token(role, secret_key=key))
        for broker in brokers:
            with Admin(f"magnetar+tls://{broker}", authentication=token, **ca) as admin:
                for topic in topics:
                    if allowed:
                        assert admin.topics.stats(topic)["publishers"] is not None
                    else:
                        with pytest.raises(AuthorizationError):
                            admin.topics.stats(topic)
