"""The shared peer harness (../shared/bench/peers/peers.py) with Magnetar as a peer.

Same workloads, same measurement code as NATS / Redis / RabbitMQ: this file
only adds ``MagnetarPeer`` and lets ``peers.py`` do the rest.

    MAGNETAR_SERVICE_URL=magnetar://127.0.0.1:6650 MAGNETAR_ENDPOINTS=data/endpoints.json \\
      .venv/bin/python benchmarks/peers_magnetar.py one --peer magnetar --workload produce \\
      --mode pipelined --size 1024 --n 100000 --max-seconds 20

Server CPU is the broker process's (from endpoints.json). Producers in the
latency and e2e workloads batch with a 1 ms publish delay.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

HARNESS = Path(
    os.environ.get("PEERS_HARNESS", Path(__file__).resolve().parents[2] / "shared/bench/peers")
)
sys.path.insert(0, str(HARNESS))
import peers  # noqa: E402

from client import InitialPosition  # noqa: E402
from client import aio as magnetar  # noqa: E402

TOPIC_FILE = Path(os.environ.get("PEERS_DIR", "/tmp/bench-peers")) / "magnetar-topic"


class MagnetarPeer(peers.Peer):
    name = "magnetar"
    detail = "Magnetar standalone (fsync per group commit, E=Qw=Qa=1); aio SDK, batching on"

    async def connect(self) -> None:
        self.client = magnetar.Client(os.environ["MAGNETAR_SERVICE_URL"])
        self.producer: magnetar.Producer | None = None
        self.sync_producer: magnetar.Producer | None = None

    async def close(self) -> None:
        await self.client.close()

    async def reset(self) -> None:
        TOPIC_FILE.parent.mkdir(parents=True, exist_ok=True)
        TOPIC_FILE.write_text(f"bench-{time.time_ns()}")

    async def _producers(self):  # type: ignore[no-untyped-def]
        if self.producer is None:
            topic = TOPIC_FILE.read_text()
            self.producer = await self.client.create_producer(
                topic, max_pending_messages=100_000, batching_max_publish_delay_ms=1
            )
            self.sync_producer = await self.client.create_producer(topic, batching_enabled=False)
        return self.producer, self.sync_producer

    async def publish_sync(self, payload: bytes) -> None:
        _, sync = await self._producers()
        await sync.send(payload)

    async def publish_start(self, payload: bytes) -> asyncio.Future:
        producer = self.producer  # made by the first call (no await per message after it)
        if producer is None:
            producer, _ = await self._producers()
        return producer.send(payload)

    async def consume(self, n, on_msg, deadline):  # type: ignore[no-untyped-def]
        done = asyncio.Event()
        count = [0]
        consumer = await self.client.subscribe(
            TOPIC_FILE.read_text(), "c1", initial_position=InitialPosition.Earliest
        )

        async def loop() -> None:
            while count[0] < n and time.perf_counter() < deadline:
                try:
                    m = await consumer.receive(timeout_millis=500)
                except Exception:
                    continue
                on_msg(m.data())
                await consumer.acknowledge(m)
                count[0] += 1
            done.set()

        self._task = asyncio.create_task(loop())
        return done, lambda: count[0]

    async def consume_finish(self) -> None:
        self._task.cancel()


def _server_pid(peer: str) -> int | None:
    if peer != "magnetar":
        return _original_server_pid(peer)
    path = os.environ.get("MAGNETAR_ENDPOINTS", "data/endpoints.json")
    try:
        return int(json.loads(Path(path).read_text())["pids"]["broker"])
    except (OSError, KeyError, ValueError):
        return None


_original_make_peer = peers.make_peer
_original_server_pid = peers.server_pid


def _make_peer(name: str) -> peers.Peer:
    return MagnetarPeer() if name == "magnetar" else _original_make_peer(name)


peers.make_peer = _make_peer
peers.server_pid = _server_pid

_original_add_argument = argparse._ActionsContainer.add_argument


def _add_argument(self, *args, **kwargs):  # type: ignore[no-untyped-def]
    """peers.py lists its own three peers as ``--peer`` choices; add ours."""
    if "--peer" in args and "choices" in kwargs:
        kwargs["choices"] = [*kwargs["choices"], "magnetar"]
    return _original_add_argument(self, *args, **kwargs)


argparse._ActionsContainer.add_argument = _add_argument  # type: ignore[method-assign]

if __name__ == "__main__":
    peers.main()
