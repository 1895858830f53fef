"""Edges of the security code found in review (issue 23): a grant revoked
while the authorizer reads it is not remembered stale; the cluster's own
servers admit superusers only whenever tokens are on; an unreachable
broker is not a TLS refusal; a token file being rewritten keeps the last
token."""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass

import pytest

from broker.authorizer import BrokerAuthorizer, topic_target
from broker.permissions import AuthAction, AuthPolicies, Need
from metastore.settings import MetastoreSettings
from protos import metastore_pb2
from protos.credentials import FileToken
from protos.security_settings import cluster_guard
from protos.tls import TlsClient, TlsRefused


@dataclass
class _Record:
    auth: AuthPolicies


class _SlowNamespaces:
    """Stands for broker.namespaces.Namespaces' two reads: the namespace read
    waits until the test lets it go, and answers what the record holds then."""

    def __init__(self) -> None:
        self.auth = AuthPolicies().granted("app", frozenset({AuthAction.PRODUCE}))
        self.reading = asyncio.Event()
        self.go_on = asyncio.Event()
        self.tenants = self

    async def read(self, name: str):  # tenants.read and namespaces.read alike
        if "/" not in name:
            return None  # no tenant record: no admins
        before = self.auth
        self.reading.set()
        await self.go_on.wait()
        return (_Record(before), 0)


def test_a_grant_revoked_during_a_read_is_not_remembered():
    async def scenario() -> tuple[bool, bool]:
        namespaces = _SlowNamespaces()
        authorizer = BrokerAuthorizer(namespaces, frozenset(), 100)  # type: ignore[arg-type]
        target = topic_target("persistent://t/ns/topic")
        judging = asyncio.create_task(authorizer.allowed("app", Need.PRODUCE, target))
        await namespaces.reading.wait()
        namespaces.auth = AuthPolicies()  # revoked, and the watch tells the authorizer
        authorizer.forget(namespace="t/ns")
        namespaces.go_on.set()
        during, _ = await judging  # read before the revoke: it may still say yes
        after, _ = await authorizer.allowed("app", Need.PRODUCE, target)
        return during, after

    during, after = asyncio.run(scenario())
    assert during is True and after is False


def test_the_cluster_servers_admit_superusers_only_even_without_authorization():
    settings = MetastoreSettings(
        authentication_enabled=True,
        authorization_enabled=False,
        superuser_roles="admin",
        token_secret_key="data:;base64,c2VjcmV0LWtleS1vZi0zMi1ieXRlcy1sb25nLi4uLg==",
    )
    guard = cluster_guard(settings, metastore_pb2.DESCRIPTOR.services_by_name["Metastore"], "x")
    assert guard is not None and guard.gatekeeper is not None


def test_an_unreachable_broker_is_not_a_tls_refusal():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    with pytest.raises(ConnectionError) as caught:
        TlsClient(validate_hostname=False).probe(f"127.0.0.1:{port}", 1.0)
    assert not isinstance(caught.value, TlsRefused)


def test_a_token_file_being_rewritten_keeps_the_last_token(tmp_path):
    path = tmp_path / "token"
    path.write_text("first")
    token = FileToken(str(path))
    path.write_text("")  # a refresher truncated it and has not written yet
    assert token() == "first"
    path.unlink()
    assert token() == "first"
    path.write_text("second")
    assert token() == "second"
