"""The broker's own producer on a system topic (the stats history): it
speaks the client protocol, like any producer, to whichever broker owns the
topic, this one or another (servers never import the SDK).

It finds the owner with the ``Lookup`` call (following redirects, a bounded
number of times), keeps one ``Produce`` stream open to it and sends each
call's records as batches (:func:`broker.stats_records.pack`), waiting for
every receipt. Any failure closes the stream; the next call looks the
topic up again, so a topic that moved is found where it went. An entry the
owner refuses outright (too big, bad input) raises :class:`RecordsRefused`:
sending the same records again cannot succeed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import grpc

from broker.stats_records import RecordsRefused, pack
from protos import broker_pb2, broker_pb2_grpc, common_pb2
from protos.credentials import TokenSupplier, aio_channel
from protos.errors import MagnetarServerError
from protos.tls import TlsClient

# Lookups that redirect to another broker before one answers.
MAX_LOOKUP_REDIRECTS = 5
# Errors that resending cannot fix.
_REFUSALS = {
    common_pb2.MESSAGE_TOO_BIG,
    common_pb2.INVALID_ARGUMENT,
    common_pb2.CORRUPTED_MESSAGE,
    common_pb2.INVALID_TOPIC_NAME,
}


class SystemTopicProducer:
    def __init__(
        self,
        local_address: str,
        topic: str,
        producer_name: str,
        max_records: int,
        timeout_s: float,
        token: TokenSupplier | None = None,
        tls: TlsClient | None = None,
    ) -> None:
        self.token = token  # the broker's own (broker_client_auth_params)
        # broker_client_tls_enabled: local_address is the TLS port, and the
        # owner is reached at its TLS URL.
        self.tls = tls
        self.local_address = local_address
        self.topic = topic
        self.producer_name = producer_name
        self.max_records = max_records
        self.timeout_s = timeout_s
        self._channel: grpc.aio.Channel | None = None
        self._call: grpc.aio.StreamStreamCall | None = None
        self._next_sequence_id = 0
        self.owner: str | None = None

    async def send(self, records: Sequence[bytes]) -> None:
        """Store encoded ``records`` (:func:`broker.stats_records.encode_record`)
        on the topic; raises if any is not stored."""
        try:
            call = self._call if self._call is not None else await self._connect()
            batches = list(
                pack(
                    records,
                    self.producer_name,
                    self._next_sequence_id,
                    self.max_records,
                    int(time.time() * 1000),
                )
            )
            if not batches:
                return
            self._next_sequence_id = batches[-1].sequence_id + batches[-1].messages
            await call.write(
                broker_pb2.ProducerRequest(
                    send=broker_pb2.SendEntries(
                        sequence_ids=[b.sequence_id for b in batches],
                        num_messages=[b.messages for b in batches],
                        entries=[b.entry for b in batches],
                    )
                )
            )
            await self._receipts(call, len(batches))
        except BaseException:
            await self.close()
            raise

    async def _receipts(self, call: grpc.aio.StreamStreamCall, expected: int) -> None:
        stored = 0
        deadline = time.monotonic() + self.timeout_s
        while stored < expected:
            resp = await _read(call, deadline - time.monotonic())
            kind = resp.WhichOneof("response")
            if kind == "receipts":
                stored += len(resp.receipts.sequence_ids)
            elif kind == "send_error":
                _raise(resp.send_error.error)
            elif kind == "error":
                _raise(resp.error)

    async def _connect(self) -> grpc.aio.StreamStreamCall:
        owner = await self._lookup()
        self._channel = aio_channel(owner, (), self.token, self.tls)
        call = broker_pb2_grpc.BrokerStub(self._channel).Produce()
        await call.write(
            broker_pb2.ProducerRequest(
                create=broker_pb2.CreateProducer(topic=self.topic, producer_name=self.producer_name)
            )
        )
        resp = await _read(call, self.timeout_s)
        if resp.HasField("error"):
            raise MagnetarServerError.from_proto(resp.error)
        if resp.created.last_sequence_id >= self._next_sequence_id:
            self._next_sequence_id = resp.created.last_sequence_id + 1
        self._call = call
        self.owner = owner
        return call

    async def _lookup(self) -> str:
        """The owner's address: ask this broker, then wherever it redirects."""
        address, authoritative = self.local_address, False
        for _ in range(MAX_LOOKUP_REDIRECTS + 1):
            async with aio_channel(address, (), self.token, self.tls) as channel:
                resp = await broker_pb2_grpc.BrokerStub(channel).Lookup(
                    broker_pb2.LookupRequest(topic=self.topic, authoritative=authoritative),
                    timeout=self.timeout_s,
                )
            if resp.error.code:
                raise MagnetarServerError.from_proto(resp.error)
            url = resp.broker_url_tls if self.tls is not None else resp.broker_url
            if not url:
                raise MagnetarServerError(
                    f"the broker serving {self.topic} has no "
                    f"{'TLS' if self.tls is not None else 'plaintext'} port",
                    common_pb2.SERVICE_NOT_READY,
                )
            if not resp.redirect:
                return url
            address, authoritative = url, resp.authoritative
        raise MagnetarServerError(
            f"looking up {self.topic}: more than {MAX_LOOKUP_REDIRECTS} redirects",
            common_pb2.SERVICE_NOT_READY,
        )

    async def close(self) -> None:
        call, channel = self._call, self._channel
        self._call = self._channel = None
        if call is not None:
            call.cancel()
        if channel is not None:
            await channel.close()


async def _read(call: grpc.aio.StreamStreamCall, timeout_s: float) -> broker_pb2.ProducerResponse:
    resp = await asyncio.wait_for(call.read(), max(0.001, timeout_s))
    if resp is grpc.aio.EOF:
        raise MagnetarServerError("the owner closed the stream", common_pb2.SERVICE_NOT_READY)
    return resp


def _raise(error: common_pb2.Error) -> None:
    exc = MagnetarServerError.from_proto(error)
    if error.code in _REFUSALS:
        raise RecordsRefused(exc.message, exc.code)
    raise exc
