"""The metastore and bookie services over real gRPC."""

from __future__ import annotations

import asyncio
import json

import pytest

from bookie.ledger_client import LedgerClient
from bookie.ledger_metadata import master_key
from metastore.client import BadVersionError, MetastoreClient, MetastoreError
from protos import bookie_pb2, bookie_pb2_grpc, common_pb2
from protos.digest import pack_record
from tests.harness import wait_for


def run(coro):
    return asyncio.run(coro)


def test_metastore_operations(cluster, topic):
    async def main():
        ms = MetastoreClient(cluster.endpoints["metastore"])
        base = f"/test/{topic}"
        assert await ms.put(f"{base}/a", b"1", expected_version=-1) == 0
        with pytest.raises(BadVersionError):
            await ms.put(f"{base}/a", b"2", expected_version=-1)
        assert await ms.put(f"{base}/a", b"2", expected_version=0) == 1
        await ms.put(f"{base}/b/c", b"")
        assert await ms.children(base) == ["a", "b"]
        stat = await ms.get(f"{base}/a")
        assert stat is not None
        assert stat.value == b"2" and stat.version == 1
        with pytest.raises(BadVersionError):
            await ms.delete(f"{base}/a", expected_version=0)
        assert await ms.delete(f"{base}/a", expected_version=1)
        assert await ms.get(f"{base}/a") is None
        assert await ms.increment(f"{base}/n") == 1
        assert await ms.increment(f"{base}/n", 10) == 11
        with pytest.raises(MetastoreError, match="max_value_size_bytes"):
            await ms.put(f"{base}/big", b"x" * (1024 * 1024 + 1))
        with pytest.raises(MetastoreError, match="empty segment"):
            await ms.put("/a//b", b"")
        await ms.close()

    run(main())


def test_ephemeral_key_disappears_when_its_session_stops_being_kept_alive(cluster, topic):
    key = f"/test/{topic}/eph"

    async def create():
        ms = MetastoreClient(cluster.endpoints["metastore"])
        session = await ms.create_session(1000)
        await ms.put(key, b"v", session_id=session.id)
        stat = await ms.get(key)
        assert stat is not None and stat.session_id == session.id
        assert session._task is not None
        session._task.cancel()  # stop keeping it alive, as a crashed owner would
        await ms.close()

    async def exists():
        ms = MetastoreClient(cluster.endpoints["metastore"])
        try:
            return await ms.get(key) is not None
        finally:
            await ms.close()

    run(create())
    wait_for(lambda: not run(exists()), 10, "the ephemeral key to expire", poll_s=0.2)


def test_live_session_keeps_its_key_and_close_removes_it(cluster, topic):
    async def main():
        ms = MetastoreClient(cluster.endpoints["metastore"])
        session = await ms.create_session(1000)
        key = f"/test/{topic}/live"
        await ms.put(key, b"v", session_id=session.id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 2.5  # well past the TTL: the keep-alives hold it
        while loop.time() < deadline:
            assert await ms.get(key) is not None
            await asyncio.sleep(0.25)  # the elapsed time past the TTL is what is tested
        await session.close()
        assert await ms.get(key) is None
        await ms.close()

    run(main())


def test_bookie_is_registered(cluster):
    async def main():
        ms = MetastoreClient(cluster.endpoints["metastore"])
        names = await ms.children("/bookies/available")
        stats = [await ms.get(f"/bookies/available/{n}") for n in names]
        infos = [json.loads(s.value) for s in stats if s is not None]
        await ms.close()
        return infos

    infos = run(main())
    assert cluster.endpoints["bookie"] in [i["address"] for i in infos]


def test_ledger_write_read_and_recovery(cluster):
    async def main():
        ms = MetastoreClient(cluster.endpoints["metastore"])
        lc = LedgerClient(ms)
        writer = await lc.create_ledger(1, 1, 1)
        ids = await asyncio.gather(*(writer.add(f"e{i}".encode()) for i in range(300)))
        assert ids == list(range(300))
        md = await lc.metadata(writer.ledger_id)
        rows = await lc.read(md, 0, 299)
        assert [p for _, p in rows] == [f"e{i}".encode() for i in range(300)]
        # a new owner recovers the open ledger: fenced, closed at the last entry
        recovered = await lc.open_with_recovery(writer.ledger_id)
        assert recovered.state == "CLOSED" and recovered.last_entry_id == 299
        late = writer.add(b"after fence")
        with pytest.raises(Exception, match="fenced"):
            await late
        await lc.close()
        await ms.close()
        return writer.ledger_id

    ledger_id = run(main())
    # the bookie itself refuses a wrong master key and keeps the fence
    import grpc

    with grpc.insecure_channel(cluster.endpoints["bookie"]) as ch:
        stub = bookie_pb2_grpc.BookieStub(ch)
        payload = b"x"
        good = bookie_pb2.AddRequest(
            request_id=1,
            ledger_id=ledger_id,
            master_key=master_key(b""),
            entries=pack_record(ledger_id, 300, 299, payload),
        )
        wrong_key = bookie_pb2.AddRequest()
        wrong_key.CopyFrom(good)
        wrong_key.master_key = b"nope"
        resps = list(stub.AddEntries(iter([good, wrong_key]), timeout=5))
        assert [r.error.code for r in resps] == [common_pb2.LEDGER_FENCED, common_pb2.UNAUTHORIZED]
        lac = stub.ReadLac(bookie_pb2.ReadLacRequest(ledger_id=ledger_id), timeout=5)
        assert lac.fenced and lac.last_entry_id == 299
