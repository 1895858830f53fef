"""The gRPC channel options every Magnetar process and the SDK use.

Kept apart from ``protos/serving.py`` (which brings the server runtime:
Prometheus, the gRPC health service) so the client SDK can open channels
without loading anything a server needs.
"""

from __future__ import annotations

# gRPC frames carry whole entries and batches; this bounds them.
MAX_GRPC_MESSAGE_BYTES = 16 * 1024 * 1024


def grpc_options(max_message_bytes: int = MAX_GRPC_MESSAGE_BYTES) -> list[tuple[str, int]]:
    return [
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.so_reuseport", 0),
    ]


def reconnect_options(max_ms: int = 1000) -> list[tuple[str, int]]:
    """A channel whose server went away tries again 100 ms later, then at
    most every ``max_ms``. gRPC's own schedule (1 s, growing to 120 s) left a
    server back after a 30 s outage unreached for another 11-16 s (measured:
    0.6-0.8 s with this one), and every call meanwhile fails at once
    (benchmarks/reconnect_after_outage.py)."""
    return [
        ("grpc.initial_reconnect_backoff_ms", 100),
        ("grpc.min_reconnect_backoff_ms", 100),
        ("grpc.max_reconnect_backoff_ms", max_ms),
    ]


# The shortest client keep-alive a server accepts (a client pinging more
# often is sent away with GOAWAY "too_many_pings" by gRPC).
MIN_KEEP_ALIVE_S = 1


def keep_alive_client_options(interval_s: int) -> list[tuple[str, int]]:
    """A client channel pings its server every ``interval_s`` and drops the
    connection when an answer takes longer than that (Pulsar's
    keepAliveIntervalSeconds): calls on it fail and are made again on a new
    connection, instead of waiting on a link that went silent."""
    ms = max(MIN_KEEP_ALIVE_S, interval_s) * 1000
    return [
        ("grpc.keepalive_time_ms", ms),
        ("grpc.keepalive_timeout_ms", ms),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
    ]


def keep_alive_server_options(interval_s: int) -> list[tuple[str, int]]:
    """A server pings each client connection every ``interval_s`` (dropping
    it, and what it carries, when the answer takes longer), and accepts the
    clients' own pings down to MIN_KEEP_ALIVE_S apart."""
    ms = max(MIN_KEEP_ALIVE_S, interval_s) * 1000
    return [
        ("grpc.keepalive_time_ms", ms),
        ("grpc.keepalive_timeout_ms", ms),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_recv_ping_interval_without_data_ms", MIN_KEEP_ALIVE_S * 1000 // 2),
        ("grpc.http2.max_ping_strikes", 0),
    ]
