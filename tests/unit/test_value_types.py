import zlib

import pytest

from protos.errors import InvalidTopicNameError
from protos.hashing import java_string_hash, key_shared_slot, murmur3_32, topic_crc32
from protos.message_id import MessageId
from protos.topic_name import TopicName


@pytest.mark.parametrize(
    ("name", "full"),
    [
        ("my-topic", "persistent://public/default/my-topic"),
        ("tenant-a/ns1/t", "persistent://tenant-a/ns1/t"),
        ("persistent://public/default/x.y", "persistent://public/default/x.y"),
        ("non-persistent://public/default/np", "non-persistent://public/default/np"),
    ],
)
def test_topic_name_defaults_and_domains(name, full):
    t = TopicName.parse(name)
    assert t.full_name == full
    assert str(t) == full
    assert t.is_persistent == full.startswith("persistent://")


@pytest.mark.parametrize(
    ("name", "bad_part"),
    [
        ("", "empty"),
        ("a/b", "expected"),
        ("http://public/default/t", "domain 'http'"),
        ("persistent://public/default", "expected"),
        ("persistent://pub lic/default/t", "tenant 'pub lic'"),
        ("persistent://public/de$fault/t", "namespace 'de$fault'"),
        ("persistent://public/default/", "topic part is empty"),
        ("persistent://public/default/a?b", "'?'"),
        ("t\x00", "'\\x00'"),
        ("x" * 2000, "at most"),
    ],
)
def test_invalid_topic_names_name_the_bad_part(name, bad_part):
    with pytest.raises(InvalidTopicNameError) as err:
        TopicName.parse(name)
    assert bad_part in str(err.value)


def test_partitions():
    t = TopicName.parse("orders")
    p = t.partition(3)
    assert p.full_name == "persistent://public/default/orders-partition-3"
    assert p.partition_index == 3 and p.is_partition
    assert p.partitioned_topic_name == t
    assert t.partition_index == -1
    assert TopicName.parse("a-partition-x").partition_index == -1
    assert TopicName.parse("a-partition-01").partition_index == -1
    with pytest.raises(InvalidTopicNameError):
        p.partition(1)
    with pytest.raises(InvalidTopicNameError):
        t.partition(-1)


def test_message_id_order_and_serialization():
    ids = [
        MessageId(ledger_id=2, entry_id=0),
        MessageId(ledger_id=1, entry_id=5, batch_index=1),
        MessageId(ledger_id=1, entry_id=5),
        MessageId(ledger_id=1, entry_id=5, batch_index=0),
        MessageId(ledger_id=1, entry_id=4),
    ]
    assert sorted(ids) == [
        MessageId(ledger_id=1, entry_id=4),
        MessageId(ledger_id=1, entry_id=5),
        MessageId(ledger_id=1, entry_id=5, batch_index=0),
        MessageId(ledger_id=1, entry_id=5, batch_index=1),
        MessageId(ledger_id=2, entry_id=0),
    ]
    for mid in [*ids, MessageId.earliest, MessageId.latest]:
        back = MessageId.deserialize(mid.serialize())
        assert back == mid and hash(back) == hash(mid)
    assert MessageId.earliest < MessageId(ledger_id=0, entry_id=0) < MessageId.latest
    m = MessageId(ledger_id=7, entry_id=8, partition=2, batch_index=3)
    assert (m.ledger_id(), m.entry_id(), m.partition(), m.batch_index()) == (7, 8, 2, 3)
    assert str(m) == "(7,8,2,3)"
    assert len({MessageId(ledger_id=1, entry_id=1), MessageId(ledger_id=1, entry_id=1)}) == 1


def test_message_id_deserialize_garbage_is_a_typed_error():
    with pytest.raises(ValueError, match="not a serialized MessageId"):
        MessageId.deserialize(b"\xff\xff\xff")
    with pytest.raises(ValueError, match="takes bytes"):
        MessageId.deserialize("text")  # type: ignore[arg-type]


def test_murmur3_seed_vector():
    assert murmur3_32("Order-3459134") == 3112179635
    assert 3112179635 % 65536 == 6067
    assert key_shared_slot("Order-3459134") == 6067
    assert murmur3_32(b"Order-3459134") == murmur3_32("Order-3459134")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("hello", 99162322),
        ("Hello, World", -505841268),
        ("polygenelubricants", -2147483648),
        ("é€𝄞", 16751501),
    ],
)
def test_java_string_hash(text, expected):
    # expected values printed by Java 17's String.hashCode on this machine
    assert java_string_hash(text) == expected


def test_topic_crc32_is_unsigned_crc_of_full_name():
    name = "persistent://public/default/my-topic"
    assert topic_crc32(name) == zlib.crc32(name.encode()) & 0xFFFFFFFF
    assert 0 <= topic_crc32(name) < 2**32
