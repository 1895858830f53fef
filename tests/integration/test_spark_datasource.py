"""The ``magnetar`` Spark data source against a real standalone cluster:
what it returns, the snapshot rule, bounds, errors, and that it leaves no
subscription behind (docs/spark-datasource.md)."""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass
from typing import Any

import pytest

from client import Client, MessageId, Result
from client.admin import Admin
from client.exceptions import TopicNotFound
from spark.datasource import MagnetarBatchReader, MagnetarDataSource
from spark.read_plan import ReadOptionError

UTC = datetime.UTC


@dataclass(frozen=True)
class Sent:
    partition: int
    message_id: str
    key: str | None
    properties: dict[str, str]
    event_ms: int | None


def _produce(url: str, topic: str, values: list[bytes], flush_every: int = 25) -> dict[bytes, Sent]:
    """Publish ``values`` (batched, a flush every ``flush_every``): value -> what was sent."""
    out: dict[bytes, Sent] = {}
    with Client(url) as c:
        producer = c.create_producer(topic)
        for i, value in enumerate(values):
            key = f"k{i % 7}" if i % 3 else None
            props = {"i": str(i), "parity": str(i % 2)} if i % 4 else {}
            event_ms = 1_700_000_000_000 + i if i % 2 else None

            def done(result: Result, mid: MessageId | None, v=value, k=key, p=props, e=event_ms):  # type: ignore[no-untyped-def]
                assert result == Result.Ok and mid is not None, result
                ident = f"{mid.ledger_id()}:{mid.entry_id()}:{mid.partition()}:{mid.batch_index()}"
                out[v] = Sent(mid.partition(), ident, k, p, e)

            producer.send_async(
                value, done, partition_key=key, properties=props, event_timestamp=event_ms
            )
            if (i + 1) % flush_every == 0:
                producer.flush()
        producer.flush()
        producer.close()
    assert len(out) == len(values)
    return out


def _values(prefix: str, n: int) -> list[bytes]:
    return [f"{prefix}-{i:04d}".encode() for i in range(n)]


def _load(spark: Any, url: str, topic: str, **options: str) -> Any:
    reader = spark.read.format("magnetar").option("service_url", url).option("topic", topic)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def _read(spark: Any, url: str, topic: str, **options: str) -> list[Any]:
    return list(_load(spark, url, topic, **options).collect())


def _id_key(message_id: str) -> tuple[int, int, int]:
    ledger, entry, _, batch = (int(x) for x in message_id.split(":"))
    return ledger, entry, batch


def _utc(ms: int) -> datetime.datetime:
    """As Spark returns a timestamp with the session time zone UTC."""
    return datetime.datetime.fromtimestamp(ms / 1000, UTC).replace(tzinfo=None)


def _ms(ts: datetime.datetime) -> int:
    return round(ts.replace(tzinfo=UTC).timestamp() * 1000)


def _subscriptions(url: str, topics: list[str]) -> dict[str, Any]:
    with Admin(url) as admin:
        return {t: admin.topics.stats(t)["subscriptions"] for t in topics}


def _next_ms() -> int:
    """A clock millisecond after every publish time assigned so far."""
    start = int(time.time() * 1000)
    deadline = time.monotonic() + 1
    while (now := int(time.time() * 1000)) <= start:
        assert time.monotonic() < deadline, "the clock does not advance"
    return now


def test_a_partitioned_topic_is_read_whole_and_once(cluster, spark_session, topic):
    url = cluster.service_url
    with Admin(url) as admin:
        admin.topics.create_partitioned_topic(topic, 3)
    sent = _produce(url, topic, _values("m", 300))
    rows = _read(spark_session, url, topic)

    assert len(rows) == len(sent) == len({r.value for r in rows})
    assert {(r.partition, r.value) for r in rows} == {(s.partition, v) for v, s in sent.items()}
    assert {s.partition for s in sent.values()} == {0, 1, 2}
    for r in rows:
        s = sent[r.value]
        assert r.topic == f"persistent://public/default/{topic}"
        assert (r.message_id, r.key, r.properties) == (s.message_id, s.key, s.properties)
        assert r.event_time == (None if s.event_ms is None else _utc(s.event_ms))
        assert r.publish_time is not None
    for p in range(3):  # each partition in message id order
        keys = [_id_key(r.message_id) for r in rows if r.partition == p]
        assert keys == sorted(keys) and len(set(keys)) == len(keys)
    # Readers and the planning subscriptions are gone; none was ever durable.
    partitions = [f"{topic}-partition-{i}" for i in range(3)]
    assert _subscriptions(url, partitions) == {t: {} for t in partitions}


