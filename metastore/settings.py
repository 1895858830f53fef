"""Settings of the metastore process (section ``[metastore]``)."""

from __future__ import annotations

from dataclasses import dataclass

from protos.security_settings import (
    authentication_enabled_setting,
    authorization_enabled_setting,
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
    advertised_address_setting,
    http_max_connections_setting,
    http_min_render_interval_ms_setting,
    metrics_port_setting,
    setting,
    shutdown_timeout_setting,
)


@dataclass(frozen=True)
class MetastoreSettings:
    bind_address: str = setting(
        "",
        "Address the gRPC, Raft and metrics ports listen on (0.0.0.0 in a container or "
        "pod). Empty = 127.0.0.1 for a one-node metastore; with peers, this node's host "
        "in peers, where the others look for it.",
    )
    advertised_address: str = advertised_address_setting()
    port: int = setting(2379, "gRPC port for clients (0 = pick a free port, -1 = off: TLS only).")
    metastore_port_tls: int = port_tls_setting(2378, "clients (brokers, bookies)")
    raft_port: int = setting(2380, "Raft port between metastore nodes (0 = pick a free port).")
    metrics_port: int = metrics_port_setting(7000)
    http_max_connections: int = http_max_connections_setting()
    http_min_render_interval_ms: int = http_min_render_interval_ms_setting()
    data_dir: str = setting("./data/metastore", "Directory of the Raft journal and snapshot.")
    node_id: str = setting("", "This node's id in ``peers`` (required when peers is set).")
    peers: str = setting(
        "",
        "Every node of the cluster, this one included, as comma-separated "
        "``ID=HOST:CLIENT_PORT:RAFT_PORT`` (e.g. ``1=10.0.0.1:2379:2380``); empty = a "
        "one-node cluster on bind_address/port/raft_port (advertised as advertised_address).",
    )
    max_value_size_bytes: int = setting(1048576, "Largest value a put may store.")
    max_sessions: int = setting(10000, "Most sessions the store holds at once.")
    max_session_ttl_ms: int = setting(300000, "Longest TTL a session may ask for.")
    min_session_ttl_ms: int = setting(1000, "Shortest TTL a session may ask for.")
    session_check_interval_ms: int = setting(
        200, "How often the leader looks for sessions whose TTL ran out."
    )
    tick_period_ms: int = setting(50, "Longest wait of the Raft loop when nothing happens.")
    election_timeout_min_ms: int = setting(150, "Raft election timeout, lower bound.")
    election_timeout_max_ms: int = setting(300, "Raft election timeout, upper bound.")
    raft_reconnect_interval_ms: int = setting(
        250, "How soon a node retries a Raft connection to a peer it could not reach."
    )
    log_compaction_min_entries: int = setting(
        5000, "Raft log entries after which a snapshot replaces the log."
    )
    watch_history_events: int = setting(
        10000, "Newest changes kept for watchers to resume from; older ones are compacted."
    )
    dedup_window_requests: int = setting(
        10000, "Newest write request ids whose results are kept to answer retries."
    )
    max_list_results: int = setting(10000, "Most records one List call returns.")
    max_reads_per_call: int = setting(
        256, "Most gets and lists one Read call may carry (a client sends up to 64)."
    )
    max_read_response_bytes: int = setting(
        4194304,
        "A Read answer takes no item that would make it larger than this (encoded), except "
        "its first; the client asks again for the rest.",
    )
    max_watches_per_connection: int = setting(
        100, "Open Watch streams one client connection may hold."
    )
    max_sessions_per_connection: int = setting(
        100, "Sessions one client connection may keep alive at once."
    )
    watch_batch_events: int = setting(500, "Most events in one Watch response message.")
    write_timeout_ms: int = setting(10000, "How long a write may wait for its Raft commit.")
    authentication_enabled: bool = authentication_enabled_setting()
    authorization_enabled: bool = authorization_enabled_setting()
    superuser_roles: str = superuser_roles_setting()
    token_secret_key: str = token_secret_key_setting()
    token_public_key: str = token_public_key_setting()
    token_auth_claim: str = token_auth_claim_setting()
    token_cache_max_entries: int = token_cache_max_entries_setting()
    tls_certificate_file_path: str = tls_certificate_file_path_setting()
    tls_key_file_path: str = tls_key_file_path_setting()
    tls_trust_certs_file_path: str = tls_trust_certs_file_path_setting()
    tls_require_trusted_client_cert_on_connect: bool = (
        tls_require_trusted_client_cert_on_connect_setting()
    )
    metrics_tls_enabled: bool = metrics_tls_enabled_setting()
    raft_password: str = setting(
        "",
        "Encrypt and authenticate the Raft traffic between metastore nodes with this shared "
        "secret (pysyncobj's own encryption; every node the same): the secret itself, or "
        "file:///path to a file holding it. Empty = clear text.",
    )
    shutdown_timeout_s: float = shutdown_timeout_setting()
    log_level: str = setting("INFO", "Logging level.")
