"""Settings of the broker process (section ``[broker]``). Names follow
Pulsar's ``broker.conf`` in snake_case where Pulsar has the concept."""

from __future__ import annotations

from dataclasses import dataclass

from broker.schema_compatibility import strategy_of
from protos.channel import MAX_GRPC_MESSAGE_BYTES
from protos.errors import InvalidArgumentError
from protos.security_settings import (
    authentication_enabled_setting,
    authorization_enabled_setting,
    broker_client_auth_params_setting,
    broker_client_tls_enabled_setting,
    metrics_tls_enabled_setting,
    port_tls_setting,
    superuser_roles_setting,
    tls_certificate_file_path_setting,
    tls_key_file_path_setting,
    tls_require_trusted_client_cert_on_connect_setting,
    tls_trust_certs_file_path_setting,
    token_auth_claim_setting,
    token_cache_max_entries_setting,
    token_public_key_setting,
    token_secret_key_setting,
)
from protos.settings import (
    SettingsError,
    advertised_address_setting,
    bind_address_setting,
    http_max_connections_setting,
    http_min_render_interval_ms_setting,
    malloc_arenas_setting,
    malloc_trim_threshold_mb_setting,
    metrics_port_setting,
    setting,
    shutdown_timeout_setting,
)


@dataclass(frozen=True)
class BrokerSettings:
    bind_address: str = bind_address_setting()
    advertised_address: str = advertised_address_setting()
    port: int = setting(
        6650, "gRPC port for clients and admin (0 = pick a free port, -1 = off: TLS only)."
    )
    broker_service_port_tls: int = port_tls_setting(6651, "clients and admin")
    metrics_port: int = metrics_port_setting(8080)
    http_max_connections: int = http_max_connections_setting()
    http_min_render_interval_ms: int = http_min_render_interval_ms_setting()
    metastore: str = setting("127.0.0.1:2379", "Metastore address(es), comma-separated.")
    cluster_name: str = setting("standalone", "Name of the cluster this broker belongs to.")
    max_message_size: int = setting(
        5242880,
        "Largest entry (a message or a whole batch) a producer may publish, in bytes (with "
        "dispatcher_max_read_size_bytes at most 15 MiB).",
    )
    allow_auto_topic_creation: bool = setting(
        True, "Create a persistent topic of an existing namespace on first use."
    )
    allow_auto_subscription_creation: bool = setting(
        True,
        "Create a durable subscription when a consumer first names it; when off, only "
        "subscriptions made with `topics create-subscription` can be used.",
    )
    managed_ledger_default_ensemble_size: int = setting(
        2, "Bookies per ledger (E); `magnetar standalone` uses 1."
    )
    managed_ledger_default_write_quorum: int = setting(
        2, "Copies of each entry (Qw); `magnetar standalone` uses 1."
    )
    managed_ledger_default_ack_quorum: int = setting(
        2, "Copies confirmed before a publish is acknowledged (Qa); `magnetar standalone` uses 1."
    )
    keep_alive_interval_seconds: int = setting(
        30,
        "Pings each client connection this often; one not answered within as long is "
        "dropped, with its producers and consumers (Pulsar's keepAliveIntervalSeconds; "
        "values under 1 count as 1).",
    )
    schema_compatibility_strategy: str = setting(
        "BACKWARD",
        "How a new schema version must relate to a topic's registered ones (ALWAYS_INCOMPATIBLE, "
        "ALWAYS_COMPATIBLE, BACKWARD, FORWARD, FULL and their _TRANSITIVE forms); a "
        "namespace's or topic's schema_compatibility_strategy policy overrides it.",
    )
    is_allow_auto_update_schema_enabled: bool = setting(
        True,
        "Producers and consumers may register new schema versions (when compatible); when "
        "off only `schemas upload` does. A namespace's is_allow_auto_update_schema overrides it.",
    )
    schema_validation_enforced: bool = setting(
        False,
        "Refuse producers without a schema on topics that have one; a namespace's "
        "schema_validation_enforced policy overrides it.",
    )
    max_schema_versions_per_topic: int = setting(
        1000, "Schema versions (deletions included) one topic may have; more are refused."
    )
    compaction_max_keys: int = setting(
        1000000,
        "Live keys one compaction run may track; a topic with more fails its run (nothing "
        "changes). Each key costs about 200 bytes during a run.",
    )
    compaction_read_batch_entries: int = setting(
        100,
        "Entries a compaction reads, or writes to its ledger, per call (one bookie answer "
        "carries them all: keep entries x size under gRPC's 16 MiB message limit).",
    )
    broker_service_compaction_threshold_in_bytes: int = setting(
        0,
        "Compact a topic automatically once this many bytes are not compacted yet (0 = off); a "
        "namespace's or topic's compaction-threshold policy overrides it.",
    )
    broker_service_compaction_monitor_interval_in_seconds: int = setting(
        60, "How often the broker checks its topics against their compaction threshold."
    )
    broker_deduplication_enabled: bool = setting(
        False,
        "Drop resent messages (same producer name and sequence id); a namespace's "
        "deduplicationEnabled policy overrides it.",
    )
    broker_deduplication_entries_interval: int = setting(
        1000, "Stored entries between two snapshots of a topic's deduplication state."
    )
    broker_deduplication_max_number_of_producers: int = setting(
        10000, "Producer names whose sequence ids a topic remembers."
    )
    managed_ledger_max_entries_per_ledger: int = setting(
        50000, "A ledger is closed and a new one started after this many entries..."
    )
    managed_ledger_max_size_per_ledger_mb: int = setting(2048, "...or this many MB...")
    managed_ledger_min_ledger_rollover_time_minutes: float = setting(
        10, "...but not before it is this old."
    )
    managed_ledger_max_ledger_rollover_time_minutes: float = setting(
        240, "A ledger older than this is rolled over anyway (if it holds an entry)."
    )
    managed_ledger_inactive_ledger_rollover_seconds: float = setting(
        300,
        "An idle ledger that every durable cursor has consumed is rolled over after this "
        "long, so its data can be deleted (0 = never).",
    )
    managed_ledger_cache_size_mb: int = setting(
        64, "Memory for recently added entries served to tailing consumers."
    )
    managed_ledger_message_counts_max_entries: int = setting(
        10_000_000,
        "Entries (8 bytes each) of the per-entry message-count tables the broker keeps for "
        "backlogs in messages (needed only when batch sizes vary); past it a topic growing a "
        "table keeps only the totals of its oldest ledgers, and backlogs inside those become "
        "estimates (docs/metrics.md).",
    )
    managed_ledger_max_outstanding_adds: int = setting(
        10000, "Entries a topic may have in flight to bookies before publishes wait."
    )
    managed_ledger_failed_add_hold_seconds: float = setting(
        10.0,
        "When a topic's ledger fails (a bookie lost and no other to take its place), its "
        "unconfirmed adds wait this long for the broker to recover that ledger and open a new "
        "one: those the recovery finds stored are answered from the failed ledger, the others "
        "are stored in the new one. Past it they fail with PersistenceError (0 = at once), "
        "which ends the producers' streams: they reconnect and send them again. Keep it under "
        "the producers' send timeout (30 s): a send timed out while held may still be stored.",
    )
    managed_ledger_cursor_persist_interval_ms: int = setting(
        1000, "A cursor's acknowledgement state is written at most this often (and on close)."
    )
    managed_ledger_max_unacked_ranges_to_persist: int = setting(
        10000, "Individually acknowledged ranges written with a cursor; the rest stay in memory."
    )
    dispatcher_max_read_batch_size: int = setting(100, "Most entries read for one dispatch.")
    dispatcher_max_read_size_bytes: int = setting(
        5242880,
        "Most bytes read for one dispatch (a read may pass it by one entry; with "
        "max_message_size at most 15 MiB, so that a delivery fits one gRPC message).",
    )
    max_topics: int = setting(100000, "Topics one broker serves at once.")
    max_producers_per_topic: int = setting(10000, "Producers connected to one topic.")
    max_consumers_per_subscription: int = setting(10000, "Consumers of one subscription.")
    max_client_properties_bytes: int = setting(
        16384,
        "Most bytes of the properties (keys and values) a producer or consumer brings as its "
        "metadata (shown as 'metadata' in topic stats); more is refused.",
    )
    max_unacked_messages_per_consumer: int = setting(
        50000,
        "Unacknowledged messages a consumer may hold; at the limit it gets nothing more "
        "until half are acknowledged (0 = no limit).",
    )
    max_unacked_messages_per_subscription: int = setting(
        200000,
        "Unacknowledged messages of a whole subscription; at the limit dispatch stops "
        "until half are acknowledged (0 = no limit).",
    )
    subscription_key_shared_use_consistent_hashing: bool = setting(
        False,
        "Key_Shared AUTO_SPLIT consumers share a consistent-hashing ring (100 points each) "
        "instead of splitting hash ranges (Pulsar 4 defaults to true).",
    )
    key_shared_look_ahead_msg_in_replay_threshold_per_subscription: int = setting(
        20000,
        "Key_Shared: entries waiting for a busy or draining key before the subscription "
        "stops reading new ones.",
    )
    default_number_of_namespace_bundles: int = setting(
        4, "Bundles of a namespace whose policies do not list its bundle boundaries."
    )
    load_balancer_enabled: bool = setting(
        True,
        "Publish this broker's load report and take part in electing the load manager leader, "
        "which places, sheds and splits bundles.",
    )
    load_balancer_report_interval_ms: int = setting(
        5000, "How often a broker publishes its load report (and checks who leads)."
    )
    load_balancer_max_number_of_bundles_in_bundle_load_report: int = setting(
        1000, "Bundles whose load a broker's report lists, the busiest first."
    )
    load_balancer_shedding_enabled: bool = setting(
        True, "The leader unloads bundles from brokers loaded above the average."
    )
    load_balancer_shedding_interval_minutes: float = setting(
        1.0, "How often the leader runs shedding and the auto-split check."
    )
    load_balancer_shedding_grace_period_minutes: float = setting(
        30.0, "A bundle the leader moved is not moved again for this long."
    )
    load_balancer_broker_threshold_shedder_percentage: float = setting(
        10.0,
        "ThresholdShedder: a broker whose usage is this many percentage points above the "
        "cluster average sheds bundles.",
    )
    load_balancer_history_resource_percentage: float = setting(
        0.9,
        "Weight of the past in a broker's smoothed usage (usage = h * previous + (1 - h) * "
        "current); 0 uses the latest report only.",
    )
    load_balancer_broker_overloaded_threshold_percentage: float = setting(
        85.0,
        "Placement leaves out brokers whose usage (the largest weighted resource) is above "
        "this percentage, unless every broker is.",
    )
    load_balancer_cpu_resource_weight: float = setting(1.0, "Weight of CPU in a broker's usage.")
    load_balancer_memory_resource_weight: float = setting(
        1.0, "Weight of memory in a broker's usage."
    )
    load_balancer_bandwidth_in_resource_weight: float = setting(
        1.0, "Weight of inbound bandwidth in a broker's usage."
    )
    load_balancer_bandwidth_out_resource_weight: float = setting(
        1.0, "Weight of outbound bandwidth in a broker's usage."
    )
    load_balancer_override_broker_nic_speed_gbps: float = setting(
        1.0, "Network capacity a broker's message bandwidth is measured against, in Gbit/s."
    )
    load_balancer_auto_bundle_split_enabled: bool = setting(
        True, "The leader splits bundles over any of the thresholds below into halves."
    )
    load_balancer_auto_unload_split_bundles_enabled: bool = setting(
        True,
        "Unload the halves of an automatic split at once, so they can land elsewhere; only "
        "while another broker reports load (with one broker the halves stay loaded where "
        "they are: unloading them would only make their topics unavailable for a while).",
    )
    load_balancer_namespace_bundle_max_topics: int = setting(
        1000, "Split a bundle serving more topics than this."
    )
    load_balancer_namespace_bundle_max_sessions: int = setting(
        1000, "Split a bundle with more producers plus consumers than this."
    )
    load_balancer_namespace_bundle_max_msg_rate: float = setting(
        30000.0, "Split a bundle whose messages in + out per second exceed this."
    )
    load_balancer_namespace_bundle_max_bandwidth_mbytes: float = setting(
        100.0, "Split a bundle whose bytes in + out per second exceed this many MB."
    )
    load_balancer_namespace_maximum_bundles: int = setting(
        128, "Automatic splits stop when a namespace has this many bundles."
    )
    take_over_stale_bundles: bool = setting(
        False,
        "Take over bundle records held by another metastore session at once instead of "
        "waiting for it to expire (`magnetar standalone` sets it: its broker is the only one).",
    )
    max_namespaces_cached: int = setting(
        10000,
        "Namespaces whose bundle boundaries, policies (read by topic loads, while the policy "
        "watch runs) and topic count (for max_topics_per_namespace) a broker keeps in memory.",
    )
    max_concurrent_topic_closes: int = setting(
        64,
        "Topics a broker closes at once when it closes many (a released bundle, shutdown), and "
        "topics a forced namespace deletion deletes at once: each close writes its ledger's "
        "end and its ledger list to the metastore, so a bundle of a thousand idle topics "
        "closed one by one stayed unavailable for seconds.",
    )
    max_num_partitions_per_partitioned_topic: int = setting(
        1000, "Most partitions a partitioned topic may be created with."
    )
    acknowledgment_at_batch_index_level_enabled: bool = setting(
        False,
        "Keep acknowledgements of single messages of a batch (consumers with "
        "batch_index_ack_enabled); they are never redelivered.",
    )
    delayed_delivery_enabled: bool = setting(
        True, "Shared and Key_Shared subscriptions hold messages until their deliver-at time."
    )
    delayed_delivery_tick_time_ms: int = setting(
        1000, "Granularity of delayed delivery: due messages are checked this often at least."
    )
    is_delayed_delivery_deliver_at_time_strict: bool = setting(
        False,
        "Never deliver before deliver-at; when false a message may go up to one tick early "
        "(fewer wake-ups).",
    )
    delayed_delivery_max_num_tracked_messages: int = setting(
        500000,
        "Delayed entries one subscription holds in memory (~150 B each); when full it reads "
        "no new entries until some are due.",
    )
    max_subscriptions_per_topic: int = setting(10000, "Subscriptions of one topic.")
    max_pending_publish_entries_per_producer: int = setting(
        10000, "Entries of one producer awaiting storage before the broker stops reading it."
    )
    max_producer_streams_per_connection: int = setting(
        10000,
        "Producers one client connection may have open on this broker at once (the SDK "
        "puts every producer of a connection on one `ProduceMany` stream).",
    )
    max_pending_publish_requests_per_connection: int = setting(
        10000,
        "Publish requests a `ProduceMany` connection may have read ahead of its producers, "
        "and answers it may hold unsent: past either the connection is not read until "
        "its producers take some or its answers go.",
    )
    stats_update_frequency_in_secs: float = setting(
        60.0,
        "The stats interval: rates in `topics stats`, load reports and Prometheus are the "
        "growth over this many seconds (a sliding window), and Pulsar's bucketed gauges "
        "(pulsar_storage_write_latency_le_*, pulsar_entry_size_le_*) and the summaries' "
        "quantiles show the last complete interval.",
    )
    expose_topic_level_metrics_in_prometheus: bool = setting(
        True,
        "Topic and subscription series (labels topic, subscription) on /metrics; when off, "
        "the same names are summed per namespace and no subscription series are exported "
        "(for brokers with very many topics).",
    )
    split_topic_and_partition_label_in_prometheus: bool = setting(
        False,
        "Label a partition's series with its partitioned topic's name and partition=\"i\" "
        '(partition="-1" for other topics) instead of the partition\'s own name.',
    )
    max_unloaded_topic_metrics: int = setting(
        10000,
        "Topics no longer served here whose counters are kept, so that a reload here goes on "
        "counting where it stopped; beyond it the oldest are folded into their namespace's "
        "totals.",
    )
    default_retention_time_in_minutes: int = setting(
        0,
        "How long a topic keeps ledgers every subscription has consumed (-1 = no time limit); "
        "with default_retention_size_in_mb 0 too, consumed ledgers go at once. A namespace's "
        "retention_policies override it.",
    )
    default_retention_size_in_mb: int = setting(
        0, "How much consumed data a topic keeps (-1 = no size limit); see the line above."
    )
    stats_export_interval_s: float = setting(
        60.0,
        "Every this many seconds the broker snapshots every topic it owns (subscriptions "
        "included) and publishes the records to persistent://magnetar/system/stats "
        "(docs/stats-schema.md). 0 = no stats history.",
    )
    stats_export_batch_max_records: int = setting(
        1000, "Records per message batch of a stats snapshot (one stored entry each)."
    )
    stats_export_max_pending_snapshots: int = setting(
        2,
        "Snapshots waiting to be published while the stats topic cannot take them (its "
        "broker moving, bookies down); beyond it the oldest is dropped and counted.",
    )
    stats_retention_time_minutes: int = setting(
        10080,
        "Retention of the stats topic (namespace magnetar/system) unless that namespace has "
        "retention_policies: 7 days (-1 = no time limit).",
    )
    stats_retention_size_mb: int = setting(
        -1, "Retention size of the stats topic (-1 = no size limit)."
    )
    ttl_duration_default_in_seconds: int = setting(
        0,
        "Message TTL of topics whose namespace and topic set none: unacknowledged messages "
        "older than this are acknowledged by the expiry check (0 = never).",
    )
    message_expiry_check_interval_s: float = setting(
        300.0, "How often the broker expires messages past their TTL (Pulsar: 5 minutes)."
    )
    backlog_quota_default_limit_bytes: int = setting(
        -1, "destination_storage backlog quota of namespaces that set none, in bytes (-1 = none)."
    )
    backlog_quota_default_limit_second: int = setting(
        -1, "message_age backlog quota of namespaces that set none, in seconds (-1 = none)."
    )
    backlog_quota_default_retention_policy: str = setting(
        "producer_request_hold",
        "What the default backlog quotas do when exceeded: producer_request_hold, "
        "producer_exception or consumer_backlog_eviction.",
    )
    backlog_quota_check_interval_s: float = setting(
        60.0, "How often the broker checks every topic's backlog against its quotas."
    )
    retention_check_interval_s: float = setting(
        120.0, "How often the broker deletes ledgers past their retention."
    )
    dispatch_throttling_rate_per_topic_in_msg: int = setting(
        0, "Messages per second dispatched from one topic when no policy sets it (0 = no limit)."
    )
    dispatch_throttling_rate_per_topic_in_byte: int = setting(
        0, "Bytes per second dispatched from one topic when no policy sets it (0 = no limit)."
    )
    dispatch_throttling_rate_per_subscription_in_msg: int = setting(
        0,
        "Messages per second dispatched to one subscription when no policy sets it (0 = no limit).",
    )
    dispatch_throttling_rate_per_subscription_in_byte: int = setting(
        0, "Bytes per second dispatched to one subscription when no policy sets it (0 = no limit)."
    )
    max_publish_rate_per_topic_in_messages: int = setting(
        0, "Messages per second one topic accepts when no policy sets it (0 = no limit)."
    )
    max_publish_rate_per_topic_in_bytes: int = setting(
        0, "Bytes per second one topic accepts when no policy sets it (0 = no limit)."
    )
    subscribe_throttling_rate_per_consumer: int = setting(
        0, "Subscribes one consumer name may make per period when no policy sets it (0 = no limit)."
    )
    subscribe_rate_period_per_consumer_in_second: int = setting(
        30, "The period of subscribe_throttling_rate_per_consumer, in seconds."
    )
    max_consumers_per_topic: int = setting(10000, "Consumers of one topic, all subscriptions.")
    max_topics_per_namespace: int = setting(
        1000000, "Topics one namespace may hold when its policies set no lower limit."
    )
    allow_auto_topic_creation_type: str = setting(
        "non-partitioned",
        "What a topic created on first use is: non-partitioned or partitioned (with "
        "default_num_partitions partitions).",
    )
    default_num_partitions: int = setting(
        1,
        "Partitions of a topic created on first use when allow_auto_topic_creation_type is partitioned.",
    )
    subscription_expiration_time_minutes: int = setting(
        0,
        "A durable subscription with no consumer and no activity for this long is deleted "
        "(0 = never), unless its namespace sets otherwise.",
    )
    subscription_expiry_check_interval_s: float = setting(
        300.0, "How often the broker deletes expired subscriptions."
    )
    broker_delete_inactive_topics_enabled: bool = setting(
        False,
        "Delete topics that have no producers and no consumers and stay so for "
        "broker_delete_inactive_topics_max_inactive_duration_seconds (Pulsar defaults to true; "
        "Magnetar keeps topics unless told, docs/admin.md).",
    )
    broker_delete_inactive_topics_mode: str = setting(
        "delete_when_no_subscriptions",
        "Which inactive topics go: delete_when_no_subscriptions or "
        "delete_when_subscriptions_caught_up.",
    )
    broker_delete_inactive_topics_max_inactive_duration_seconds: int = setting(
        60, "How long a topic must be inactive before it is deleted."
    )
    inactive_topic_check_interval_s: float = setting(
        60.0, "How often the broker looks for inactive topics to delete."
    )
    ledger_id_block_size: int = setting(
        64,
        "New ledger ids the broker reserves with one metastore write (the counter is "
        "replicated and fsynced, the most expensive step of creating a topic). A topic's "
        "ledger ids still grow: a reserved id below its last ledger's is skipped. Ids "
        "reserved and not used when the broker stops are never used. 1 = one write per ledger.",
    )
    bookie_list_max_age_ms: int = setting(
        1000,
        "How long the list of registered bookies read for a new ledger's ensemble serves "
        "later new ledgers. A bookie gone in that time may be chosen: its first add fails and "
        "it is replaced from a list read afresh (as every ensemble change reads it). "
        "0 = read it for every new ledger.",
    )
    bookie_timeout_ms: int = setting(
        10000,
        "Add and read timeout towards bookies: a bookie that does not answer an add this "
        "long (cut off by the network, or hung) is replaced in the ensemble. Pulsar ships "
        "30 s (bookkeeperClientTimeoutInSeconds), as long as its producers' send timeout; "
        "10 s replaces a silent bookie before the SDK's 30 s send timeout fails a send.",
    )
    malloc_trim_threshold_mb: int = malloc_trim_threshold_mb_setting()
    malloc_arenas: int = malloc_arenas_setting()
    session_ttl_ms: int = setting(10000, "TTL of the broker's metastore session.")
    authentication_enabled: bool = authentication_enabled_setting()
    authorization_enabled: bool = authorization_enabled_setting()
    superuser_roles: str = superuser_roles_setting()
    token_secret_key: str = token_secret_key_setting()
    token_public_key: str = token_public_key_setting()
    token_auth_claim: str = token_auth_claim_setting()
    token_cache_max_entries: int = token_cache_max_entries_setting()
    broker_client_auth_params: str = broker_client_auth_params_setting()
    broker_client_tls_enabled: bool = broker_client_tls_enabled_setting()
    tls_certificate_file_path: str = tls_certificate_file_path_setting()
    tls_key_file_path: str = tls_key_file_path_setting()
    tls_trust_certs_file_path: str = tls_trust_certs_file_path_setting()
    tls_require_trusted_client_cert_on_connect: bool = (
        tls_require_trusted_client_cert_on_connect_setting()
    )
    metrics_tls_enabled: bool = metrics_tls_enabled_setting()
    authorization_cache_max_namespaces: int = setting(
        10000,
        "Namespaces whose grants and tenant admins the broker remembers for authorization "
        "(forgotten when their records change). 0 = read them for every call.",
    )
    shutdown_timeout_s: float = shutdown_timeout_setting()
    log_level: str = setting("INFO", "Logging level.")

    def __post_init__(self) -> None:
        try:
            strategy_of(self.schema_compatibility_strategy)
        except InvalidArgumentError as exc:
            raise SettingsError(f"schema_compatibility_strategy: {exc.message}") from None
        if self.ledger_id_block_size < 1:
            raise SettingsError(
                f"ledger_id_block_size is {self.ledger_id_block_size}; it must be at least 1"
            )
        if self.bookie_list_max_age_ms < 0:
            raise SettingsError(
                f"bookie_list_max_age_ms is {self.bookie_list_max_age_ms}; it must be at least 0"
            )
        if not 0 <= self.managed_ledger_failed_add_hold_seconds <= 3600:
            raise SettingsError(
                "managed_ledger_failed_add_hold_seconds is "
                f"{self.managed_ledger_failed_add_hold_seconds:g}; it must be 0 to 3600"
            )
        if self.max_concurrent_topic_closes < 1:
            raise SettingsError(
                f"max_concurrent_topic_closes is {self.max_concurrent_topic_closes}; "
                "it must be at least 1"
            )
        # One delivery holds a read's bytes and may pass them by one entry; the
        # framing of its entries gets the last MiB of gRPC's message limit.
        delivery = self.dispatcher_max_read_size_bytes + self.max_message_size
        if delivery > MAX_GRPC_MESSAGE_BYTES - (1 << 20):
            raise SettingsError(
                f"dispatcher_max_read_size_bytes + max_message_size = {delivery}: more than "
                f"{MAX_GRPC_MESSAGE_BYTES - (1 << 20)} (a delivery must fit one gRPC message, "
                f"{MAX_GRPC_MESSAGE_BYTES} bytes)"
            )
