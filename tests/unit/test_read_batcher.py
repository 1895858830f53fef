"""ReadBatcher: which calls the reads of one loop turn become, and what each
caller gets back (metastore/read_batcher.py); the metastore's side of a
Read on a real store (metastore/batch_read.py). For the batcher, the
metastore is a scripted call function: each test says what it answers."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest

from metastore.batch_read import answer_read
from metastore.client import MetastoreUnavailableError
from metastore.read_batcher import ReadBatcher
from metastore.store import MetadataStore, validate_key
from protos import common_pb2, metastore_pb2
from protos.errors import error


def _found(key: str) -> metastore_pb2.GetResponse:
    return metastore_pb2.GetResponse(
        found=True, record=metastore_pb2.KeyRecord(key=key, value=key.encode())
    )


def _listed(prefix: str) -> metastore_pb2.ListResponse:
    return metastore_pb2.ListResponse(records=[metastore_pb2.KeyRecord(key=prefix + "x")])


def _answer(item: metastore_pb2.ReadItem) -> metastore_pb2.ReadResult:
    if item.WhichOneof("what") == "list":
        return metastore_pb2.ReadResult(list=_listed(item.list.prefix))
    return metastore_pb2.ReadResult(get=_found(item.get))


class Metastore:
    """Answers every read as found; ``per_read`` caps how many items one
    Read answers; ``read`` replaces the Read answer altogether."""

    def __init__(self, per_read: int = 1000, read: Any = None) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.per_read = per_read
        self.read = read

    async def __call__(self, name: str, request: Any) -> Any:
        self.calls.append((name, request))
        await asyncio.sleep(0)  # (a call takes at least a loop turn)
        if name == "Get":
            return _found(request.key)
        if name == "List":
            return _listed(request.prefix)
        if self.read is not None:
            return self.read(request)
        items = list(request.items)[: self.per_read]
        return metastore_pb2.ReadResponse(results=[_answer(i) for i in items])

    def shapes(self) -> list[tuple[str, int]]:
        """(method, items) of each call made."""
        return [(n, len(r.items) if n == "Read" else 1) for n, r in self.calls]


def _batcher(call: Any, max_items: int) -> ReadBatcher:
    return ReadBatcher(call, max_items, MetastoreUnavailableError)


def _unimplemented(request: Any) -> Any:
    raise grpc.aio.AioRpcError(
        grpc.StatusCode.UNIMPLEMENTED, grpc.aio.Metadata(), grpc.aio.Metadata(), "no Read"
    )


def _refused(request: Any) -> Any:
    return metastore_pb2.ReadResponse(
        error=common_pb2.Error(code=common_pb2.INVALID_ARGUMENT, message="too many")
    )


async def _read_all(batcher: ReadBatcher, keys: list[str], lists: list[str]) -> list[Any]:
    results: list[Any] = await asyncio.gather(
        *(batcher.get(k) for k in keys),
        *(batcher.listing(metastore_pb2.ListRequest(prefix=p)) for p in lists),
    )
    return [r.record.key if isinstance(r, metastore_pb2.GetResponse) else r.records[0].key
            for r in results]  # fmt: skip


@pytest.mark.parametrize(
    "keys, lists, max_items, metastore, calls",
    [
        # A lone read is the plain call it always was.
        (["/a"], [], 64, Metastore(), [("Get", 1)]),
        ([], ["/p/"], 64, Metastore(), [("List", 1)]),
        # Reads of one turn: one Read, gets and lists together.
        (["/a", "/b", "/c"], ["/p/"], 64, Metastore(), [("Read", 4)]),
        # At most max_items to a Read; the rest go at once in further calls.
        (["/a", "/b", "/c", "/d", "/e"], [], 2, Metastore(), [("Read", 2), ("Read", 2), ("Get", 1)]),
        # An answer that stops short: the rest are asked for again.
        (["/a", "/b", "/c", "/d", "/e"], [], 64, Metastore(per_read=2),
         [("Read", 5), ("Read", 3), ("Get", 1)]),
        # Batching off: each read alone.
        (["/a", "/b"], ["/p/"], 0, Metastore(), [("Get", 1), ("Get", 1), ("List", 1)]),
        # An older metastore (UNIMPLEMENTED): each read alone.
        (["/a", "/b"], ["/p/"], 64, Metastore(read=_unimplemented),
         [("Read", 3), ("Get", 1), ("Get", 1), ("List", 1)]),
        # A Read refused whole (too many items for that metastore): each alone.
        (["/a", "/b"], [], 64, Metastore(read=_refused), [("Read", 2), ("Get", 1), ("Get", 1)]),
    ],
)  # fmt: skip
def test_the_calls_a_turn_of_reads_becomes_and_each_callers_answer(
    keys, lists, max_items, metastore, calls
):
    async def main() -> None:
        batcher = _batcher(metastore, max_items)
        got = await asyncio.wait_for(_read_all(batcher, keys, lists), 5)
        assert got == keys + [p + "x" for p in lists]  # each caller its own answer, in order
        assert metastore.shapes() == calls

    asyncio.run(main())


def test_an_older_metastore_is_not_asked_for_a_read_again():
    async def main() -> None:
        metastore = Metastore(read=_unimplemented)
        batcher = _batcher(metastore, 64)
        await _read_all(batcher, ["/a", "/b"], [])
        metastore.calls.clear()
        assert await _read_all(batcher, ["/c", "/d"], []) == ["/c", "/d"]
        assert metastore.shapes() == [("Get", 1), ("Get", 1)]

    asyncio.run(main())


def test_a_failed_read_fails_every_read_it_carried():
    def fail(request: Any) -> Any:
        raise ConnectionError("the metastore went away")

    async def main() -> None:
        batcher = _batcher(Metastore(read=fail), 64)
        results = await asyncio.gather(batcher.get("/a"), batcher.get("/b"), return_exceptions=True)
        assert [type(r) for r in results] == [ConnectionError, ConnectionError]

    asyncio.run(main())


def test_a_metastore_that_refused_a_read_gets_smaller_ones_after():
    async def main() -> None:
        metastore = Metastore(read=_refused)
        batcher = _batcher(metastore, 64)
        await _read_all(batcher, ["/a", "/b", "/c", "/d", "/e"], [])  # refused: one by one
        assert batcher.max_items == 2
        metastore.calls.clear()
        metastore.read = None
        await _read_all(batcher, ["/f", "/g", "/h"], [])
        assert metastore.shapes() == [("Read", 2), ("Get", 1)]

    asyncio.run(main())


def test_a_caller_that_gave_up_leaves_the_others_their_answers():
    async def main() -> None:
        metastore = Metastore()
        batcher = _batcher(metastore, 64)
        gone = asyncio.ensure_future(batcher.get("/gone"))
        kept = asyncio.ensure_future(batcher.get("/kept"))
        await asyncio.sleep(0)  # both queued in this turn
        gone.cancel()
        assert (await kept).record.key == "/kept"
        assert gone.cancelled()
        assert metastore.calls == [("Get", metastore_pb2.GetRequest(key="/kept"))]

    asyncio.run(main())


def test_close_fails_what_is_pending_or_in_flight_and_later_reads_as_unavailable():
    async def main() -> None:
        release = asyncio.Event()

        async def slow(name: str, request: Any) -> Any:
            await release.wait()
            raise AssertionError("not reached")

        batcher = _batcher(slow, 64)
        in_flight = [asyncio.ensure_future(batcher.get(k)) for k in ("/a", "/b")]
        await asyncio.sleep(0)
        await asyncio.sleep(0)  # that Read is in flight
        pending = asyncio.ensure_future(batcher.get("/c"))
        await asyncio.sleep(0)  # queued, its turn not over
        await asyncio.wait_for(batcher.close(), 5)
        results = await asyncio.wait_for(
            asyncio.gather(*in_flight, pending, batcher.get("/d"), return_exceptions=True), 5
        )
        assert [type(r) for r in results] == [MetastoreUnavailableError] * 4

    asyncio.run(main())


def test_reads_left_on_a_loop_that_stopped_do_not_stall_the_next_loop():
    batcher = _batcher(Metastore(), 64)
    # A read queued on a loop that stopped before its turn ended (its flush never ran).
    gone = asyncio.new_event_loop()
    stranded: asyncio.Future[Any] = gone.create_future()
    batcher._pending = [(metastore_pb2.ReadItem(get="/a"), stranded)]
    batcher._armed_on = gone
    gone.close()
    assert asyncio.run(asyncio.wait_for(batcher.get("/b"), 5)).record.key == "/b"
    assert stranded.cancelled()


# ---------------------------------------------------------------- the metastore's side


def _store() -> MetadataStore:
    store = MetadataStore()
    for key, size in (("/s/a", 10), ("/s/b", 300), ("/s/c", 10), ("/s/d", 10)):
        store.put(key, b"v" * size, None, 0)
    return store


def _check(key: str) -> Any:
    problem = validate_key(key)
    return error(common_pb2.INVALID_KEY, problem) if problem else None


def _items(*what: str) -> metastore_pb2.ReadRequest:
    return metastore_pb2.ReadRequest(
        items=[
            metastore_pb2.ReadItem(list=metastore_pb2.ListRequest(prefix=w[5:]))
            if w.startswith("list:")
            else metastore_pb2.ReadItem(get=w)
            for w in what
        ]
    )


def _summary(resp: metastore_pb2.ReadResponse) -> list[str]:
    out = []
    for r in resp.results:
        if r.WhichOneof("what") == "list":
            out.append(f"list {len(r.list.records)}")
        elif r.get.error.code:
            out.append("error")
        else:
            out.append(f"{r.get.record.key} {len(r.get.record.value)}" if r.get.found else "none")
    return out


@pytest.mark.parametrize(
    "request_, max_items, max_bytes, answered",
    [
        # Each item as its own call: found, missing, an invalid key, a list.
        (_items("/s/a", "/s/x", "/s//bad", "list:/s/"), 8, 4096,
         ["/s/a 10", "none", "error", "list 4"]),
        # No item that would bring the answer over max_bytes, but the first always.
        (_items("/s/a", "/s/b", "/s/c"), 8, 100, ["/s/a 10"]),
        (_items("/s/b", "/s/a"), 8, 100, ["/s/b 300"]),
        (_items("/s/a", "/s/c", "/s/d"), 8, 100, ["/s/a 10", "/s/c 10", "/s/d 10"]),
        (_items("/s/a", "list:/s/"), 8, 200, ["/s/a 10"]),
    ],
)  # fmt: skip
def test_what_a_read_answers(request_, max_items, max_bytes, answered):
    resp = answer_read(
        _store(), request_, _check, max_items=max_items, max_bytes=max_bytes, max_list_results=100
    )
    assert resp.error.code == common_pb2.OK
    assert _summary(resp) == answered
    assert len(answered) == 1 or resp.ByteSize() <= max_bytes + 16


def test_a_read_of_too_many_items_is_refused_whole():
    resp = answer_read(
        _store(), _items("/s/a", "/s/c", "/s/d"), _check, max_items=2, max_bytes=4096,
        max_list_results=100,
    )  # fmt: skip
    assert resp.error.code == common_pb2.INVALID_ARGUMENT and not resp.results
