"""``client.admin.Admin`` over a service URL that lists several brokers,
against in-process gRPC brokers and a port nothing listens on: every
listed broker is used, a dead one is passed over, an idempotent call moves
on after UNAVAILABLE, and a create that may have been applied is not sent
again elsewhere (client/admin.py's module docstring)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest

from client.admin import Admin
from client.exceptions import ConnectError
from protos import broker_pb2, broker_pb2_grpc


class _Admin(broker_pb2_grpc.BrokerAdminServicer):
    def __init__(self, unavailable: bool) -> None:
        self.unavailable = unavailable  # answer as a broker that is going away
        self.calls: list[str] = []

    def _answer(self, method: str, context: grpc.ServicerContext) -> broker_pb2.JsonResponse:
        self.calls.append(method)
        if self.unavailable:
            context.abort(grpc.StatusCode.UNAVAILABLE, "shutting down")
        return broker_pb2.JsonResponse(json=json.dumps({"from": id(self)}))

    def CreatePartitionedTopic(
        self, request: broker_pb2.CreatePartitionedTopicRequest, context: grpc.ServicerContext
    ) -> broker_pb2.JsonResponse:
        return self._answer("CreatePartitionedTopic", context)

    def Call(
        self, request: broker_pb2.AdminCallRequest, context: grpc.ServicerContext
    ) -> broker_pb2.JsonResponse:
        return self._answer(request.operation, context)


class _Broker(broker_pb2_grpc.BrokerServicer):
    def GetTopicsOfNamespace(
        self, request: broker_pb2.TopicsOfNamespaceRequest, context: grpc.ServicerContext
    ) -> broker_pb2.TopicsOfNamespace:
        return broker_pb2.TopicsOfNamespace(topics=[f"persistent://{request.namespace}/t"])


def _serve(unavailable: bool = False) -> tuple[grpc.Server, _Admin, str]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    admin = _Admin(unavailable)
    broker_pb2_grpc.add_BrokerAdminServicer_to_server(admin, server)
    broker_pb2_grpc.add_BrokerServicer_to_server(_Broker(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, admin, f"127.0.0.1:{port}"


def _dead_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def servers() -> Iterator[list[tuple[grpc.Server, _Admin, str]]]:
    started: list[tuple[grpc.Server, _Admin, str]] = []
    yield started
    for server, _, _ in started:
        server.stop(None)


@pytest.fixture
def first_listed_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("client.admin.pick_start", lambda n: 0)


def test_a_dead_first_broker_is_passed_over(servers, first_listed_first):
    servers.append(_serve())
    _, live, address = servers[0]
    dead = _dead_address()
    with Admin(f"magnetar://{dead},{address}") as admin:
        assert admin.topics.get_list("public/default") == ["persistent://public/default/t"]
        assert admin.topics.stats("t") == {"from": id(live)}
        assert live.calls == ["topics.stats"]


def test_unavailable_moves_a_read_on_but_not_a_create(servers, first_listed_first):
    servers.append(_serve(unavailable=True))
    servers.append(_serve())
    (_, going, first), (_, live, second) = servers
    with Admin(f"magnetar://{first},{second}") as admin:
        assert admin.topics.stats("t") == {"from": id(live)}
    with Admin(f"magnetar://{first},{second}") as admin:
        with pytest.raises(ConnectError, match="may or may not have been applied"):
            admin.topics.create_partitioned_topic("t", 4)
        assert "CreatePartitionedTopic" not in live.calls  # never sent twice
        assert admin.topics.create_partitioned_topic("t2", 4) == {"from": id(live)}
    assert going.calls == ["topics.stats", "CreatePartitionedTopic"]


def test_nobody_answering_names_every_broker():
    dead = [_dead_address(), _dead_address()]
    with Admin("magnetar://" + ",".join(dead)) as admin, pytest.raises(ConnectError) as raised:
        admin.brokers.list()
    assert all(address in str(raised.value) for address in dead), raised.value