def test_messages_produced_after_planning_are_not_read(cluster, spark_session, topic):
    url = cluster.service_url
    with Admin(url) as admin:
        admin.topics.create_partitioned_topic(topic, 2)
    before = _produce(url, topic, _values("before", 120))
    source = MagnetarDataSource({"service_url": url, "topic": topic})
    reader = source.reader(source.schema())
    assert isinstance(reader, MagnetarBatchReader)
    planned = reader.partitions()  # the driver's snapshot
    after = _produce(url, topic, _values("after", 80))

    got = [row["value"] for p in planned for b in reader.read(p) for row in b.to_pylist()]
    assert sorted(got) == sorted(before)
    # A read planned now sees both.
    assert {r.value for r in _read(spark_session, url, topic)} == set(before) | set(after)


def test_a_read_across_an_unload_returns_each_message_once(cluster, topic):
    """The topic moves mid-read (its bundle unloaded): the reader reconnects
    inside a batch entry, and the messages it had already read are not
    returned twice."""
    url = cluster.service_url
    values = _values("u", 400)
    _produce(url, topic, values, flush_every=100)  # entries of 100
    source = MagnetarDataSource({"service_url": url, "topic": topic, "batch_rows": "50"})
    reader = source.reader(source.schema())
    assert isinstance(reader, MagnetarBatchReader)
    (planned,) = reader.partitions()
    batches = reader.read(planned)
    got = [row["value"] for row in next(batches).to_pylist()]  # halfway through entry 0
    with Admin(url) as admin:
        assert admin.namespaces.unload("public/default")["unloaded"]
    got += [row["value"] for b in batches for row in b.to_pylist()]
    assert got == values


def test_message_id_bounds_start_inclusive_end_exclusive(cluster, spark_session, topic):
    url = cluster.service_url
    values = _values("b", 60)
    sent = _produce(url, topic, values, flush_every=10)  # batch entries of 10
    rows = _read(spark_session, url, topic)
    assert [r.value for r in rows] == values
    assert {r.partition for r in rows} == {-1}
    ids = [r.message_id for r in rows]
    assert ids == [sent[v].message_id for v in values]
    assert _id_key(ids[13])[2] >= 0, "the messages were not batched"

    def bounded(**options: str) -> list[bytes]:
        return [r.value for r in _read(spark_session, url, topic, **options)]

    assert bounded(start_message_id=ids[13], end_message_id=ids[37]) == values[13:37]
    assert bounded(start_message_id=ids[20]) == values[20:]
    assert bounded(end_message_id=ids[9]) == values[:9]
    assert bounded(end_message_id=ids[10]) == values[:10]  # the first of a new entry
    assert bounded(start_message_id=ids[30], end_message_id=ids[30]) == []
    assert bounded(start_message_id="earliest", end_message_id="latest") == values


def test_message_id_bounds_per_partition(cluster, spark_session, topic):
    url = cluster.service_url
    with Admin(url) as admin:
        admin.topics.create_partitioned_topic(topic, 3)
    _produce(url, topic, _values("p", 90))
    rows = _read(spark_session, url, topic)
    by_partition = {p: [r for r in rows if r.partition == p] for p in range(3)}
    start = f"{by_partition[0][4].message_id},{by_partition[2][7].message_id}"
    end = by_partition[1][5].message_id
    got = {
        r.value
        for r in _read(spark_session, url, topic, start_message_id=start, end_message_id=end)
    }
    expected = by_partition[0][4:] + by_partition[1][:5] + by_partition[2][7:]
    assert got == {r.value for r in expected}


def test_publish_time_bounds(cluster, spark_session, topic):
    url = cluster.service_url
    with Admin(url) as admin:
        admin.topics.create_partitioned_topic(topic, 2)
    first = _produce(url, topic, _values("first", 40))
    t1 = _next_ms()
    second = _produce(url, topic, _values("second", 40))
    t2 = _next_ms()
    third = _produce(url, topic, _values("third", 40))
    rows = _read(spark_session, url, topic)
    times = {r.value: _ms(r.publish_time) for r in rows}
    assert max(times[v] for v in first) < t1 <= min(times[v] for v in second)
    assert max(times[v] for v in second) < t2 <= min(times[v] for v in third)

    def bounded(**options: str) -> set[bytes]:
        return {r.value for r in _read(spark_session, url, topic, **options)}

    iso_t1 = datetime.datetime.fromtimestamp(t1 / 1000, UTC).isoformat().replace("+00:00", "Z")
    assert bounded(start_time=iso_t1, end_time=str(t2)) == set(second)
    assert bounded(start_time=str(t2)) == set(third)
    assert bounded(end_time=str(t1)) == set(first)
    assert bounded(start_time=str(_next_ms())) == set()  # after every message: ends at once
    assert bounded(end_time="1970-01-01T00:00:00+00:00") == set()


