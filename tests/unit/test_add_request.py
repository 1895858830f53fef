"""The add request's hand-written wire form (protos/add_request.py): what the
writer builds parses as the generated message, and what the bookie reads
agrees with the generated parser on every input, well formed or not."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest
from google.protobuf.message import DecodeError

from protos import bookie_pb2, bookie_pb2_grpc, serving
from protos.add_request import (
    AddRequestView,
    decode_add_batch,
    decode_add_request,
    encode_add_batch,
    encode_add_request,
    varint,
)
from protos.digest import pack_record

RECORDS = [pack_record(42, e, e - 1, bytes([e]) * (e * 37)) for e in range(5)]


def _fields(m: bookie_pb2.AddRequest) -> tuple:
    return m.request_id, m.ledger_id, m.master_key, m.recovery, bytes(m.entries)


def _agrees_with_the_generated_parser(data: bytes) -> None:
    try:
        want = bookie_pb2.AddRequest.FromString(data)
    except DecodeError:
        with pytest.raises(DecodeError):
            decode_add_request(data)
        return
    assert _fields(decode_add_request(data)) == _fields(want)  # type: ignore[arg-type]


def test_varint_matches_protobuf():
    assert varint(0) == b"\x00"
    for n in (1, 127, 128, 300, 16383, 16384, 1 << 21, (1 << 32) + 5):
        # request_id is field 1, a varint: tag 0x08, then the varint
        assert varint(n) == bookie_pb2.AddRequest(request_id=n).SerializeToString()[1:], n


def test_a_hand_built_request_reads_back_with_its_entries_uncopied():
    data = encode_add_request(7, 42, b"key", True, RECORDS)
    assert _fields(bookie_pb2.AddRequest.FromString(data)) == (
        7,
        42,
        b"key",
        True,
        b"".join(RECORDS),
    )
    got = decode_add_request(data)
    assert (got.request_id, got.ledger_id, got.master_key, got.recovery) == (7, 42, b"key", True)
    assert got.entries == b"".join(RECORDS)
    assert got.entries.obj is data  # a view of the received bytes, not a copy


_ENTRIES = b"".join(RECORDS)
_UNKNOWN = (
    bytes([(20 << 3) | 0]) + varint(300)  # varint field 20
    + bytes([(21 << 3) | 1]) + b"8bytes!!"  # fixed64 field 21
    + bytes([(22 << 3) | 5]) + b"4byt"  # fixed32 field 22
    + bytes([(23 << 3) | 2]) + varint(3) + b"abc"  # length-delimited field 23
)  # fmt: skip
_GROUP = bytes([(24 << 3) | 3, (25 << 3) | 0, 1, (24 << 3) | 4])  # an unknown group


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(
            bookie_pb2.AddRequest(
                request_id=1, ledger_id=-5, master_key=b"k", entries=_ENTRIES, recovery=True
            ).SerializeToString(),
            id="generated-serialiser",
        ),
        pytest.param(
            bookie_pb2.AddRequest(entries=b"first").SerializeToString()
            + bookie_pb2.AddRequest(request_id=3, entries=_ENTRIES).SerializeToString(),
            id="entries-twice-last-wins",
        ),
        pytest.param(
            bookie_pb2.AddRequest(request_id=3, entries=_ENTRIES).SerializeToString()
            + bookie_pb2.AddRequest(ledger_id=9).SerializeToString(),
            id="fields-after-entries",
        ),
        pytest.param(bookie_pb2.AddRequest(request_id=2).SerializeToString(), id="no-entries"),
        pytest.param(b"", id="empty"),
        pytest.param(_UNKNOWN + encode_add_request(4, 1, b"", False, RECORDS), id="unknown-fields"),
        pytest.param(_GROUP + encode_add_request(4, 1, b"", False, RECORDS), id="unknown-group"),
        pytest.param(bytes([(9 << 3) | 0, 5]), id="entries-as-a-varint"),
        pytest.param(bytes([(9 << 3) | 2, 0xFF]), id="length-cut-short"),
        pytest.param(bytes([(9 << 3) | 2, 10]) + b"short", id="value-cut-short"),
        pytest.param(bytes([0x80] * 11), id="varint-over-ten-bytes"),
        pytest.param(bytes([(1 << 3) | 7, 0]), id="no-such-wire-type"),
        pytest.param(bytes([(3 << 3) | 0, 1]), id="master-key-as-a-varint"),
        pytest.param(b"\x00\x01garbage\xff\xfe", id="garbage"),
    ],
)
def test_the_bookie_reads_what_the_generated_parser_reads(data: bytes):
    _agrees_with_the_generated_parser(data)


def test_a_request_cut_anywhere_is_read_as_the_generated_parser_reads_it():
    data = encode_add_request(300, 1 << 40, b"master", True, RECORDS[:2])
    for cut in range(len(data) + 1):
        _agrees_with_the_generated_parser(data[:cut])


def test_a_servicer_registered_with_its_own_request_decoding_gets_it():
    """serving.add_servicer: the named method's requests go through the given
    function, every other method through its generated message class."""
    seen: list[object] = []

    class Bookie(bookie_pb2_grpc.BookieServicer):
        async def AddEntries(
            self, requests: AsyncIterator[AddRequestView], context: grpc.aio.ServicerContext
        ) -> AsyncIterator[bookie_pb2.AddResponse]:
            async for req in requests:
                seen.append(req)
                yield bookie_pb2.AddResponse(request_id=req.request_id)

        async def Stats(
            self, request: bookie_pb2.StatsRequest, context: grpc.aio.ServicerContext
        ) -> bookie_pb2.StatsResponse:
            seen.append(request)
            return bookie_pb2.StatsResponse(ledgers=5)

    async def main() -> None:
        server = grpc.aio.server()
        service = bookie_pb2.DESCRIPTOR.services_by_name["Bookie"]
        with pytest.raises(ValueError, match="NoSuchMethod"):
            serving.add_servicer(server, Bookie(), service, {"NoSuchMethod": bytes})
        serving.add_servicer(server, Bookie(), service, {"AddEntries": decode_add_request})
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                add = channel.stream_stream(
                    "/magnetar.Bookie/AddEntries",
                    request_serializer=None,
                    response_deserializer=bookie_pb2.AddResponse.FromString,
                )()
                await add.write(encode_add_request(11, 42, b"k", False, RECORDS))
                assert (await add.read()).request_id == 11
                await add.done_writing()
                stats = channel.unary_unary(
                    "/magnetar.Bookie/Stats",
                    request_serializer=bookie_pb2.StatsRequest.SerializeToString,
                    response_deserializer=bookie_pb2.StatsResponse.FromString,
                )
                assert (await stats(bookie_pb2.StatsRequest())).ledgers == 5
        finally:
            await server.stop(None)

    asyncio.run(main())
    assert type(seen[0]).__name__ == "AddRequestView"
    assert seen[0].entries == b"".join(RECORDS)  # type: ignore[attr-defined]
    assert isinstance(seen[1], bookie_pb2.StatsRequest)


# ---------------------------------------------------------------- AddBatch


def _batch_fields(data: bytes) -> list[tuple]:
    return [_fields(r) for r in bookie_pb2.AddBatch.FromString(data).requests]


def _view_fields(views: list[AddRequestView]) -> list[tuple]:
    return [(v.request_id, v.ledger_id, v.master_key, v.recovery, bytes(v.entries)) for v in views]


def test_a_batch_of_requests_of_several_ledgers_reads_back_in_order_uncopied():
    requests = [
        encode_add_request(1, 42, b"k42", False, RECORDS[:2]),
        encode_add_request(2, 7, b"k7", True, RECORDS[2:]),
        encode_add_request(3, 42, b"k42", False, RECORDS[1:2]),
    ]
    data = encode_add_batch(requests)
    want = _batch_fields(data)
    assert [w[:2] for w in want] == [(1, 42), (2, 7), (3, 42)]
    got = decode_add_batch(data)
    assert _view_fields(got) == want
    assert all(v.entries.obj is data for v in got)  # views of the received bytes
    assert decode_add_batch(encode_add_batch([])) == []


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(
            _UNKNOWN + encode_add_batch([encode_add_request(4, 1, b"", False, RECORDS)]),
            id="unknown-fields",
        ),
        pytest.param(b"\x0a\x05abc", id="cut-short"),
        pytest.param(b"\x0a\x03\xff\xff\xff", id="garbage-request"),
        pytest.param(b"\xff" * 12, id="garbage"),
    ],
)
def test_a_batch_is_read_as_the_generated_parser_reads_it(data):
    try:
        want = _batch_fields(data)
    except DecodeError:
        with pytest.raises(DecodeError):
            decode_add_batch(data)
        return
    assert _view_fields(decode_add_batch(data)) == want


def test_a_batch_cut_anywhere_is_read_as_the_generated_parser_reads_it():
    data = encode_add_batch(
        [
            encode_add_request(5, 9, b"m", False, RECORDS[:2]),
            encode_add_request(6, 9, b"m", False, RECORDS[3:]),
        ]
    )
    for cut in range(0, len(data) + 1, 7):
        test_a_batch_is_read_as_the_generated_parser_reads_it(data[:cut])
