"""``admin.topics.compact`` and ``compaction_status`` (pulsar-admin's
``topics compact`` / ``compaction-status``; docs/compaction.md)."""

from __future__ import annotations

import time
from typing import Any

from client._admin_policies import AdminCalls


class CompactionVerbs:
    _admin: AdminCalls

    def compact(self, topic: str) -> dict[str, Any]:
        """Start compacting ``topic`` (each partition of a partitioned one);
        the run goes on in the background."""
        return self._admin._op("topics.compact", idempotent=False, topic=topic)  # type: ignore[no-any-return]

    def compaction_status(
        self, topic: str, wait: bool = False, timeout_s: float = 600.0
    ) -> dict[str, Any]:
        """``{"status": NOT_RUN|RUNNING|SUCCESS|ERROR, "lastError"}``; with
        ``wait``, asks again every 0.5 s while it is RUNNING (at most
        ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        while True:
            answer: dict[str, Any] = self._admin._op("topics.compaction-status", topic=topic)
            running = answer.get("status") == "RUNNING" or any(
                isinstance(v, dict) and v.get("status") == "RUNNING" for v in answer.values()
            )
            if not (wait and running) or time.monotonic() > deadline:
                return answer
            time.sleep(0.5)
