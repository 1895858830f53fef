"""The records of the stats history (``docs/stats-schema.md``) and their
packing into message batches for the stats topic.

Every record has exactly the fields :mod:`protos.stats_schema` lists for
its kind, in that order; the figures are the ones ``topics stats`` shows
(:func:`broker.stats.topic_figures`), so the history and the admin view
agree. Each record is encoded as soon as it is made (:func:`encode_record`),
and the encoded records are packed as Pulsar batches: one stored entry
holds up to ``max_records`` records, each a batch record whose key says
what it describes and whose event time is the snapshot's timestamp. No
I/O here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from broker.load_decisions import SplitThresholds, broker_load_from_report, bundle_load_to_json
from broker.stats import SubscriptionFigures, topic_figures
from broker.topic import TopicBase
from protos import common_pb2, stats_schema
from protos.entry import encode_batch_record, encode_entry
from protos.errors import MagnetarServerError

Record = dict[str, Any]


class RecordsRefused(MagnetarServerError):
    """The stats topic refused records: sending them again would fail again."""


@dataclass(frozen=True)
class Snapshot:
    """What every record of one broker's snapshot shares."""

    timestamp_ms: int
    interval_s: float
    cluster: str
    broker: str

    def common(self, kind: str) -> Record:
        return {
            "schema_version": stats_schema.SCHEMA_VERSION,
            "kind": kind,
            "timestamp": self.timestamp_ms,
            "interval_s": self.interval_s,
            "cluster": self.cluster,
            "broker": self.broker,
        }


def _subscription(
    name: str, f: SubscriptionFigures, since_ms: int, bytes_per_entry: float
) -> Record:
    return {
        "name": name,
        "type": f.type,
        "isDurable": f.durable,
        "msgBacklog": f.backlog.messages,
        "backlogSize": int(f.backlog.entries * bytes_per_entry),
        "msgDelayed": f.delayed,
        "unackedMessages": f.unacked,
        "msgRateOut": f.rate_out,
        "msgThroughputOut": f.throughput_out,
        "msgRateRedeliver": f.rate_redeliver,
        "messageAckRate": f.rate_ack,
        "msgOutCounter": f.msgs_out,
        "bytesOutCounter": f.bytes_out,
        "consumers": f.consumers,
        "blockedSubscriptionOnUnackedMsgs": f.blocked,
        "countersSince": since_ms,
    }


def topic_record(snapshot: Snapshot, topic: TopicBase, bundle: str) -> Record:
    """The ``topic`` record of one topic (or partition) served here."""
    name = topic.name
    f = topic_figures(topic)
    m = topic.metrics
    record = snapshot.common(stats_schema.KIND_TOPIC)
    record.update(
        tenant=name.tenant,
        namespace=name.namespace_name,
        topic=name.partitioned_topic_name.full_name,
        partition=name.partition_index,
        bundle=bundle,
        persistent=name.is_persistent,
        countersSince=m.counting_since_ms,
        msgRateIn=f.rate_in,
        msgRateOut=f.rate_out,
        msgThroughputIn=f.throughput_in,
        msgThroughputOut=f.throughput_out,
        msgInCounter=f.msgs_in,
        bytesInCounter=f.bytes_in,
        msgOutCounter=f.msgs_out,
        bytesOutCounter=f.bytes_out,
        averageMsgSize=f.throughput_in / f.rate_in if f.rate_in else 0.0,
        storageSize=f.storage,
        backlogSize=f.backlog_bytes,
        msgBacklog=f.backlog_messages,
        publishers=f.producers,
        consumers=f.consumers,
        subscriptions=[
            _subscription(
                sub, figures, m.subscription(sub).counting_since_ms, f.average_entry_bytes
            )
            for sub, figures in f.subscriptions.items()
        ],
    )
    return record


