"""The SDK's calls to "any broker" over a service URL that lists several
(client/_connection.py ``Connections``), against in-process gRPC brokers
that answer for themselves and a port nothing listens on: a dead broker is
passed over and marked down, a broker that dies after answering is not
taken as connected, and a call that finds nobody fails with ConnectError
naming every broker tried after the connection timeout."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable

import grpc
import pytest

from client._connection import Connection, Connections
from client._multi import partitions_of
from client.exceptions import ConnectError
from protos import broker_pb2, broker_pb2_grpc


class _Broker(broker_pb2_grpc.BrokerServicer):
    """Says it serves every topic itself; every topic has 3 partitions."""

    def __init__(self) -> None:
        self.address = ""
        self.calls = 0

    async def Lookup(
        self, request: broker_pb2.LookupRequest, context: grpc.aio.ServicerContext
    ) -> broker_pb2.LookupResponse:
        self.calls += 1
        return broker_pb2.LookupResponse(broker_url=self.address)

    async def GetPartitionedTopicMetadata(
        self,
        request: broker_pb2.PartitionedTopicMetadataRequest,
        context: grpc.aio.ServicerContext,
    ) -> broker_pb2.PartitionedTopicMetadata:
        self.calls += 1
        return broker_pb2.PartitionedTopicMetadata(partitions=3)


async def _start_broker() -> tuple[grpc.aio.Server, _Broker]:
    server = grpc.aio.server()
    broker = _Broker()
    broker_pb2_grpc.add_BrokerServicer_to_server(broker, server)
    broker.address = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
    await server.start()
    return server, broker


def _dead_address() -> str:
    """A loopback port nothing listens on: connecting is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def _run(main: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(main(), 60))


@pytest.fixture
def first_listed_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("client._connection.pick_start", lambda n: 0)


def test_a_dead_first_broker_is_passed_over_then_skipped(first_listed_first):
    async def main() -> None:
        server, live = await _start_broker()
        dead = _dead_address()
        # A long connection timeout: a refused connection must not wait for it.
        conns = Connections([dead, live.address], connection_timeout_ms=600_000, timeout_s=30)
        try:
            assert await partitions_of(conns, "persistent://public/default/t", 30) == 3
            assert conns.brokers.is_down(dead, conns._now_ms())
            asked: list[str] = []

            async def record(conn: Connection) -> None:
                asked.append(conn.address)

            await conns.call_service(record, "a call")
            assert asked == [live.address]  # the dead broker is not asked again
        finally:
            await conns.close()
            await server.stop(None)

    _run(main)


def test_a_broker_that_dies_after_answering_is_left_for_the_next(first_listed_first):
    async def main() -> None:
        server_a, a = await _start_broker()
        server_b, b = await _start_broker()
        conns = Connections([a.address, b.address], connection_timeout_ms=600_000, timeout_s=30)
        try:
            assert (await conns.lookup("t")).address == a.address
            await server_a.stop(None)  # what kill -9 looks like to the client
            channel = conns.get(a.address).channel
            if channel.get_state() == grpc.ChannelConnectivity.READY:  # not noticed yet
                await asyncio.wait_for(
                    channel.wait_for_state_change(grpc.ChannelConnectivity.READY), 5
                )
            with pytest.raises(ConnectError, match=a.address):
                await conns.get(a.address).ensure_ready(5)
            assert (await conns.lookup("t")).address == b.address
            assert conns.brokers.current == b.address
        finally:
            await conns.close()
            await server_b.stop(None)

    _run(main)


def test_a_call_waits_for_a_broker_that_comes_up_within_the_connection_timeout():
    async def main() -> None:
        address = _dead_address()
        conns = Connections([address], connection_timeout_ms=600_000, timeout_s=30)
        server = grpc.aio.server()
        broker = _Broker()
        broker_pb2_grpc.add_BrokerServicer_to_server(broker, server)
        try:
            call = asyncio.ensure_future(partitions_of(conns, "t", 30))
            while not conns.brokers.is_down(address, conns._now_ms()):
                await asyncio.sleep(0.01)  # the first round found nobody
            assert not call.done()
            server.add_insecure_port(address)
            await server.start()
            assert await call == 3
        finally:
            await conns.close()
            await server.stop(None)

    _run(main)


def test_nobody_answering_is_a_connect_error_naming_every_broker(first_listed_first):
    async def main() -> None:
        dead = [_dead_address(), _dead_address()]
        # Rounds until the connection timeout (rounds 1 s, then 2 s apart).
        conns = Connections(dead, connection_timeout_ms=2500, timeout_s=30)
        try:
            with pytest.raises(ConnectError) as raised:
                await conns.lookup("t")
            assert all(address in str(raised.value) for address in dead), raised.value
            assert all(conns.brokers.is_down(address, conns._now_ms()) for address in dead)
        finally:
            await conns.close()

    _run(main)
