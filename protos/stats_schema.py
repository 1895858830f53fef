"""The stats history records (``docs/stats-schema.md``): what brokers publish
to the stats topic every ``stats_export_interval_s``, what ``magnetar-admin
stats export`` writes to files and what the Spark reports read.

One record is one JSON object (one message on the stats topic). Every record
carries the common fields; ``kind`` says which others it has:

* ``topic``: one topic (or partition) a broker owned, with its
  subscriptions as a list;
* ``broker``: one broker's load (its load report) and its bundles;
* ``bookie``: one bookie's disk and store figures (written by the load
  manager leader only, so each bookie appears once per interval).

The field lists below are the schema: the broker writes exactly these
fields, the exporter's Parquet schema and the reports' Spark schema are
built from them, and a test checks the document lists the same names. A
change that removes or retypes a field raises :data:`SCHEMA_VERSION`;
readers count and skip records of a version they do not know.

Types are the plain names ``string``, ``long``, ``double``, ``boolean``; a
nested list of records is a tuple of fields.
"""

from __future__ import annotations

from typing import Any

from protos.topic_name import SYSTEM_NAMESPACE

SCHEMA_VERSION = 1

# The stats topic: one non-partitioned topic in the system namespace, which
# brokers create on start with its own retention (docs/stats-schema.md).
STATS_TOPIC = f"persistent://{SYSTEM_NAMESPACE}/stats"

KIND_TOPIC = "topic"
KIND_BROKER = "broker"
KIND_BOOKIE = "bookie"
KINDS = (KIND_TOPIC, KIND_BROKER, KIND_BOOKIE)

Field = tuple[str, Any]  # (name, type name or nested fields)

COMMON_FIELDS: tuple[Field, ...] = (
    ("schema_version", "long"),
    ("kind", "string"),
    ("timestamp", "long"),  # ms since the epoch (UTC) of the snapshot
    ("interval_s", "double"),  # the export interval the broker ran with
    ("cluster", "string"),
    ("broker", "string"),  # the writing broker's address
)

SUBSCRIPTION_FIELDS: tuple[Field, ...] = (
    ("name", "string"),
    ("type", "string"),  # Exclusive, Shared, Failover, Key_Shared
    ("isDurable", "boolean"),
    ("msgBacklog", "long"),
    ("backlogSize", "long"),  # bytes: backlog entries x the topic's average entry size
    ("msgDelayed", "long"),
    ("unackedMessages", "long"),
    ("msgRateOut", "double"),
    ("msgThroughputOut", "double"),
    ("msgRateRedeliver", "double"),
    ("messageAckRate", "double"),
    ("msgOutCounter", "long"),
    ("bytesOutCounter", "long"),
    ("consumers", "long"),  # a count here (Pulsar's stats list them)
    ("blockedSubscriptionOnUnackedMsgs", "boolean"),
    ("countersSince", "long"),  # as the topic's, for this subscription's counters
)

TOPIC_FIELDS: tuple[Field, ...] = (
    ("tenant", "string"),
    ("namespace", "string"),  # tenant/namespace
    ("topic", "string"),  # full name; a partition's is its partitioned topic's
    ("partition", "long"),  # -1: not a partition
    ("bundle", "string"),  # 0xLOWER_0xUPPER
    ("persistent", "boolean"),
    # When this broker started counting the topic (ms since the epoch). The
    # *Counter fields count from then: a different value than in the
    # previous record of the topic means they restarted (a broker restart
    # or the topic moving to another broker).
    ("countersSince", "long"),
    ("msgRateIn", "double"),
    ("msgRateOut", "double"),
    ("msgThroughputIn", "double"),
    ("msgThroughputOut", "double"),
    ("msgInCounter", "long"),
    ("bytesInCounter", "long"),
    ("msgOutCounter", "long"),
    ("bytesOutCounter", "long"),
    ("averageMsgSize", "double"),
    ("storageSize", "long"),
    ("backlogSize", "long"),
    ("msgBacklog", "long"),  # summed over the subscriptions
    ("publishers", "long"),  # a count here (Pulsar's stats list them)
    ("consumers", "long"),
    ("subscriptions", SUBSCRIPTION_FIELDS),
)

BUNDLE_FIELDS: tuple[Field, ...] = (
    ("namespace", "string"),
    ("bundle", "string"),
    ("topics", "long"),
    ("sessions", "long"),  # producers + consumers
    ("msgRateIn", "double"),
    ("msgRateOut", "double"),
    ("msgThroughputIn", "double"),
    ("msgThroughputOut", "double"),
)

BROKER_FIELDS: tuple[Field, ...] = (
    ("cpu", "double"),  # share of all the host's cores, 0..1
    ("memory", "double"),  # resident memory as a share of the host's, 0..1
    ("bandwidthIn", "double"),  # share of load_balancer_override_broker_nic_speed_gbps
    ("bandwidthOut", "double"),
    ("msgRateIn", "double"),
    ("msgRateOut", "double"),
    ("msgThroughputIn", "double"),
    ("msgThroughputOut", "double"),
    ("numTopics", "long"),
    ("numBundles", "long"),
    ("bundles", BUNDLE_FIELDS),
    # The broker's bundle split thresholds (load_balancer_namespace_bundle_max_*).
    ("splitMaxTopics", "long"),
    ("splitMaxSessions", "long"),
    ("splitMaxMsgRate", "double"),
    ("splitMaxBandwidthBytes", "double"),
)

BOOKIE_FIELDS: tuple[Field, ...] = (
    ("bookie", "string"),
    ("diskUsedBytes", "long"),
    ("diskFreeBytes", "long"),
    ("diskTotalBytes", "long"),
    ("ledgers", "long"),
    ("entries", "long"),
    ("storedBytes", "long"),
    ("readOnly", "boolean"),
)

KIND_FIELDS: dict[str, tuple[Field, ...]] = {
    KIND_TOPIC: TOPIC_FIELDS,
    KIND_BROKER: BROKER_FIELDS,
    KIND_BOOKIE: BOOKIE_FIELDS,
}


def all_fields() -> tuple[Field, ...]:
    """Every field of every kind, common ones first: the one flat schema of
    exported Parquet files and of the reports' input (a field a record's
    kind does not have is null). Names shared by kinds have one type."""
    seen: dict[str, Any] = {}
    for name, kind in COMMON_FIELDS + TOPIC_FIELDS + BROKER_FIELDS + BOOKIE_FIELDS:
        if name in seen:
            assert seen[name] == kind, f"{name} has two types"
            continue
        seen[name] = kind
    return tuple(seen.items())


def field_names(kind: str) -> tuple[str, ...]:
    return tuple(name for name, _ in COMMON_FIELDS + KIND_FIELDS[kind])
