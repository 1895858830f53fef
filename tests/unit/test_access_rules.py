"""Every RPC has an authorization rule, read from the service descriptors,
so a new RPC without a check fails here (and cannot be registered on a
server with authorization on)."""

from __future__ import annotations

import asyncio
import inspect
import re

import grpc
import pytest

from broker.access_rules import RPC_RULES
from broker.administration import Administration
from broker.authorizer import OPERATION_RULES
from protos import bookie_pb2, broker_pb2, metastore_pb2, serving
from protos.access import AccessGuard, ClusterRoles, method_name
from protos.tokens import TokenVerifier


def _methods(descriptor) -> set[str]:
    return {method_name(descriptor.full_name, m.name) for m in descriptor.methods}


def test_every_broker_rpc_has_a_rule():
    services = broker_pb2.DESCRIPTOR.services_by_name
    assert set(RPC_RULES) == _methods(services["Broker"]) | _methods(services["BrokerAdmin"])


def test_every_admin_operation_has_a_rule():
    source = inspect.getsource(Administration.__init__)
    operations = set(re.findall(r'"([a-z-]+\.[a-z-]+)"', source))
    assert operations and operations == set(OPERATION_RULES)


class _Servicer:
    def __getattr__(self, name):
        async def behaviour(request, context):
            return None

        return behaviour


@pytest.mark.parametrize(
    "descriptor",
    [
        broker_pb2.DESCRIPTOR.services_by_name["Broker"],
        bookie_pb2.DESCRIPTOR.services_by_name["Bookie"],
        metastore_pb2.DESCRIPTOR.services_by_name["Metastore"],
    ],
)
def test_a_service_with_a_method_missing_from_the_rules_cannot_be_registered(descriptor):
    methods = sorted(_methods(descriptor))
    verifier = TokenVerifier(secret_key=b"k" * 32)
    complete = AccessGuard(verifier, ClusterRoles({"admin"}, methods, "x"))
    lacking = AccessGuard(verifier, ClusterRoles({"admin"}, methods[1:], "x"))

    async def register() -> None:  # a grpc.aio server belongs to an event loop
        serving.add_servicer(grpc.aio.server(), _Servicer(), descriptor, guard=complete)
        with pytest.raises(ValueError, match=methods[0].rpartition("/")[2]):
            serving.add_servicer(grpc.aio.server(), _Servicer(), descriptor, guard=lacking)

    asyncio.run(register())