def test_a_non_partitioned_topic_and_an_empty_one(cluster, spark_session, topic):
    url = cluster.service_url
    values = _values("np", 30)
    _produce(url, topic, values)
    rows = _read(spark_session, url, topic)
    assert [(r.partition, r.value) for r in rows] == [(-1, v) for v in values]
    assert all(r.message_id.split(":")[2] == "-1" for r in rows)
    assert _subscriptions(url, [topic]) == {topic: {}}

    empty = f"{topic}-empty"
    with Admin(url) as admin:
        admin.topics.create_partitioned_topic(empty, 2)
    assert _read(spark_session, url, empty) == []


def test_a_topic_that_does_not_exist_raises_topic_not_found(cluster, spark_session, topic):
    url = cluster.service_url
    with pytest.raises(Exception, match="TopicNotFound") as caught:
        _read(spark_session, url, topic)
    assert topic in str(caught.value)
    with Admin(url) as admin:  # and the read did not create it
        assert admin.topics.get_partitioned_topic_metadata(topic) == {"partitions": 0}
        with pytest.raises(TopicNotFound):
            admin.topics.stats(topic)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"service_url": ""}, "service_url is required"),
        ({"topic": ""}, "topic is required"),
        ({"start_message_id": "1:2:-1:-1", "end_time": "5"}, "not both"),
        ({"start_message_id": "12-3"}, "is not a message id"),
        ({"end_message_id": "1:-2"}, "negative"),
        ({"start_time": "yesterday"}, "neither epoch milliseconds nor an ISO-8601"),
        ({"start_time": "2000", "end_time": "1000"}, "is after end_time"),
        ({"start_message_id": "1:2:5:-1"}, "names partition 5"),
        ({"start_message_id": "latest"}, "reads nothing in a batch read"),
        ({"receiver_queue_size": "0"}, "outside 1.."),
        ({"startMessageId": "1:2"}, "unknown option"),
        ({"topic": "non-persistent://public/default/x"}, "non-persistent"),
    ],
)
def test_bad_options_are_refused(cluster, spark_session, topic, options, message):
    url = cluster.service_url
    _produce(url, topic, _values("x", 3))
    merged = {"service_url": url, "topic": topic, **options}
    reader = spark_session.read.format("magnetar")
    for name, value in merged.items():
        reader = reader.option(name, value)
    with pytest.raises(Exception, match=message):
        reader.load().collect()


@pytest.mark.parametrize(
    "options",
    [{"start_time": "0"}, {"end_message_id": "1:2"}, {"start_message_id": "3:4"}],
)
def test_a_stream_refuses_bounds(options: dict[str, str]) -> None:
    source = MagnetarDataSource({"service_url": "magnetar://127.0.0.1:1", "topic": "t", **options})
    with pytest.raises(ReadOptionError, match="bounds are for batch reads"):
        source.streamReader(source.schema())


def test_a_stream_reads_each_message_once_across_runs(cluster, spark_session, topic, tmp_path):
    url = cluster.service_url
    with Admin(url) as admin:
        admin.topics.create_partitioned_topic(topic, 2)

    def run_once(checkpoint: str, **options: str) -> list[bytes]:
        """One Trigger.AvailableNow run: what is stored when it starts, then it stops."""
        got: list[bytes] = []
        stream = spark_session.readStream.format("magnetar").option("service_url", url)
        for name, value in {"topic": topic, **options}.items():
            stream = stream.option(name, value)
        query = (
            stream.load()
            .writeStream.foreachBatch(lambda df, _: got.extend(r.value for r in df.collect()))
            .option("checkpointLocation", str(tmp_path / checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(120), "the availableNow query did not finish"
        assert query.exception() is None
        return got

    first = _produce(url, topic, _values("s1", 70))
    assert sorted(run_once("from-earliest")) == sorted(first)
    assert run_once("from-latest", start_message_id="latest") == []
    second = _produce(url, topic, _values("s2", 50))
    assert sorted(run_once("from-earliest")) == sorted(second)
    assert sorted(run_once("from-latest", start_message_id="latest")) == sorted(second)
    assert run_once("from-earliest") == []
    partitions = [f"{topic}-partition-{i}" for i in range(2)]
    assert _subscriptions(url, partitions) == {t: {} for t in partitions}
