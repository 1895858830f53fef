"""The metastore's ``/metrics`` (docs/metrics.md): the metastore is a small
etcd, so its Raft and store state use etcd's series names; its operations
use Pulsar's ``pulsar_metadata_store_*`` names (label ``name`` is
``metadata-store``, ``type`` the operation, ``status`` success or fail:
an answer with an error code, a failed compare included, is a fail).

The Raft and store gauges are read when Prometheus scrapes
(:class:`NodeStateCollector`), so they are never stale; the journal's
fsync and compaction times are observed in the Raft thread (the
histograms are thread-safe).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from prometheus_client import REGISTRY, Counter, Histogram, disable_created_metrics
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from protos import common_pb2

disable_created_metrics()  # no *_created series: only what the docs list

# Pulsar's buckets for metadata operations, in milliseconds.
OPS_LATENCY_BUCKETS_MS = (1, 3, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)
STORE_NAME = "metadata-store"

OPS_LATENCY = Histogram(
    "pulsar_metadata_store_ops_latency",
    "Latency of metastore operations served by this node (ms)",
    ["name", "type", "status"],
    unit="ms",
    buckets=OPS_LATENCY_BUCKETS_MS,
)
PUT_BYTES = Counter(
    "pulsar_metadata_store_put_bytes", "Bytes of values stored by successful puts", ["name"]
)
READ_ITEMS = Counter(
    "magnetar_metastore_read_items",
    "Gets and lists answered inside Read calls (reads a client sent together)",
    ["type"],
)
WAL_FSYNC = Histogram(
    "etcd_disk_wal_fsync_duration_seconds",
    "Raft journal flushes to disk (one per Raft tick that appended)",
    buckets=tuple(0.001 * 2**i for i in range(14)),
)
SNAPSHOT = Histogram(
    "etcd_disk_backend_snapshot_duration_seconds",
    "Log compactions: making the snapshot durable and cutting the journal behind it",
    buckets=tuple(0.01 * 2**i for i in range(17)),
)
LEASES_GRANTED = Counter("etcd_debugging_lease_granted", "Sessions created")
LEASES_REVOKED = Counter("etcd_debugging_lease_revoked", "Sessions closed by their owner")
LEASES_RENEWED = Counter("etcd_debugging_lease_renewed", "Session keep-alives accepted")
LEASES_EXPIRED = Counter(
    "etcd_debugging_server_lease_expired", "Sessions this node expired as leader"
)


def timed(op: str) -> Callable[[Callable[..., Awaitable[Any]]], Callable[..., Awaitable[Any]]]:
    """Time a unary servicer method as operation ``op`` (its answer's error
    code says success or fail)."""

    def wrap(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        @functools.wraps(method)
        async def call(self: Any, request: Any, context: Any) -> Any:
            started = time.perf_counter()
            response = await method(self, request, context)
            failed = response.HasField("error") and response.error.code != common_pb2.OK
            OPS_LATENCY.labels(STORE_NAME, op, "fail" if failed else "success").observe(
                (time.perf_counter() - started) * 1000
            )
            if op == "put" and not failed:
                PUT_BYTES.labels(STORE_NAME).inc(len(request.value))
            return response

        return call

    return wrap


class ServiceView(Protocol):
    """What the collector reads of the metastore service."""

    @property
    def node(self) -> MetastoreNodeView: ...

    @property
    def leadership(self) -> LeadershipView: ...

    @property
    def open_watches(self) -> int: ...


class MetastoreNodeView(Protocol):
    @property
    def store(self) -> Any: ...

    @property
    def leader_changes(self) -> int: ...

    @property
    def is_leader(self) -> bool: ...

    @property
    def leader_address(self) -> str | None: ...

    def status(self) -> dict[str, Any]: ...


class LeadershipView(Protocol):
    @property
    def proposals_pending(self) -> int: ...

    @property
    def proposals_failed(self) -> int: ...


def raft_state(service: ServiceView) -> dict[str, float]:
    """What the etcd-named gauges show (read at scrape time, in a thread)."""
    node = service.node
    status = node.status()
    return {
        "is_leader": 1 if node.is_leader else 0,
        "has_leader": 1 if node.leader_address is not None else 0,
        "term": status.get("raft_term", 0),
        "commit_index": status.get("commit_idx", 0),
        "applied_index": status.get("last_applied", 0),
        "pending": service.leadership.proposals_pending,
        "failed": service.leadership.proposals_failed,
        "leader_changes": node.leader_changes,
        "keys": len(node.store.kv),
        "revision": node.store.revision,
        "watches": service.open_watches,
        "sessions": len(node.store.sessions),
    }


class NodeStateCollector(Collector):
    """etcd's Raft and store series, read at scrape time."""

    def __init__(self, service: ServiceView, data_dir: Path) -> None:
        self.service = service
        self.data_dir = data_dir

    def collect(self) -> Iterator[Metric]:
        s = raft_state(self.service)
        gauges = [
            ("etcd_server_is_leader", "1 when this node is the Raft leader", "is_leader"),
            ("etcd_server_has_leader", "1 when this node knows a leader", "has_leader"),
            ("etcd_server_proposals_committed_total", "Raft commit index", "commit_index"),
            ("etcd_server_proposals_applied_total", "Raft index applied", "applied_index"),
            ("etcd_server_proposals_pending", "Writes waiting to be committed", "pending"),
            ("magnetar_metastore_raft_term", "Current Raft term", "term"),
            ("etcd_debugging_mvcc_keys_total", "Keys in the store", "keys"),
            ("etcd_debugging_mvcc_current_revision", "Store revision", "revision"),
            ("etcd_debugging_mvcc_watch_stream_total", "Open Watch streams here", "watches"),
            ("etcd_debugging_mvcc_watcher_total", "Watchers here (one per stream)", "watches"),
            ("magnetar_metastore_sessions", "Open sessions", "sessions"),
        ]
        for name, help_text, key in gauges:
            yield GaugeMetricFamily(name, help_text, value=s[key])
        yield CounterMetricFamily(
            "etcd_server_leader_changes_seen", "Leader changes this node saw", s["leader_changes"]
        )
        yield CounterMetricFamily(
            "etcd_server_proposals_failed", "Writes that were not committed", s["failed"]
        )
        yield GaugeMetricFamily(
            "etcd_mvcc_db_total_size_in_bytes",
            "Bytes of the Raft journal and snapshot on disk",
            value=_dir_size(self.data_dir),
        )


def _dir_size(path: Path) -> int:
    total = 0
    for p in path.glob("raft.*"):
        try:
            total += p.stat().st_size
        except OSError:
            continue
    return total


def register(service: ServiceView, data_dir: Path) -> NodeStateCollector:
    collector = NodeStateCollector(service, data_dir)
    REGISTRY.register(collector)
    return collector
