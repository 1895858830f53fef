"""The traffic ``magnetar verify`` runs and records: producers with
deduplication (async sends, keyed), and consumers on one subscription of
each type, all through the SDK, each on its own thread.

Every event goes to a :class:`Recorder` (``history.jsonl.gz``, one JSON
object per line, numbered in the order recorded); the checker
(``client/verify_checker.py``) reads it back. The workload is bounded: a
producer stops after ``max_messages`` sends, and every wait has a deadline.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from client import Client, ConsumerType, InitialPosition, MessageId, Result, Timeout
from client.admin import Admin

# subscription type -> consumers on it
SUBSCRIPTIONS: dict[str, tuple[ConsumerType, int]] = {
    "Exclusive": (ConsumerType.Exclusive, 1),
    "Failover": (ConsumerType.Failover, 2),
    "Shared": (ConsumerType.Shared, 2),
    "Key_Shared": (ConsumerType.KeyShared, 2),
}
KEYS = 16  # distinct message keys (Key_Shared's order is per key)
RETRY_S = 0.5  # a consumer that failed to receive tries again after this


class Recorder:
    """The history, written as it happens; also counts per second for the
    report. Thread-safe."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = gzip.open(path, "wt", compresslevel=1)  # noqa: SIM115 (closed by close())
        self._lock = threading.Lock()
        self._n = 0
        self.start = time.monotonic()

    def now(self) -> float:
        return round(time.monotonic() - self.start, 4)

    def record(self, event_kind: str, /, **fields: Any) -> None:
        with self._lock:
            if self._file.closed:  # a late callback after the end: not part of the run
                return
            event = {"n": self._n, "t": self.now(), "k": event_kind, **fields}
            self._n += 1
            self._file.write(json.dumps(event, separators=(",", ":")) + "\n")

    @property
    def count(self) -> int:
        """Events recorded so far."""
        return self._n

    def close(self) -> None:
        with self._lock:
            self._file.close()


def read_history(path: Path) -> Iterator[dict[str, Any]]:
    with gzip.open(path, "rt") as f:
        for line in f:
            yield json.loads(line)


def _parse(data: bytes) -> tuple[str, int]:
    """(producer, sequence) of a workload message; anything else is kept as
    hex with sequence -1 (the checker reports it as a phantom)."""
    p, _, s = data.decode(errors="replace").rpartition(":")
    try:
        return p, int(s)
    except ValueError:
        return data.hex(), -1


def _id(msg_id: MessageId) -> list[int]:
    return [msg_id.ledger_id(), msg_id.entry_id(), msg_id.batch_index()]


