"""TLS on real processes (issue 23, point 1): a standalone whose broker has
a TLS port beside its plaintext one, with certificates from a throwaway CA
made here (``cryptography``); what a client trusting that CA, another CA,
or nothing gets, with and without hostname checks; a plaintext client at
the TLS port and a TLS client at the plaintext port fail at once, saying
why; mutual TLS; the metrics port behind TLS."""

from __future__ import annotations

import ssl
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from broker.secure_setup import make_ca, make_certificate, pem
from client import Client, InitialPosition
from client.admin import Admin
from client.exceptions import ConnectError, InvalidConfiguration
from tests.harness import StandaloneCluster

pytestmark = pytest.mark.integration

# The broker's certificate is for this name only (not 127.0.0.1), so the
# name check has something to fail on.
SERVER_NAME = "broker.magnetar.test"


@dataclass
class Pki:
    ca: Path
    other_ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _write_key(path: Path, key) -> Path:
    from cryptography.hazmat.primitives import serialization

    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return path


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    d = tmp_path_factory.mktemp("pki")
    ca_key, ca_cert = make_ca("test CA")
    _, other = make_ca("another CA")
    server_key, server_cert = make_certificate(ca_key, ca_cert, SERVER_NAME, [SERVER_NAME], [])
    client_key, client_cert = make_certificate(ca_key, ca_cert, "a client", ["client"], [])
    (d / "ca.pem").write_bytes(pem(ca_cert))
    (d / "other.pem").write_bytes(pem(other))
    (d / "server.pem").write_bytes(pem(server_cert))
    (d / "client.pem").write_bytes(pem(client_cert))
    return Pki(
        d / "ca.pem",
        d / "other.pem",
        d / "server.pem",
        _write_key(d / "server.key", server_key),
        d / "client.pem",
        _write_key(d / "client.key", client_key),
    )


def _standalone(base: Path, pki: Pki, extra: str = "") -> StandaloneCluster:
    base.mkdir(parents=True, exist_ok=True)
    (base / "magnetar.toml").write_text(
        "[broker]\n"
        "broker_service_port_tls = 0\n"
        f'tls_certificate_file_path = "{pki.server_cert}"\n'
        f'tls_key_file_path = "{pki.server_key}"\n'
        f'tls_trust_certs_file_path = "{pki.ca}"\n'
        "metrics_tls_enabled = true\n" + extra
    )
    return StandaloneCluster(base / "data", ["--config", str(base / "magnetar.toml")]).start()


def _tls_url(cluster: StandaloneCluster) -> str:
    return f"magnetar+tls://{cluster.endpoints['broker_tls']}"


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[StandaloneCluster]:
    cluster = _standalone(tmp_path_factory.mktemp("tls"), pki)
    try:
        yield cluster
    finally:
        cluster.stop()


def _round_trip(client: Client, topic: str) -> bytes:
    consumer = client.subscribe(topic, "s", initial_position=InitialPosition.Earliest)
    client.create_producer(topic).send(b"over TLS")
    return consumer.receive(timeout_millis=10000).data()


def test_a_client_trusting_the_ca_produces_and_consumes_over_tls(tls_cluster, pki):
    with Client(_tls_url(tls_cluster), tls_trust_certs_file_path=str(pki.ca)) as client:
        assert _round_trip(client, "persistent://public/default/tls-1") == b"over TLS"
    with Admin(_tls_url(tls_cluster), tls_trust_certs_file_path=str(pki.ca)) as admin:
        found = admin.topics.lookup("persistent://public/default/tls-1")
    assert found["brokerUrlTls"] == _tls_url(tls_cluster)
    assert found["brokerUrl"].startswith("magnetar://")


def test_a_client_trusting_another_ca_fails_saying_so(tls_cluster, pki):
    with (
        Client(_tls_url(tls_cluster), tls_trust_certs_file_path=str(pki.other_ca)) as client,
        pytest.raises(ConnectError, match="not trusted"),
    ):
        client.create_producer("persistent://public/default/tls-2")


def test_the_name_is_checked_only_when_asked(tls_cluster, pki):
    url = _tls_url(tls_cluster)  # 127.0.0.1: not the name in the certificate
    with Client(url, tls_trust_certs_file_path=str(pki.ca)) as client:  # Pulsar's default: off
        client.create_producer("persistent://public/default/tls-3").send(b"x")
    with (
        Client(url, tls_trust_certs_file_path=str(pki.ca), tls_validate_hostname=True) as client,
        pytest.raises(ConnectError, match=r"not for '127\.0\.0\.1'"),
    ):
        client.create_producer("persistent://public/default/tls-3")


def test_an_insecure_client_trusts_what_it_is_shown(tls_cluster):
    with Client(_tls_url(tls_cluster), tls_allow_insecure_connection=True) as client:
        client.create_producer("persistent://public/default/tls-4").send(b"x")


def test_the_wrong_protocol_fails_at_once_saying_which_to_use(tls_cluster, pki):
    tls_port = tls_cluster.endpoints["broker_tls"]
    # A long connection timeout: the error below comes from the failed
    # handshake, not from waiting.
    with (
        Client(f"magnetar://{tls_port}", connection_timeout_ms=120000) as client,
        pytest.raises(ConnectError, match="speaks TLS: connect with magnetar\\+tls://"),
    ):
        client.create_producer("persistent://public/default/tls-5")
    plain = tls_cluster.endpoints["broker"]
    with (
        Client(
            f"magnetar+tls://{plain}",
            tls_trust_certs_file_path=str(pki.ca),
            connection_timeout_ms=120000,
        ) as client,
        pytest.raises(ConnectError, match="does not speak TLS"),
    ):
        client.create_producer("persistent://public/default/tls-5")


def test_tls_options_need_a_tls_url(tls_cluster, pki):
    with pytest.raises(InvalidConfiguration, match="magnetar\\+tls://"):
        Client(tls_cluster.service_url, tls_trust_certs_file_path=str(pki.ca))


def test_the_metrics_port_serves_https(tls_cluster, pki):
    port = tls_cluster.endpoints["metrics"]["broker"]
    context = ssl.create_default_context(cafile=str(pki.ca))
    context.check_hostname = False
    with urllib.request.urlopen(f"https://127.0.0.1:{port}/metrics", context=context) as r:
        assert r.status == 200 and b"pulsar_" in r.read()
    with pytest.raises(Exception):  # noqa: B017 - plain HTTP is not answered
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()


def test_mutual_tls_refuses_a_client_without_a_certificate(tmp_path, pki):
    cluster = _standalone(tmp_path, pki, "tls_require_trusted_client_cert_on_connect = true\n")
    try:
        url, ca = _tls_url(cluster), str(pki.ca)
        with Client(url, tls_trust_certs_file_path=ca) as client, pytest.raises(ConnectError):
            client.create_producer("persistent://public/default/mtls")
        with Client(
            url,
            tls_trust_certs_file_path=ca,
            tls_certificate_file_path=str(pki.client_cert),
            tls_private_key_file_path=str(pki.client_key),
        ) as client:
            client.create_producer("persistent://public/default/mtls").send(b"x")
    finally:
        cluster.stop()
