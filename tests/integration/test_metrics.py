"""Every process's /metrics on a real standalone: Pulsar's broker series,
BookKeeper's bookie series and etcd's Raft series, with values checked
against the traffic the test made; counters that go on across unloads and
reloads; scrapes during unloads; odd names; the HTTP port's other paths.

The cluster's stats interval is 1 s (``stats_update_frequency_in_secs``),
so per-interval figures move within the tests' deadlines."""

from __future__ import annotations

import datetime
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from client import Client, ConsumerType, InitialPosition
from client.admin import Admin
from tests.harness import StandaloneCluster, wait_for
from tests.metrics_scrape import Scrape, get, scrape

STATS_INTERVAL_S = 1
UNACKED_LIMIT = 20


@pytest.fixture(scope="module")
def metrics_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    c = StandaloneCluster(
        tmp_path_factory.mktemp("metrics") / "data",
        env={
            "MAGNETAR_BROKER_STATS_UPDATE_FREQUENCY_IN_SECS": str(STATS_INTERVAL_S),
            "MAGNETAR_BROKER_MAX_UNACKED_MESSAGES_PER_SUBSCRIPTION": str(UNACKED_LIMIT),
            "MAGNETAR_BROKER_LOAD_BALANCER_REPORT_INTERVAL_MS": "500",
            # Scrapes here check values right after traffic, within a 1 s rate
            # window: no wait for a render slot (the bound has its own tests).
            "MAGNETAR_BROKER_HTTP_MIN_RENDER_INTERVAL_MS": "0",
        },
    )
    c.start()
    yield c
    c.stop()


def _port(cluster: StandaloneCluster, role: str) -> int:
    return int(cluster.endpoints["metrics"][role])


def _full(topic: str) -> str:
    return f"persistent://public/default/{topic}"


# What issue 20 lists for the broker (a family may also have more series).
BROKER_FAMILIES = [
    "pulsar_topics_count",
    "pulsar_subscriptions_count",
    "pulsar_producers_count",
    "pulsar_consumers_count",
    "pulsar_rate_in",
    "pulsar_rate_out",
    "pulsar_throughput_in",
    "pulsar_throughput_out",
    "pulsar_in_messages_total",
    "pulsar_in_bytes_total",
    "pulsar_out_messages_total",
    "pulsar_out_bytes_total",
    "pulsar_storage_size",
    "pulsar_storage_backlog_size",
    "pulsar_msg_backlog",
    "pulsar_storage_write_latency_le_0_5",
    "pulsar_storage_write_latency_le_1000",
    "pulsar_storage_write_latency_overflow",
    "pulsar_storage_write_latency_count",
    "pulsar_storage_write_latency_sum",
    "pulsar_entry_size_le_128",
    "pulsar_entry_size_le_1_mb",
    "pulsar_entry_size_le_overflow",
    "pulsar_entry_size_count",
    "pulsar_entry_size_sum",
    "pulsar_subscription_back_log",
    "pulsar_subscription_unacked_messages",
    "pulsar_subscription_msg_rate_out",
    "pulsar_subscription_msg_rate_redeliver",
    "pulsar_subscription_blocked_on_unacked_messages",
    "pulsar_subscription_delayed",
    "pulsar_active_connections",
    "pulsar_broker_lookup_count",
    "pulsar_broker_lookup_answers_total",
    "pulsar_broker_lookup_redirects_total",
    "pulsar_broker_lookup_failures_total",
    "pulsar_lb_cpu_usage",
    "pulsar_lb_memory_usage",
    "pulsar_lb_bandwidth_in_usage",
    "pulsar_lb_bandwidth_out_usage",
    "pulsar_lb_bundles_count",
    "pulsar_ml_cache_hits_rate",
    "pulsar_ml_cache_used_size",
    "pulsar_ml_count",
    "pulsar_broker_topics_count",
    "pulsar_broker_publish_latency_count",
]


