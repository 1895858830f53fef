"""The hand-written ConsumerResponse of deliveries is, byte for byte, what
the generated classes write (and what the client parses)."""

from __future__ import annotations

import pytest

from protos import broker_pb2
from protos.deliveries import encode_deliveries
from protos.serving import serialized

# (ledger ids, entry ids, redelivery counts, entries, acked batch indexes)
CASES = [
    ([], [], [], [], None),
    ([1], [0], [0], [b""], None),
    ([7], [8], [2], [b"e" * 300], []),
    ([5, 5], [0, 1], [0, 1], [b"a", b"b" * 16384], [b"", b"\x05"]),
    ([2**62, 0], [2**63 - 1, 127], [2**32 - 1, 128], [b"x", memoryview(b"yz")], None),
    ([-1], [-1], [0], [b"id of a -1 ledger"], None),  # int64 negatives: ten-byte varints
    (list(range(200)), list(range(200)), [0] * 200, [bytes([i]) * i for i in range(200)], None),
]


@pytest.mark.parametrize("case", CASES)
def test_hand_written_deliveries_are_the_generated_bytes(case):
    ledger_ids, entry_ids, counts, entries, acked = case
    expected = broker_pb2.ConsumerResponse(
        deliveries=broker_pb2.Deliveries(
            ledger_ids=ledger_ids,
            entry_ids=entry_ids,
            redelivery_counts=counts,
            entries=[bytes(e) for e in entries],
            acked_batch_indexes=acked or (),
        )
    ).SerializeToString()
    got = encode_deliveries(ledger_ids, entry_ids, counts, entries, acked)
    assert got == expected
    parsed = broker_pb2.ConsumerResponse.FromString(got)
    assert parsed.WhichOneof("response") == "deliveries"
    assert list(parsed.deliveries.entries) == [bytes(e) for e in entries]


def test_the_consume_serializer_passes_bytes_and_serialises_messages():
    subscribed = broker_pb2.ConsumerResponse(subscribed=broker_pb2.Subscribed(topic="t"))
    assert serialized(subscribed) == subscribed.SerializeToString()
    raw = encode_deliveries([1], [2], [0], [b"e"], None)
    assert serialized(raw) is raw
