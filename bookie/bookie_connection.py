"""One gRPC channel to one bookie, shared by every ledger a client uses there.

Adds of every ledger go on one ``AddBatches`` stream as requests serialised
by hand (protos/add_request.py: the records are joined straight into the
message), answered in order. The requests queued while the writer waited go
as one stream message (bounded by ``max_add_request_bytes``), so a broker
whose many topics each flush a small request in one loop turn pays for one
message, not one per topic; reads, fences and deletes are plain calls.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc

from bookie.ledger_metadata import BKError
from protos import bookie_pb2, bookie_pb2_grpc, common_pb2, serving
from protos.add_request import encode_add_batch, encode_add_request
from protos.channel import reconnect_options
from protos.credentials import TokenSupplier, aio_channel
from protos.tls import TlsClient

log = logging.getLogger(__name__)


def check_error(err: common_pb2.Error, what: str) -> None:
    if err.code != common_pb2.OK:
        raise BKError(f"{what}: {err.message}", err.code)


class BookieConnection:
    """One channel to one bookie; adds of every ledger share its stream."""

    def __init__(
        self,
        address: str,
        timeout_s: float,
        token: TokenSupplier | None = None,
        tls: TlsClient | None = None,
        max_message_bytes: int = 4 << 20,
    ) -> None:
        """``max_message_bytes``: queued requests are joined into one stream
        message up to this size (a bigger request goes alone)."""
        self.address = address
        self.timeout_s = timeout_s
        options = [*serving.grpc_options(), *reconnect_options()]
        self._channel = aio_channel(address, options, token, tls)
        self.stub = bookie_pb2_grpc.BookieStub(self._channel)
        # The add stream sends requests already serialised (send_records
        # builds them with one join), so no serializer.
        self._add_batches = self._channel.stream_stream(
            "/magnetar.Bookie/AddBatches",
            request_serializer=None,
            response_deserializer=bookie_pb2.AddResponses.FromString,
        )
        self.max_message_bytes = max_message_bytes
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        self._outq: asyncio.Queue | None = None
        self._tasks: list[asyncio.Task] = []

    def send_add(self, req: bookie_pb2.AddRequest) -> asyncio.Future:
        """Send one add request (its request id is set here); the future
        gives the bookie's AddResponse."""
        req.request_id = next(self._ids)
        return self._send_serialized(req.request_id, req.SerializeToString())

    def send_records(
        self, ledger_id: int, key: bytes, records: list[bytes], recovery: bool = False
    ) -> asyncio.Future:
        """An add request of packed ``records`` (protos/digest.py), serialised
        by hand (protos/add_request.py)."""
        request_id = next(self._ids)
        return self._send_serialized(
            request_id, encode_add_request(request_id, ledger_id, key, recovery, records)
        )

    def _send_serialized(self, request_id: int, data: bytes) -> asyncio.Future:
        if self._outq is None:
            self._open_stream()
        assert self._outq is not None
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self._pending[request_id] = fut
        self._outq.put_nowait(data)
        return fut

    def _open_stream(self) -> None:
        outq: asyncio.Queue = asyncio.Queue()
        self._outq = outq
        call = self._add_batches()
        self._tasks = [
            asyncio.create_task(self._write_batches(call, outq)),
            asyncio.create_task(self._read_answers(call)),
        ]

    async def _write_batches(self, call: Any, outq: asyncio.Queue) -> None:
        """Every request queued meanwhile in one message (of at most
        ``max_message_bytes``, unless one request alone is bigger)."""
        limit = self.max_message_bytes
        held: bytes | None = None
        while True:
            req = held if held is not None else await outq.get()
            batch, size, held = [req], len(req), None
            while not outq.empty():
                nxt = outq.get_nowait()
                if size + len(nxt) > limit:
                    held = nxt
                    break
                batch.append(nxt)
                size += len(nxt)
            await call.write(encode_add_batch(batch))

    async def _read_answers(self, call: Any) -> None:
        try:
            while (msg := await call.read()) is not grpc.aio.EOF:
                for resp in msg.responses:
                    fut = self._pending.pop(resp.request_id, None)
                    if fut is not None and not fut.done():
                        fut.set_result(resp)
            raise BKError(f"bookie {self.address} closed the add stream")
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._broken(exc)

    def _broken(self, exc: BaseException) -> None:
        log.warning("add stream to bookie %s failed: %s", self.address, exc)
        for task in self._tasks:
            if task is not asyncio.current_task():
                task.cancel()
        self._outq = None
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(
                    BKError(
                        f"bookie {self.address} unreachable: {exc}", common_pb2.SERVICE_NOT_READY
                    )
                )

    async def read_lac(self, ledger_id: int, fence: bool, key: bytes) -> bookie_pb2.ReadLacResponse:
        resp = await self.stub.ReadLac(
            bookie_pb2.ReadLacRequest(ledger_id=ledger_id, fence=fence, master_key=key),
            timeout=self.timeout_s,
        )
        check_error(resp.error, f"read-lac of ledger {ledger_id} on {self.address}")
        return resp

    async def _answers(self, call: Any, what: str) -> AsyncIterator[Any]:
        """The answers of a streamed read; :class:`BKError` at one that failed."""
        while (resp := await call.read()) is not grpc.aio.EOF:
            check_error(resp.error, f"{what} on {self.address}")
            yield resp

    async def read_range(
        self, ledger_id: int, first: int, last: int
    ) -> list[tuple[int, int, int, bytes]]:
        out: list[tuple[int, int, int, bytes]] = []
        call = self.stub.ReadRange(
            bookie_pb2.ReadRangeRequest(
                ledger_id=ledger_id, first_entry_id=first, last_entry_id=last
            ),
            timeout=self.timeout_s,
        )
        async for resp in self._answers(call, f"read of ledger {ledger_id}"):
            out.extend(zip(resp.entry_ids, resp.lacs, resp.digests, resp.payloads, strict=True))
        return out

    async def read_entries(
        self, ledger_id: int, entry_ids: list[int]
    ) -> tuple[list[tuple[int, int, int, bytes]], list[int]]:
        """(entry id, lac, digest, payload) of the entries this bookie holds,
        and the ids it explicitly does not hold."""
        rows: list[tuple[int, int, int, bytes]] = []
        missing: list[int] = []
        call = self.stub.ReadEntries(
            bookie_pb2.ReadEntriesRequest(ledger_id=ledger_id, entry_ids=entry_ids),
            timeout=self.timeout_s,
        )
        async for resp in self._answers(call, f"read of ledger {ledger_id}"):
            rows.extend(zip(resp.entry_ids, resp.lacs, resp.digests, resp.payloads, strict=True))
            missing.extend(resp.missing_entry_ids)
        return rows, missing

    async def entry_sizes(self, ledger_id: int, entry_ids: list[int]) -> dict[int, int]:
        """Payload sizes of the listed entries this bookie holds."""
        out: dict[int, int] = {}
        call = self.stub.ReadEntries(
            bookie_pb2.ReadEntriesRequest(
                ledger_id=ledger_id, entry_ids=entry_ids, sizes_only=True
            ),
            timeout=self.timeout_s,
        )
        async for resp in self._answers(call, f"sizes of ledger {ledger_id}"):
            out.update(zip(resp.entry_ids, resp.sizes, strict=True))
        return out

    async def delete_ledger(self, ledger_id: int, key: bytes) -> bool:
        resp = await self.stub.DeleteLedger(
            bookie_pb2.DeleteLedgerRequest(ledger_id=ledger_id, master_key=key),
            timeout=self.timeout_s,
        )
        check_error(resp.error, f"delete of ledger {ledger_id} on {self.address}")
        return bool(resp.existed)

    async def stats(self) -> bookie_pb2.StatsResponse:
        return await self.stub.Stats(bookie_pb2.StatsRequest(), timeout=self.timeout_s)

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await self._channel.close()