def test_the_broker_exports_pulsars_series_with_the_traffics_values(metrics_cluster, topic):
    url = metrics_cluster.service_url
    port = _port(metrics_cluster, "broker")
    with Client(url) as c:
        acked = c.subscribe(topic, "acked", initial_position=InitialPosition.Earliest)
        c.subscribe(topic, "idle", initial_position=InitialPosition.Earliest)
        p = c.create_producer(topic, batching_max_publish_delay_ms=50)
        for i in range(50):
            p.send_async(f"m{i}".encode(), None)  # batched: fewer entries than messages
        p.flush()
        for _ in range(50):
            acked.acknowledge(acked.receive(timeout_millis=10000))
        labels = {"topic": _full(topic)}

        def settled() -> Scrape | None:
            s = scrape(port)
            done = (
                s.get("pulsar_subscription_back_log", subscription="acked", **labels) == 0
                and s.get("pulsar_lb_memory_usage") is not None  # a load report was made
            )
            return s if done else None

        s = wait_for(settled, 30, "acks and a stats interval to show")
        missing = [f for f in BROKER_FAMILIES if f not in s.names()]
        assert not missing, missing
        ns = {"cluster": "standalone", "namespace": "public/default", **labels}
        assert s.value("pulsar_in_messages_total", **ns) == 50
        assert s.value("pulsar_in_bytes_total", **labels) > 0
        assert s.value("pulsar_out_messages_total", subscription="acked", **labels) == 50
        # "idle" never acknowledges: its consumer's queue holds what was pushed to it.
        assert s.value("pulsar_out_messages_total", subscription="idle", **labels) == 50
        assert s.value("pulsar_subscription_unacked_messages", subscription="idle", **labels) == 50
        # Backlogs count messages, not the (fewer) batch entries.
        assert s.value("pulsar_subscription_back_log", subscription="idle", **labels) == 50
        assert s.value("pulsar_msg_backlog", **labels) == 50
        assert s.value("pulsar_subscription_unacked_messages", subscription="acked", **labels) == 0
        assert s.value("pulsar_subscriptions_count", **labels) == 2
        assert s.value("pulsar_producers_count", **labels) == 1
        assert s.value("pulsar_consumers_count", **labels) == 2
        assert s.value("pulsar_storage_size", **labels) >= s.value(
            "pulsar_in_bytes_total", **labels
        )
        assert s.value("pulsar_storage_backlog_size", **labels) > 0
        assert s.value("pulsar_active_connections") >= 1
        assert s.value("pulsar_broker_lookup_answers_total") >= 1
        assert s.value("pulsar_ml_count") >= 1
        assert 0 < s.value("pulsar_lb_memory_usage") < 100  # percent, as Pulsar
        assert s.types["pulsar_in_messages_total"] == "gauge"  # Pulsar's type
        assert s.types["pulsar_broker_lookup"] == "summary"


def test_rates_and_per_interval_buckets_move_with_traffic(metrics_cluster, topic):
    port = _port(metrics_cluster, "broker")
    labels = {"topic": _full(topic)}
    with Client(metrics_cluster.service_url) as c:
        sub = c.subscribe(topic, "s", initial_position=InitialPosition.Earliest)
        p = c.create_producer(topic, batching_enabled=False)

        def shown() -> Scrape | None:
            # Keep storing: whichever interval is shown holds entries of ours.
            for _ in range(5):
                p.send_async(b"small", None)
            p.flush()
            x = scrape(port)
            return x if (x.get("pulsar_entry_size_count", **labels) or 0) > 0 else None

        s = wait_for(shown, 30, "an interval holding entries")
        count = s.value("pulsar_entry_size_count", **labels)
        assert s.value("pulsar_entry_size_le_128", **labels) == count  # small entries
        bands = [n for n in s.names() if n.startswith("pulsar_storage_write_latency_")]
        in_bands = sum(
            s.value(n, **labels) for n in bands if "_le_" in n and "overflow" not in n
        ) + s.value("pulsar_storage_write_latency_overflow", **labels)
        assert in_bands == s.value("pulsar_storage_write_latency_count", **labels) == count
        assert s.value("pulsar_storage_write_latency_sum", **labels) > 0  # microseconds
        assert s.value("pulsar_rate_in", **labels) > 0
        received = 0
        while received < 5:
            sub.acknowledge(sub.receive(timeout_millis=10000))
            received += 1
        assert scrape(port).value("pulsar_subscription_msg_rate_out", subscription="s",
                                  **labels) > 0  # fmt: skip
        # The next intervals hold nothing: the bucket gauges go back to 0.
        wait_for(
            lambda: scrape(port).get("pulsar_entry_size_count", **labels) == 0,
            20,
            "an empty interval",
        )


