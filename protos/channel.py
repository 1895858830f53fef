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
