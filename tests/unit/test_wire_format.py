"""The stored entry format is Pulsar's: MessageMetadata, SingleMessageMetadata
and MessageIdData take PulsarApi.proto's field numbers and types.

The expected bytes are worked out by hand from the protobuf encoding rules:
a field's tag is ``field_number << 3 | wire_type`` as a varint (wire type 0
for varints, 2 for length-delimited values), so field 16 and above take a
two-byte tag. Writing them out, rather than asking the generated code,
checks the numbers themselves.
"""

from __future__ import annotations

from typing import Any

from client._produce_mux import encode_frame, encode_send_frame
from client.message import PendingMessage, build_entry
from protos import broker_pb2, common_pb2
from protos.entry import split_entry
from protos.message_id import MessageId, id_data, id_fields

# (what is set, the bytes a Pulsar client writes for it), in field order.
METADATA_FIELDS: list[tuple[dict, bytes]] = [
    ({"producer_name": "p"}, b"\x0a\x01p"),  # 1, LEN
    ({"sequence_id": 0}, b"\x10\x00"),  # 2: required, so present even when 0
    ({"publish_time": 128}, b"\x18\x80\x01"),  # 3
    ({"properties": [common_pb2.KeyValue(key="k", value="v")]}, b"\x22\x06\x0a\x01k\x12\x01v"),
    ({"replicated_from": "c"}, b"\x2a\x01c"),  # 5
    ({"partition_key": "pk"}, b"\x32\x02pk"),  # 6
    ({"replicate_to": ["r"]}, b"\x3a\x01r"),  # 7
    ({"compression": common_pb2.LZ4}, b"\x40\x01"),  # 8
    ({"uncompressed_size": 5}, b"\x48\x05"),  # 9
    ({"num_messages_in_batch": 2}, b"\x58\x02"),  # 11 (10 is unused)
    ({"event_time": 7}, b"\x60\x07"),  # 12
    (
        {"encryption_keys": [common_pb2.EncryptionKeys(key="e", value=b"v")]},
        b"\x6a\x06\x0a\x01e\x12\x01v",
    ),  # 13
    ({"encryption_algo": "a"}, b"\x72\x01a"),  # 14
    ({"encryption_param": b"x"}, b"\x7a\x01x"),  # 15
    ({"schema_version": b"s"}, b"\x82\x01\x01s"),  # 16: the first two-byte tag
    ({"partition_key_b64_encoded": True}, b"\x88\x01\x01"),  # 17
    ({"ordering_key": b"ok"}, b"\x92\x01\x02ok"),  # 18
    ({"deliver_at_time": 9}, b"\x98\x01\x09"),  # 19
    ({"marker_type": 1}, b"\xa0\x01\x01"),  # 20 (21 is unused)
    ({"txnid_least_bits": 3}, b"\xb0\x01\x03"),  # 22
    ({"txnid_most_bits": 4}, b"\xb8\x01\x04"),  # 23
    ({"highest_sequence_id": 5}, b"\xc0\x01\x05"),  # 24
    ({"null_value": True}, b"\xc8\x01\x01"),  # 25
    ({"uuid": "u"}, b"\xd2\x01\x01u"),  # 26
    ({"num_chunks_from_msg": 3}, b"\xd8\x01\x03"),  # 27
    ({"total_chunk_msg_size": 6}, b"\xe0\x01\x06"),  # 28
    ({"chunk_id": 2}, b"\xe8\x01\x02"),  # 29
    ({"null_partition_key": True}, b"\xf0\x01\x01"),  # 30
]