def test_a_subscription_at_its_unacked_limit_shows_blocked(metrics_cluster, topic):
    port = _port(metrics_cluster, "broker")
    labels = {"topic": _full(topic), "subscription": "greedy"}
    with Client(metrics_cluster.service_url) as c:
        greedy = c.subscribe(topic, "greedy", initial_position=InitialPosition.Earliest)
        p = c.create_producer(topic, batching_enabled=False)
        for i in range(UNACKED_LIMIT + 5):
            p.send(f"{i}".encode())
        got = [greedy.receive(timeout_millis=10000) for _ in range(UNACKED_LIMIT)]
        blocked = "pulsar_subscription_blocked_on_unacked_messages"
        s = wait_for(lambda: (x := scrape(port)).get(blocked, **labels) == 1 and x, 20, "blocked")
        assert s.value("pulsar_subscription_unacked_messages", **labels) == UNACKED_LIMIT
        assert s.value("pulsar_subscription_back_log", **labels) == UNACKED_LIMIT + 5
        for msg in got:
            greedy.acknowledge(msg)
        wait_for(lambda: scrape(port).get(blocked, **labels) == 0, 20, "unblocked")


def test_delayed_and_redelivered_messages_show_per_subscription(metrics_cluster, topic):
    port = _port(metrics_cluster, "broker")
    labels = {"topic": _full(topic), "subscription": "later"}
    with Client(metrics_cluster.service_url) as c:
        later = c.subscribe(
            topic,
            "later",
            consumer_type=ConsumerType.Shared,
            initial_position=InitialPosition.Earliest,
            negative_ack_redelivery_delay_ms=50,
        )
        p = c.create_producer(topic, batching_enabled=False)
        for i in range(5):
            p.send(f"{i}".encode())
        for _ in range(3):
            p.send(b"delayed", deliver_after=datetime.timedelta(minutes=10))
        held = later.receive(timeout_millis=10000)

        def shown() -> Scrape | None:
            # Keep redelivering: the rate is over the last stats interval (1 s).
            later.negative_acknowledge(held)
            later.receive(timeout_millis=10000)
            s = scrape(port)
            ok = (
                s.get("pulsar_subscription_delayed", **labels) == 3
                and (s.get("pulsar_subscription_msg_rate_redeliver", **labels) or 0) > 0
            )
            return s if ok else None

        s = wait_for(shown, 30, "delayed and redelivered figures")
        assert s.value("pulsar_subscription_back_log", **labels) == 8
        assert s.value("pulsar_subscription_back_log_no_delayed", **labels) == 5


def test_counters_go_on_across_an_unload_and_a_reload(metrics_cluster, topic):
    port = _port(metrics_cluster, "broker")
    labels = {"topic": _full(topic)}
    with Client(metrics_cluster.service_url) as c, Admin(metrics_cluster.service_url) as admin:
        p = c.create_producer(topic, batching_enabled=False)
        for _ in range(10):
            p.send(b"before")
        before = scrape(port)
        assert before.value("pulsar_in_messages_total", **labels) == 10
        admin.namespaces.unload("public/default")
        for _ in range(5):
            p.send(b"after")  # the producer reconnects; the topic loads here again
        after = scrape(port)
        loads = "pulsar_topic_load_times_count"
        assert after.value(loads) > before.value(loads)  # it was loaded again
        assert after.value("pulsar_in_messages_total", **labels) == 15


def test_scrapes_during_unloads_and_reloads_never_fail_or_count_twice(metrics_cluster, topic):
    port = _port(metrics_cluster, "broker")
    labels = {"topic": _full(topic)}
    sent: list[int] = []
    stop = threading.Event()
    errors: list[BaseException] = []

    def produce() -> None:
        with Client(metrics_cluster.service_url, operation_timeout_seconds=30) as c:
            p = c.create_producer(topic, batching_enabled=False)
            while not stop.is_set() and len(sent) < 100_000:
                try:
                    p.send(b"x")
                except BaseException as exc:  # reported below
                    errors.append(exc)
                    return
                sent.append(1)

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    seen: list[float] = []
    seen_unloads: list[int] = []
    try:
        wait_for(lambda: len(sent) > 20, 30, "sends to start")
        with Admin(metrics_cluster.service_url) as admin:
            for _ in range(4):
                admin.namespaces.unload("public/default")
                seen_unloads.append(1)
                for _ in range(5):
                    # At most one send in flight, and a send whose answer an
                    # unload cut off may be stored twice (resent; no dedup here).
                    attempted = len(sent) + 1 + len(seen_unloads)
                    value = scrape(port).get("pulsar_in_messages_total", **labels)
                    if value is not None:
                        assert value <= attempted
                        seen.append(value)
                before = len(sent)
                wait_for(lambda: len(sent) > before + 5, 30, "sends to go on")  # noqa: B023
    finally:
        stop.set()
        producer.join(30)
    assert not errors, errors
    assert seen == sorted(seen), "the counter went down"
    final = scrape(port).value("pulsar_in_messages_total", **labels)
    assert len(sent) <= final <= len(sent) + len(seen_unloads)


