"""Reading the stats history (docs/stats-schema.md) as tests and benchmarks
check it: every message of the stats topic up to its end now."""

from __future__ import annotations

import json
from typing import Any

from client import Client, MessageId, Timeout
from protos.stats_schema import STATS_TOPIC


def stats_records(service_url: str, limit: int = 5000) -> list[tuple[Any, dict]]:
    """(message, record) of the stats topic from its first message to its end
    now, at most ``limit``; read with a reader, so nothing is held back."""
    out: list[tuple[Any, dict]] = []
    with Client(service_url) as client:
        reader = client.create_reader(STATS_TOPIC, MessageId.earliest, receiver_queue_size=2000)
        while len(out) < limit and reader.has_message_available():
            try:
                msg = reader.read_next(5000)
            except Timeout:
                break
            out.append((msg, json.loads(msg.data())))
        reader.close()
    return out
