"""The broker core's Prometheus series (every front-end's traffic counts)."""

from __future__ import annotations

from prometheus_client import Counter

__all__ = ["BYTES_IN", "MSGS_IN", "MSGS_OUT", "Counter"]

MSGS_IN = Counter("magnetar_rate_in", "Messages published", ["topic"])
BYTES_IN = Counter("magnetar_throughput_in", "Bytes published", ["topic"])
MSGS_OUT = Counter("magnetar_rate_out", "Entries dispatched to consumers", ["topic"])