# Odd but valid: the topic part may hold spaces, quotes, braces, commas and
# any letter; a subscription name may hold anything.
ODD_TOPIC = "odd top'ic {a=b}, ü ✓ ;&()"
ODD_SUBSCRIPTION = 'sub "quoted" \\ back\nslash'


def test_odd_names_come_out_escaped_and_parse_back(metrics_cluster):
    port = _port(metrics_cluster, "broker")
    with Client(metrics_cluster.service_url) as c:
        c.subscribe(ODD_TOPIC, ODD_SUBSCRIPTION, initial_position=InitialPosition.Earliest)
        c.create_producer(ODD_TOPIC, batching_enabled=False).send(b"x")
        s = wait_for(
            lambda: (
                (x := scrape(port)).get(
                    "pulsar_subscription_back_log",
                    topic=_full(ODD_TOPIC),
                    subscription=ODD_SUBSCRIPTION,
                )
                == 1
                and x
            ),
            20,
            "the odd topic's series",
        )
        assert s.value("pulsar_in_messages_total", topic=_full(ODD_TOPIC)) == 1


def test_partitions_are_labelled_by_their_own_names(metrics_cluster, topic):
    port = _port(metrics_cluster, "broker")
    with Client(metrics_cluster.service_url) as c, Admin(metrics_cluster.service_url) as admin:
        admin.topics.create_partitioned_topic(topic, 2)
        p = c.create_producer(topic, batching_enabled=False)
        for i in range(4):
            p.send(f"{i}".encode(), partition_key=f"k{i}")
        s = scrape(port)
        per_partition = [
            s.get("pulsar_in_messages_total", topic=_full(f"{topic}-partition-{i}")) or 0
            for i in range(2)
        ]
        assert sum(per_partition) == 4
        assert not s.matching("pulsar_in_messages_total", topic=_full(topic))
        assert all("partition" not in dict(lab) for (_, lab) in s.samples)  # split is off


def test_the_bookie_exports_bookkeepers_series(metrics_cluster, topic):
    port = _port(metrics_cluster, "bookie")
    before = scrape(port)
    with Client(metrics_cluster.service_url) as c:
        p = c.create_producer(topic, batching_enabled=False)
        for _ in range(10):
            p.send(b"0123456789")
    s = scrape(port)
    for name in (
        "bookie_SERVER_STATUS",
        "bookkeeper_server_ADD_ENTRY_REQUEST",
        "bookkeeper_server_READ_ENTRY_REQUEST",
        "bookie_WRITE_BYTES",
        "bookie_READ_BYTES",
        "bookie_journal_JOURNAL_SYNC",
        "bookie_ledgers_count",
        "bookie_entries_count",
        "bookie_ledger_writable_dirs",
    ):
        assert name in s.types, name
    assert s.value("bookie_SERVER_STATUS") == 1
    added = s.value("bookkeeper_server_ADD_ENTRY_REQUEST_count", success="true") - before.value(
        "bookkeeper_server_ADD_ENTRY_REQUEST_count", success="true"
    )
    assert added >= 10  # one per entry
    assert s.value("bookie_WRITE_BYTES") - before.value("bookie_WRITE_BYTES") >= 100
    assert s.types["bookie_WRITE_BYTES"] == "counter"  # BookKeeper's: no _total
    assert s.value("bookie_journal_JOURNAL_SYNC_count") > before.value(
        "bookie_journal_JOURNAL_SYNC_count"
    )
    assert s.value("bookie_ledgers_count") >= 1
    entries_dir = Path(metrics_cluster.data_dir) / "bookie" / "entries"
    usage = "bookie_ledger_dir_" + "".join(c if c.isalnum() else "_" for c in str(entries_dir))
    assert 0 < s.value(usage + "_usage") <= 100