SINGLE_MESSAGE_FIELDS: list[tuple[dict, bytes]] = [
    ({"properties": [common_pb2.KeyValue(key="k", value="v")]}, b"\x0a\x06\x0a\x01k\x12\x01v"),
    ({"partition_key": "pk"}, b"\x12\x02pk"),  # 2
    ({"payload_size": 0}, b"\x18\x00"),  # 3: required, present even when 0
    ({"compacted_out": True}, b"\x20\x01"),  # 4
    ({"event_time": 7}, b"\x28\x07"),  # 5
    ({"partition_key_b64_encoded": True}, b"\x30\x01"),  # 6
    ({"ordering_key": b"ok"}, b"\x3a\x02ok"),  # 7
    ({"sequence_id": 0}, b"\x40\x00"),  # 8
    ({"null_value": True}, b"\x48\x01"),  # 9
    ({"null_partition_key": True}, b"\x50\x01"),  # 10
]


def _all_set(cls: type, fields: list[tuple[dict, bytes]]) -> Any:
    kwargs: dict = {}
    for setting, _ in fields:
        kwargs.update(setting)
    return cls(**kwargs)


def test_message_metadata_with_every_field_set_is_pulsars_bytes():
    meta = _all_set(common_pb2.MessageMetadata, METADATA_FIELDS)
    assert meta.SerializeToString() == b"".join(expected for _, expected in METADATA_FIELDS)


def test_each_metadata_field_alone_has_pulsars_tag():
    for setting, expected in METADATA_FIELDS:
        assert common_pb2.MessageMetadata(**setting).SerializeToString() == expected, setting


def test_single_message_metadata_with_every_field_set_is_pulsars_bytes():
    smm = _all_set(common_pb2.SingleMessageMetadata, SINGLE_MESSAGE_FIELDS)
    assert smm.SerializeToString() == b"".join(expected for _, expected in SINGLE_MESSAGE_FIELDS)


def test_required_fields_are_written_even_when_zero_and_nothing_else_is():
    meta = common_pb2.MessageMetadata(producer_name="", sequence_id=0, publish_time=0)
    assert meta.SerializeToString() == b"\x0a\x00\x10\x00\x18\x00"
    assert common_pb2.MessageMetadata().SerializeToString() == b""


# uint64 -1 (Pulsar's earliest id) is the ten-byte varint of 2**64 - 1.
MINUS_ONE = b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"


def test_message_ids_are_pulsars_message_id_data():
    assert id_data(1, 2, 3, 4).SerializeToString() == b"\x08\x01\x10\x02\x18\x03\x20\x04"
    # Partition and batch index are left out when -1 (absent means -1).
    assert id_data(1, 2).SerializeToString() == b"\x08\x01\x10\x02"
    assert MessageId.earliest.serialize() == b"\x08" + MINUS_ONE + b"\x10" + MINUS_ONE
    assert id_data(5, 0, 0, 0).SerializeToString() == b"\x08\x05\x10\x00\x18\x00\x20\x00"


def test_message_id_data_reads_back_signed_with_absent_fields_as_minus_one():
    assert id_fields(common_pb2.MessageIdData.FromString(b"\x08\x01\x10\x02")) == (1, 2, -1, -1)
    earliest = common_pb2.MessageIdData.FromString(b"\x08" + MINUS_ONE + b"\x10" + MINUS_ONE)
    assert id_fields(earliest) == (-1, -1, -1, -1)
    for mid in (
        MessageId(ledger_id=7, entry_id=8, partition=0, batch_index=0),
        MessageId(ledger_id=7, entry_id=8),
        MessageId.earliest,
        MessageId.latest,
    ):
        assert MessageId.deserialize(mid.serialize()) == mid


