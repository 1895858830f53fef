"""The metastore's ``Read`` call: several gets and lists in one request.

Theory of operation. A broker loading a topic reads a few independent
records at once (the partitioned-topic record, the topic's overrides, its
ledger list, its schemas); :class:`metastore.read_batcher.ReadBatcher`
sends the reads its caller makes in one event-loop turn as one ``Read``, so
the gRPC cost (most of a small read's cost, on both sides) is paid once.

Each item is answered exactly as its own ``Get`` or ``List`` would be, in
order, with the revision it was read at (an invalid key is that item's
error, not the call's). An answer takes no item that would bring it over
``max_read_response_bytes`` (counted as encoded), except the first, which
is always answered (alone, it is what its own call would have answered):
the caller asks again for the items left. So no answer of several items is
larger than that bound, far below gRPC's 16 MiB.
A request of more than ``max_reads_per_call`` items is refused whole.
"""

from __future__ import annotations

from collections.abc import Callable

from metastore.store import MetadataStore, Record
from protos import common_pb2, metastore_pb2
from protos.errors import error

KeyCheck = Callable[[str], "common_pb2.Error | None"]


def record_of(key: str, r: Record) -> metastore_pb2.KeyRecord:
    return metastore_pb2.KeyRecord(
        key=key,
        value=r.value,
        version=r.version,
        create_revision=r.create_revision,
        mod_revision=r.mod_revision,
        session_id=r.session_id,
    )


def answer_get(store: MetadataStore, key: str, check_key: KeyCheck) -> metastore_pb2.GetResponse:
    bad = check_key(key)
    if bad:
        return metastore_pb2.GetResponse(error=bad)
    record, revision = store.get(key)
    if record is None:
        return metastore_pb2.GetResponse(found=False, revision=revision)
    return metastore_pb2.GetResponse(found=True, revision=revision, record=record_of(key, record))


def answer_list(
    store: MetadataStore, request: metastore_pb2.ListRequest, max_results: int
) -> metastore_pb2.ListResponse:
    if not request.prefix.startswith("/"):
        return metastore_pb2.ListResponse(
            error=error(common_pb2.INVALID_KEY, f"prefix {request.prefix!r} must start with /")
        )
    limit = min(request.limit, max_results) if request.limit > 0 else max_results
    rows, revision, more = store.list_prefix(request.prefix, limit)
    return metastore_pb2.ListResponse(
        records=[record_of(k, r) for k, r in rows], revision=revision, more=more
    )


def answer_read(
    store: MetadataStore,
    request: metastore_pb2.ReadRequest,
    check_key: KeyCheck,
    *,
    max_items: int,
    max_bytes: int,
    max_list_results: int,
) -> metastore_pb2.ReadResponse:
    if len(request.items) > max_items:
        return metastore_pb2.ReadResponse(
            error=error(
                common_pb2.INVALID_ARGUMENT,
                f"{len(request.items)} reads in one call; max_reads_per_call is {max_items}",
            )
        )
    results: list[metastore_pb2.ReadResult] = []
    size = 0
    for item in request.items:
        if item.WhichOneof("what") == "list":
            result = metastore_pb2.ReadResult(list=answer_list(store, item.list, max_list_results))
        else:
            result = metastore_pb2.ReadResult(get=answer_get(store, item.get, check_key))
        size += result.ByteSize()
        if results and size > max_bytes:
            break  # the caller asks again for this one and the rest
        results.append(result)
    return metastore_pb2.ReadResponse(results=results)