def broker_record(
    snapshot: Snapshot, report: Mapping[str, Any], thresholds: SplitThresholds
) -> Record:
    """The ``broker`` record: this broker's load report (``LoadManager.report``)
    and its bundle split thresholds."""
    record = snapshot.common(stats_schema.KIND_BROKER)
    load = broker_load_from_report(dict(report), snapshot.broker)
    bundles = []
    for path, bundle_load in sorted(load.bundles.items()):
        namespace, _, bundle = path.rpartition("/")
        bundles.append(
            {"namespace": namespace, "bundle": bundle, **bundle_load_to_json(bundle_load)}
        )
    record.update(
        cpu=load.cpu,
        memory=load.memory,
        bandwidthIn=load.bandwidth_in,
        bandwidthOut=load.bandwidth_out,
        msgRateIn=float(report.get("msgRateIn", 0.0)),
        msgRateOut=float(report.get("msgRateOut", 0.0)),
        msgThroughputIn=float(report.get("msgThroughputIn", 0.0)),
        msgThroughputOut=float(report.get("msgThroughputOut", 0.0)),
        numTopics=int(report.get("numTopics", 0)),
        numBundles=int(report.get("numBundles", 0)),
        bundles=bundles,
        splitMaxTopics=thresholds.max_topics,
        splitMaxSessions=thresholds.max_sessions,
        splitMaxMsgRate=float(thresholds.max_msg_rate),
        splitMaxBandwidthBytes=float(thresholds.max_bandwidth_bytes),
    )
    return record


def bookie_record(snapshot: Snapshot, bookie_id: str, stats: Any) -> Record:
    """The ``bookie`` record of one bookie's ``Stats`` answer."""
    record = snapshot.common(stats_schema.KIND_BOOKIE)
    record.update(
        bookie=bookie_id,
        diskUsedBytes=int(stats.disk_used_bytes),
        diskFreeBytes=int(stats.disk_free_bytes),
        diskTotalBytes=int(stats.disk_used_bytes + stats.disk_free_bytes),
        ledgers=int(stats.ledgers),
        entries=int(stats.entries),
        storedBytes=int(stats.bytes),
        readOnly=bool(stats.read_only),
    )
    return record


def record_key(record: Record) -> str:
    """The message key: what the record describes."""
    kind = record["kind"]
    if kind == stats_schema.KIND_TOPIC:
        partition = record["partition"]
        topic = record["topic"]
        return topic if partition < 0 else f"{topic}-partition-{partition}"
    if kind == stats_schema.KIND_BOOKIE:
        return str(record["bookie"])
    return str(record["broker"])


@dataclass(frozen=True)
class Batch:
    """One stored entry of the stats topic: ``messages`` records."""

    sequence_id: int
    messages: int
    entry: bytes


def encode_record(record: Record) -> bytes:
    """One record as a batch record, ready to pack: its JSON value, with
    its key, event time and kind in the record's own metadata. Nothing in
    it depends on when or by whom it is sent, so a snapshot holds its
    records encoded (a few hundred bytes each, which the garbage collector
    never scans) rather than as dicts until they are published."""
    payload = json.dumps(record, separators=(",", ":")).encode()
    smm = common_pb2.SingleMessageMetadata(
        partition_key=record_key(record),
        payload_size=len(payload),
        event_time=record["timestamp"],
        properties=[
            common_pb2.KeyValue(key="kind", value=record["kind"]),
            common_pb2.KeyValue(key="schema_version", value=str(record["schema_version"])),
        ],
    )
    return encode_batch_record(smm.SerializeToString(), payload)


def pack(
    encoded: Sequence[bytes],
    producer_name: str,
    first_sequence_id: int,
    max_records: int,
    publish_time_ms: int,
) -> Iterator[Batch]:
    """Encoded records (:func:`encode_record`) as Pulsar batch entries of up
    to ``max_records`` records, sequence ids counting on from
    ``first_sequence_id`` (one per record), published at ``publish_time_ms``."""
    assert max_records >= 1
    for start in range(0, len(encoded), max_records):
        chunk = encoded[start : start + max_records]
        sequence_id = first_sequence_id + start
        payload = b"".join(chunk)
        meta = common_pb2.MessageMetadata(
            producer_name=producer_name,
            sequence_id=sequence_id,
            publish_time=publish_time_ms,
            num_messages_in_batch=len(chunk),
            uncompressed_size=len(payload),
            highest_sequence_id=sequence_id + len(chunk) - 1,
        )
        yield Batch(sequence_id, len(chunk), encode_entry(meta, payload))
