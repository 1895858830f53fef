"""``batch_receive()``: messages up to a ``ConsumerBatchReceivePolicy``'s
count or bytes, or until its timeout, whichever comes first (maybe none).

The same loop for the blocking and the asyncio API, over any consumer
engine (one topic or many): it only calls the engine's ``receive_*`` with
the time left.
"""

from __future__ import annotations

import time
from typing import Any

from client.exceptions import Timeout
from client.message import Message
from client.policies import ConsumerBatchReceivePolicy


def _batch_limits(policy: ConsumerBatchReceivePolicy | None) -> tuple[int, int, float]:
    policy = policy or ConsumerBatchReceivePolicy()
    return policy.max_num_message, policy.max_num_bytes, policy.timeout_ms / 1000


def _batch_full(policy_max: int, max_bytes: int, count: int, size: int) -> bool:
    return (policy_max > 0 and count >= policy_max) or size >= max_bytes


def batch_receive_blocking(engine: Any, policy: ConsumerBatchReceivePolicy | None) -> list[Message]:
    """Messages until the policy's count or bytes, or its timeout (maybe none)."""
    max_n, max_bytes, timeout_s = _batch_limits(policy)
    deadline = time.monotonic() + timeout_s
    out: list[Message] = []
    size = 0
    while not _batch_full(max_n, max_bytes, len(out), size):
        left_ms = int((deadline - time.monotonic()) * 1000)
        if left_ms <= 0:
            break
        try:
            m = engine.receive_blocking(left_ms)
        except Timeout:
            break
        out.append(m)
        size += len(m.data())
    return out


async def batch_receive_async(
    engine: Any, policy: ConsumerBatchReceivePolicy | None
) -> list[Message]:
    max_n, max_bytes, timeout_s = _batch_limits(policy)
    deadline = time.monotonic() + timeout_s
    out: list[Message] = []
    size = 0
    while not _batch_full(max_n, max_bytes, len(out), size):
        left_ms = int((deadline - time.monotonic()) * 1000)
        if left_ms <= 0:
            break
        try:
            m = await engine.receive_async(left_ms)
        except Timeout:
            break
        out.append(m)
        size += len(m.data())
    return out