class Workload:
    def __init__(
        self,
        service_url: str,
        topic: str,
        recorder: Recorder,
        producers: int = 2,
        rate: float = 25.0,
        max_messages: int = 1_000_000,
        client_options: dict[str, Any] | None = None,
    ) -> None:
        self.topic = topic
        self.rec = recorder
        self.rate = rate
        self.max_messages = max_messages
        self.client = Client(service_url, operation_timeout_seconds=30, **(client_options or {}))
        self._stop_sending = threading.Event()
        self._stop_receiving = threading.Event()
        self._consumer_threads: list[threading.Thread] = []
        # What the drain at the end waits for: every acknowledged send
        # delivered on every subscription.
        self._progress = threading.Lock()
        self._acked: set[tuple[str, int]] = set()
        self._delivered: dict[str, set[tuple[str, int]]] = {}
        self._producer_threads: list[threading.Thread] = []
        self._subscribe()
        with Admin(service_url) as admin:
            admin.topics.set_deduplication(topic, True)
        for i in range(producers):
            name = f"{topic.rsplit('/', 1)[1]}-p{i}"
            producer = self.client.create_producer(
                topic,
                producer_name=name,
                batching_enabled=False,
                block_if_queue_full=True,
                max_pending_messages=1000,
            )
            self._producer_threads.append(
                threading.Thread(target=self._produce, args=(name, producer), daemon=True)
            )

    def _subscribe(self) -> None:
        for type_name, (consumer_type, count) in SUBSCRIPTIONS.items():
            sub = f"verify-{type_name.lower()}"
            for i in range(count):
                consumer = self.client.subscribe(
                    self.topic,
                    sub,
                    consumer_type=consumer_type,
                    initial_position=InitialPosition.Earliest,
                    consumer_name=f"{sub}-c{i}",
                )
                thread = threading.Thread(
                    target=self._consume, args=(sub, type_name, f"c{i}", consumer), daemon=True
                )
                self._consumer_threads.append(thread)
            self.rec.record("subscribe", sub=sub, type=type_name)
            self._delivered[sub] = set()

    def start(self) -> None:
        for t in [*self._consumer_threads, *self._producer_threads]:
            t.start()

    # ------------------------------------------------------------ producing

    def _produce(self, name: str, producer: Any) -> None:
        period = 1 / self.rate
        next_at = time.monotonic()
        for seq in range(self.max_messages):  # bounded
            if self._stop_sending.wait(max(0.0, next_at - time.monotonic())):
                break
            next_at += period
            key = f"k{seq % KEYS}"
            self.rec.record("send", p=name, s=seq, key=key)
            try:
                producer.send_async(
                    f"{name}:{seq}".encode(), self._receipt(name, seq), partition_key=key
                )
            except Exception as exc:
                self.rec.record("sent", p=name, s=seq, err=type(exc).__name__)
        try:
            producer.flush()
        except Exception as exc:
            self.rec.record("note", what=f"{name}: flush failed: {exc}")

    def _receipt(self, name: str, seq: int) -> Callable[[Result, Any], None]:
        def done(result: Result, msg_id: Any) -> None:
            if result == Result.Ok:
                self.rec.record("sent", p=name, s=seq, id=_id(msg_id))
                with self._progress:
                    self._acked.add((name, seq))
            else:
                self.rec.record("sent", p=name, s=seq, err=str(result))

        return done

    # ------------------------------------------------------------ consuming

    def _consume(self, sub: str, type_name: str, name: str, consumer: Any) -> None:
        while not self._stop_receiving.is_set():
            try:
                m = consumer.receive(timeout_millis=200)
            except Timeout:
                continue
            except Exception as exc:
                self.rec.record("note", what=f"{sub}/{name}: receive failed: {exc}")
                self._stop_receiving.wait(RETRY_S)
                continue
            p, seq = _parse(m.data())
            with self._progress:
                self._delivered[sub].add((p, seq))
            self.rec.record(
                "recv",
                sub=sub,
                type=type_name,
                c=name,
                p=p,
                s=seq,
                key=m.partition_key(),
                id=_id(m.message_id()),
                rc=m.redelivery_count(),
            )
            try:
                consumer.acknowledge(m)
            except Exception as exc:
                self.rec.record("note", what=f"{sub}/{name}: acknowledge failed: {exc}")

    # ------------------------------------------------------------ the end

    def all_delivered(self) -> bool:
        with self._progress:
            return all(self._acked <= got for got in self._delivered.values())

    def stop(self, drain_s: float, quiet_s: float = 2.0) -> None:
        """Stop sending, wait for the receipts, then receive until every
        acknowledged send was delivered on every subscription and nothing
        new arrived for ``quiet_s`` (at most ``drain_s`` in all)."""
        self._stop_sending.set()
        for t in self._producer_threads:
            t.join(60)
        deadline = time.monotonic() + drain_s
        while not self.all_delivered() and time.monotonic() < deadline:
            self._stop_receiving.wait(0.2)  # polling the consumers' progress, bounded
        last, since = -1, time.monotonic()
        while time.monotonic() < deadline:
            n = self.rec.count
            if n != last:
                last, since = n, time.monotonic()
            elif time.monotonic() - since > quiet_s:
                break
            self._stop_receiving.wait(0.2)  # polling the counter, bounded by the deadline
        self._stop_receiving.set()
        for t in self._consumer_threads:
            t.join(10)
        self.client.close()
