"""Brokers: topics, managed ledgers, cursors, dispatchers, the client-facing
gRPC service, the ``magnetar`` CLI and the standalone supervisor."""