def test_the_metastore_exports_etcds_raft_series_and_pulsars_ops(metrics_cluster):
    port = _port(metrics_cluster, "metastore")
    s = scrape(port)
    assert s.value("etcd_server_is_leader") == 1 and s.value("etcd_server_has_leader") == 1
    assert s.value("etcd_server_leader_changes_seen_total") >= 1
    committed = s.value("etcd_server_proposals_committed_total")
    assert committed >= s.value("etcd_server_proposals_applied_total") > 0
    assert s.value("magnetar_metastore_raft_term") >= 1
    assert s.value("magnetar_metastore_sessions") >= 2  # the bookie's and the broker's
    assert s.value("etcd_debugging_mvcc_keys_total") > 0
    assert s.value("etcd_debugging_lease_granted_total") >= 2
    buckets = {
        dict(lab)["le"]
        for (n, lab) in s.samples
        if n == "pulsar_metadata_store_ops_latency_ms_bucket" and ("type", "put") in lab
    }
    assert buckets == {
        "1.0", "3.0", "5.0", "10.0", "20.0", "50.0", "100.0", "200.0", "500.0", "1000.0",
        "2000.0", "5000.0", "+Inf",
    }  # fmt: skip
    assert s.value("pulsar_metadata_store_ops_latency_ms_count", type="put", status="success") > 0
    assert s.value("pulsar_metadata_store_put_bytes_total") > 0
    assert s.value("etcd_disk_wal_fsync_duration_seconds_count") > 0


@pytest.mark.parametrize("role", ["metastore", "bookie", "broker"])
def test_every_process_serves_status_and_metrics_and_nothing_else(metrics_cluster, role):
    port = _port(metrics_cluster, role)
    assert get(port, "/status.html") == (200, "OK\n")
    for path in ("/metrics", "/metrics/"):
        status, text = get(port, path)
        assert status == 200 and "# TYPE " in text
    for path in ("/", "/admin/v2/clusters", "/metricsx", "/status"):
        assert get(port, path)[0] == 404, path


def test_docs_list_every_series_a_process_exports(metrics_cluster, topic):
    """docs/metrics.md names every family a live scrape shows (so a new or
    renamed series cannot go undocumented)."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text()
    with Client(metrics_cluster.service_url) as c:
        c.subscribe(topic, "s", initial_position=InitialPosition.Earliest)
        c.create_producer(topic).send(b"x")
    missing = []
    for role in ("metastore", "bookie", "broker"):
        for name in scrape(_port(metrics_cluster, role)).types:
            if name.startswith(("process_", "python_")):
                continue  # prometheus-client's own
            if name.startswith("bookie_ledger_dir_") and name.endswith("_usage"):
                name = "bookie_ledger_dir_<path>_usage"
            if f"`{name}`" not in doc:
                missing.append((role, name))
    assert not missing, missing


def test_backlogs_count_messages_of_batches_across_a_reload(metrics_cluster, topic):
    """Batches of different sizes (a table per entry), then an unload: the
    closing owner records the ledger's message total, and the next load
    counts the inherited ledger's backlog in messages, not entries."""
    port = _port(metrics_cluster, "broker")
    labels = {"topic": _full(topic), "subscription": "s"}
    with Client(metrics_cluster.service_url) as c, Admin(metrics_cluster.service_url) as admin:
        admin.topics.create_subscription(topic, "s", earliest=True)
        for size, count in ((3, 9), (7, 14)):  # 3 entries of 3, then 2 of 7
            p = c.create_producer(
                topic, batching_max_messages=size, batching_max_publish_delay_ms=60_000
            )
            for i in range(count):
                p.send_async(f"{size}:{i}".encode(), None)
            p.flush()
            p.close()
        assert scrape(port).value("pulsar_subscription_back_log", **labels) == 23
        admin.namespaces.unload("public/default")
        # Loaded again by the stats call, with the earlier ledger inherited.
        assert admin.topics.stats(topic)["subscriptions"]["s"]["msgBacklog"] == 23
        assert scrape(port).value("pulsar_subscription_back_log", **labels) == 23
