"""Settings of the bookie process (section ``[bookie]``)."""

from __future__ import annotations

from dataclasses import dataclass

from protos.channel import MAX_GRPC_MESSAGE_BYTES
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

# A read response holds up to this bound, or one entry bigger than it (an
# entry is at most the broker's max_message_size, kept under 15 MiB).
MAX_BYTES_PER_READ_RESPONSE = MAX_GRPC_MESSAGE_BYTES // 2


@dataclass(frozen=True)
class BookieSettings:
    bind_address: str = bind_address_setting()
    advertised_address: str = advertised_address_setting()
    port: int = setting(3181, "gRPC port (0 = pick a free port, -1 = off: TLS only).")
    bookie_port_tls: int = port_tls_setting(3182, "brokers")
    metrics_port: int = metrics_port_setting(8000)
    http_max_connections: int = http_max_connections_setting()
    http_min_render_interval_ms: int = http_min_render_interval_ms_setting()
    data_dir: str = setting("./data/bookie", "Directory of the RocksDB entry store and cookie.")
    metastore: str = setting("127.0.0.1:2379", "Metastore address(es), comma-separated.")
    bookie_id: str = setting(
        "", "Stable id of this bookie; empty = the id in the cookie, or a new one."
    )
    journal_sync: bool = setting(
        True, "fdatasync the journal after every group commit, before acknowledging adds."
    )
    group_commit_max_wait_ms: float = setting(
        0.0,
        "Extra time a group commit waits for more adds once it has one. 0 = none: adds "
        "that arrive during one fsync form the next group.",
    )
    group_commit_max_entries: int = setting(2000, "Most entries in one group commit.")
    group_commit_max_bytes: int = setting(8388608, "Most payload bytes in one group commit.")
    journal_recycle_files: int = setting(
        4,
        "Journal files kept after their checkpoint to be rewritten as new ones; "
        "rewriting a file's cached pages costs far less CPU than filling fresh ones. "
        "0 = always new files.",
    )
    journal_max_size_mb: int = setting(
        16,
        "Size at which the journal moves to a new file and a checkpoint flushes "
        "RocksDB's memtables, after which the older files are no longer needed.",
    )
    write_buffer_size_mb: int = setting(
        16, "Size of one RocksDB memtable; a full one is flushed to an SST file."
    )
    direct_io_for_flush_and_compaction: bool = setting(
        True,
        "Write SST files (flushes, compactions) with O_DIRECT, past the page cache. "
        "Turned off with a warning where the file system refuses O_DIRECT (tmpfs).",
    )
    entry_run_max_bytes: int = setting(
        65536,
        "Size at which the entries of one add request are cut into another run: a "
        "run (one RocksDB value of consecutive records) is the unit a bookie writes "
        "and a point read fetches. Larger runs cost less per stored entry and more "
        "per point read.",
    )
    malloc_trim_threshold_mb: int = malloc_trim_threshold_mb_setting()
    malloc_arenas: int = malloc_arenas_setting()
    max_pending_adds_per_stream: int = setting(
        1000, "Add requests of one stream in flight before the bookie stops reading it."
    )
    max_entries_per_read_response: int = setting(
        500, "Most entries in one read-range response message."
    )
    max_bytes_per_read_response: int = setting(
        4194304,
        "Most payload bytes in one read response message (an entry bigger than this goes "
        "alone). gRPC refuses messages past 16 MiB, so at most 8 MiB is accepted.",
    )
    max_entries_per_read_request: int = setting(
        10000, "Most entry ids one ReadEntries request may list."
    )
    read_only_disk_usage_percent: float = setting(
        95.0,
        "Disk usage (percent of the data dir's file system) at which the bookie turns "
        "read-only: normal adds are refused, recovery adds and reads still served.",
    )
    disk_check_interval_ms: int = setting(5000, "How often disk usage is checked.")
    max_cached_ledger_states: int = setting(
        100000, "Ledger states (fenced flag, master key, LAC) kept in memory (LRU)."
    )
    session_ttl_ms: int = setting(10000, "TTL of the metastore session behind registration.")
    auto_recovery_daemon_enabled: bool = setting(
        True,
        "Run AutoRecovery in this bookie: a replication worker, and the auditor when this "
        "bookie wins its election (BookKeeper's autoRecoveryDaemonEnabled).",
    )
    lost_bookie_recovery_delay_s: int = setting(
        60,
        "How long a bookie must stay unregistered before the auditor re-replicates its "
        "ledgers. BookKeeper ships 0; 60 keeps a rolling restart from copying every "
        "ledger of the restarted bookie.",
    )
    open_ledger_rereplication_grace_period_ms: int = setting(
        30000,
        "How long the last fragment of a ledger still open is left to its writer (which "
        "replaces a failed bookie itself when it next writes) before the ledger is fenced "
        "and closed so the fragment can be copied.",
    )
    auditor_periodic_check_interval_s: int = setting(
        604800,
        "How often the auditor asks every live bookie whether it holds every entry of "
        "the closed fragments it is in (entries found missing are copied back). 0 = never.",
    )
    auditor_periodic_bookie_check_interval_s: int = setting(
        86400,
        "How often the auditor scans every ledger for lost or retiring bookies even "
        "when nothing changed (it scans at once when a bookie is lost or retired).",
    )
    auditor_poll_interval_ms: int = setting(
        1000,
        "How often the auditor reads the bookie registrations and each worker looks for "
        "under-replicated ledgers.",
    )
    rereplication_entry_batch_size: int = setting(
        100, "Entries a replication worker reads and writes per round trip."
    )
    rereplication_rate_bytes_per_s: int = setting(
        1048576,
        "Most bytes per second one replication worker copies, so producers keep their "
        "rate while a lost bookie's ledgers are copied (docs/reliability.md). 0 = no limit.",
    )
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
    shutdown_timeout_s: float = shutdown_timeout_setting()
    log_level: str = setting("INFO", "Logging level.")

    def __post_init__(self) -> None:
        if not 1 <= self.max_bytes_per_read_response <= MAX_BYTES_PER_READ_RESPONSE:
            raise SettingsError(
                f"max_bytes_per_read_response: {self.max_bytes_per_read_response} is not in "
                f"[1, {MAX_BYTES_PER_READ_RESPONSE}] (gRPC's message limit is "
                f"{MAX_GRPC_MESSAGE_BYTES})"
            )
