"""The record of a topic's ledgers at ``/managed-ledgers/{topic}`` (JSON):
its ledger ids in order and, beside them, the message totals known of
them (:mod:`broker.message_counts`), so that the next owner of the topic
counts the backlog of ledgers it did not write in messages. Records
written before totals existed have none.
"""

from __future__ import annotations

import json


def encode(ledger_ids: list[int], totals: dict[int, int]) -> bytes:
    messages = {str(i): totals[i] for i in ledger_ids if i in totals}
    return json.dumps({"ledgers": ledger_ids, "messages": messages}).encode()


def decode(value: bytes) -> tuple[list[int], dict[int, int]]:
    """The ledger ids and the message totals of a record."""
    record = json.loads(value)
    ids = [int(i) for i in record["ledgers"]]
    totals: dict[int, int] = {}
    recorded = record.get("messages")
    if not isinstance(recorded, dict):
        return ids, totals  # none recorded (or not as we write them): estimates
    for key, total in recorded.items():
        try:
            totals[int(key)] = int(total)
        except (TypeError, ValueError):
            continue
    return ids, totals
