"""What a read of the ``magnetar`` data source covers (spark/read_plan.py):
options, message id strings, and each message's verdict as step tables."""

from __future__ import annotations

import pytest

from spark.read_plan import (
    EARLIEST_KEY,
    NOTHING_STORED,
    PartitionRange,
    ReadOptionError,
    Verdict,
    batch_ranges,
    format_message_id,
    parse_message_id,
    parse_options,
    parse_time_ms,
    stream_range,
)

URL = "magnetar://127.0.0.1:6650"
TAKE, SKIP, STOP = Verdict.TAKE, Verdict.SKIP, Verdict.STOP


def _opts(**options: str):  # type: ignore[no-untyped-def]
    return parse_options({"service_url": URL, "topic": "t", **options})


def test_message_ids_read_back_as_written():
    text = format_message_id(12, 345, 2, 7)
    assert text == "12:345:2:7"
    assert parse_message_id(text, "o") == (2, (12, 345, 7))
    assert parse_message_id("12:345", "o") == (-1, (12, 345, -1))
    assert parse_message_id(" 12:345:0 ", "o") == (0, (12, 345, -1))


@pytest.mark.parametrize("bad", ["", "12", "1:2:3:4:5", "a:b", "1:-1", "1:2:-2:0", "1:2:0:-3"])
def test_malformed_message_ids_are_refused(bad: str) -> None:
    with pytest.raises(ReadOptionError, match="start_message_id"):
        parse_message_id(bad, "start_message_id")


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("0", 0),
        ("1714564800000", 1714564800000),
        ("2024-05-01T12:00:00Z", 1714564800000),
        ("2024-05-01T12:00:00+00:00", 1714564800000),
        ("2024-05-01T14:00:00+02:00", 1714564800000),
        ("2024-05-01T12:00:00", 1714564800000),  # no offset: UTC
        ("2024-05-01T12:00:00.250Z", 1714564800250),
    ],
)
def test_times_are_epoch_ms_or_iso_8601(text: str, ms: int) -> None:
    assert parse_time_ms(text, "start_time") == ms


def test_options_default_to_the_whole_topic_and_take_load_s_path():
    opts = parse_options({"service_url": URL, "path": "my-topic"})
    assert opts.topic == "persistent://public/default/my-topic"
    assert not opts.has_bounds and _opts(start_time="0").has_bounds
    assert opts.receiver_queue_size == 5000 and opts.batch_rows == 10000


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"topic": "a", "path": "b"}, "name different topics"),
        ({"start_message_id": "1:2:0:-1,3:4:0:-1"}, "partition 0 is named twice"),
        ({"start_time": "1", "start_message_id": "1:2"}, "not both"),
        ({"end_time": "-5"}, "neither epoch"),
        ({"batch_rows": "ten"}, "not an integer"),
        ({"read_timeout_ms": "0"}, "outside 1.."),
        ({"topic": "a/b"}, "topic:"),
    ],
)
def test_malformed_options_are_refused(options: dict[str, str], message: str) -> None:
    with pytest.raises(ReadOptionError, match=message):
        _opts(**options)


# A range of entries (5, 0) .. (5, 9), each a batch of messages 0..; steps:
# (key, publish time, verdict).
RANGE = PartitionRange(
    "t",
    0,
    "t-partition-0",
    upper=(5, 9),
    lower=(5, 2, 3),
    end=(5, 8, 0),
    start_time_ms=None,
    end_time_ms=1000,
)
RANGE_STEPS = [
    ((5, 1, 9), 10, SKIP),  # an entry before the start entry
    ((5, 2, 2), 10, SKIP),  # before the start inside its batch
    ((5, 2, 3), 10, TAKE),  # the start itself (inclusive)
    ((5, 7, 99), 10, TAKE),
    ((5, 8, -1), 10, TAKE),  # a message stored alone sorts before the batch
    ((5, 8, 0), 10, STOP),  # the end itself (exclusive)
    ((5, 10, -1), 10, STOP),  # after the snapshot
    ((5, 3, 0), 1000, STOP),  # at the end time (exclusive)
]


@pytest.mark.parametrize(("key", "publish_ms", "verdict"), RANGE_STEPS)
def test_each_message_gets_its_verdict(key, publish_ms, verdict):  # type: ignore[no-untyped-def]
    assert RANGE.verdict(key, publish_ms) is verdict


def test_a_start_time_skips_older_messages():
    rng = PartitionRange("t", -1, "t", upper=(1, 5), start_time_ms=100)
    assert [rng.verdict((1, 0, -1), t) for t in (99, 100, 101)] == [SKIP, TAKE, TAKE]
    assert rng.at_snapshot_end((1, 5, 3)) and not rng.at_snapshot_end((1, 4, 3))


def test_batch_ranges_skip_empty_partitions_and_clamp_to_the_snapshot():
    topics = {0: "t-partition-0", 1: "t-partition-1", 2: "t-partition-2"}
    snapshot = {0: (3, 10), 1: NOTHING_STORED, 2: (4, 2)}
    opts = _opts(start_message_id="3:4:0:1,4:3:2:-1", end_message_id="9:9:0:-1")
    ranges = batch_ranges(opts, topics, snapshot)
    assert [r.partition for r in ranges] == [0]  # 1 is empty, 2 starts after its snapshot
    only = ranges[0]
    assert (only.lower, only.reader_start, only.upper, only.end) == (
        (3, 4, 1),
        (3, 4),
        (3, 10),
        (9, 9, -1),
    )
    everything = batch_ranges(_opts(), topics, snapshot)
    assert [(r.partition, r.lower, r.reader_start) for r in everything] == [
        (0, EARLIEST_KEY, None),
        (2, EARLIEST_KEY, None),
    ]


def test_batch_ranges_start_time_reads_from_the_last_entry_first():
    opts = _opts(start_time="2024-05-01T12:00:00Z")
    (rng,) = batch_ranges(opts, {-1: "t"}, {-1: (7, 3)})
    assert rng.reader_start == (7, 3) and rng.start_time_ms == 1714564800000


def test_batch_ranges_refuse_an_unknown_partition_and_a_latest_start():
    with pytest.raises(
        ReadOptionError, match=r"names partition 3; the topic has partitions 0\.\.1"
    ):
        batch_ranges(_opts(end_message_id="1:1:3:-1"), {0: "a", 1: "b"}, {0: (1, 1), 1: (1, 1)})
    with pytest.raises(ReadOptionError, match="not partitioned"):
        batch_ranges(_opts(end_message_id="1:1:0:-1"), {-1: "t"}, {-1: (1, 1)})
    with pytest.raises(ReadOptionError, match="readStream"):
        batch_ranges(_opts(start_message_id="latest"), {-1: "t"}, {-1: (1, 1)})


def test_a_stream_range_starts_after_the_previous_offset():
    first = stream_range("t", 0, "t-partition-0", NOTHING_STORED, (2, 5))
    assert (first.lower, first.reader_start) == (EARLIEST_KEY, None)
    nxt = stream_range("t", 0, "t-partition-0", (2, 5), (3, 1))
    assert nxt.reader_start == (2, 5)
    assert [nxt.verdict(k, 0) for k in ((2, 5, 99), (2, 6, -1), (3, 0, 4))] == [SKIP, TAKE, TAKE]
    assert stream_range("t", 0, "t-partition-0", (3, 1), (3, 1)).is_empty()