def test_the_sdk_writes_entries_a_pulsar_broker_would_store():
    one = build_entry([PendingMessage(b"hi", 0, lambda *_: None)], "prod", 1000)
    meta_size = int.from_bytes(one[:4], "big")
    # producer name, sequence id 0, publish time, highest sequence id and the
    # uncompressed size, in Pulsar's numbering; then the payload.
    assert one[4 : 4 + meta_size] == (
        b"\x0a\x04prod" + b"\x10\x00" + b"\x18\xe8\x07" + b"\x48\x02" + b"\xc0\x01\x00"
    )
    assert one[4 + meta_size :] == b"hi"
    batch = build_entry(
        [PendingMessage(b"a", 3, lambda *_: None), PendingMessage(b"bc", 4, lambda *_: None)],
        "prod",
        1000,
    )
    meta, payload = split_entry(batch)
    assert meta.num_messages_in_batch == 2
    # Each record: u32 size, SingleMessageMetadata (payload_size, sequence_id), payload.
    assert (
        bytes(payload)
        == (
            b"\x00\x00\x00\x04"
            + b"\x18\x01\x40\x03"
            + b"a"
            + b"\x00\x00\x00\x04"
            + b"\x18\x02\x40\x04"
        )
        + b"bc"
    )


# ---------------------------------------------------------------- ProduceMany frames


def test_hand_built_produce_many_frames_parse_as_the_generated_message():
    send = broker_pb2.ProducerRequest(
        send=broker_pb2.SendEntries(sequence_ids=[5], num_messages=[1], entries=[b"e" * 300])
    )
    create = broker_pb2.ProducerRequest(create=broker_pb2.CreateProducer(topic="t"))
    data = b"".join(
        [
            encode_frame(1, create.SerializeToString()),
            encode_frame(300, send.SerializeToString()),
            encode_frame(2**40, None, end=True),
            encode_frame(7, send.SerializeToString(), end=True),
        ]
    )
    frames = broker_pb2.ProducerRequestFrames.FromString(data).frames
    assert [(f.id, f.HasField("request"), f.end) for f in frames] == [
        (1, True, False),
        (300, True, False),
        (2**40, False, True),
        (7, True, True),
    ]
    assert frames[0].request == create
    assert frames[1].request == send


# (sequence ids, counts, entries) of one send frame: none, one, several,
# varints of one to nine bytes, entries of 0 bytes to past a 2-byte length.
SEND_FRAMES: list[tuple[list[int], list[int], list[bytes]]] = [
    ([], [], []),
    ([0], [1], [b""]),
    ([5], [1], [b"e" * 300]),
    ([127, 128, 2**63], [1, 1000, 2**31 - 1], [b"a", b"b" * 127, b"c" * 16384]),
    (list(range(1000, 1100)), [1] * 100, [bytes([i]) * i for i in range(100)]),
]


def test_hand_built_send_frames_are_the_generated_message_bytes():
    for stream_id in (1, 300, 2**40):
        for seqs, nums, entries in SEND_FRAMES:
            request = broker_pb2.ProducerRequest(
                send=broker_pb2.SendEntries(sequence_ids=seqs, num_messages=nums, entries=entries)
            )
            expected = encode_frame(stream_id, request.SerializeToString())
            assert encode_send_frame(stream_id, seqs, nums, entries) == expected, (stream_id, seqs)


def test_hand_built_answer_frames_are_the_generated_message_bytes():
    """The broker frames its answers with the same encoder (protos/frames.py)."""
    receipts = broker_pb2.ProducerResponse(
        receipts=broker_pb2.SendReceipts(sequence_ids=[5, 6], ledger_ids=[3, 3], entry_ids=[0, 1])
    )
    refusal = broker_pb2.ProducerResponse(
        error=common_pb2.Error(code=common_pb2.TOO_MANY_REQUESTS, message="no")
    )
    frames = [
        broker_pb2.ProducerResponseFrame(id=1, response=receipts),
        broker_pb2.ProducerResponseFrame(id=2**40, response=refusal, end=True),
        broker_pb2.ProducerResponseFrame(id=300, end=True),
    ]
    expected = broker_pb2.ProducerResponseFrames(frames=frames).SerializeToString()
    got = b"".join(
        [
            encode_frame(1, receipts.SerializeToString()),
            encode_frame(2**40, refusal.SerializeToString(), end=True),
            encode_frame(300, None, end=True),
        ]
    )
    assert got == expected
