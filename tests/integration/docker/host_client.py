"""A Magnetar client on the host for the container tests, run as its own
process: ``python -m tests.integration.docker.host_client MODE --url URL --topic T --out FILE``.

Brokers in containers advertise their container names (``broker1:6650``);
the tests start this process in a mount namespace of its own whose
``/etc/hosts`` maps those names to 127.0.0.1, where the brokers' ports are
published (what docs/deploy.md tells a user of the compose cluster to do).

Modes (each bounded; events are JSON lines appended to ``--out``):

* ``traffic``: one producer (synchronous sends, numbered) and one consumer
  until ``--stop FILE`` exists, then keeps receiving until every
  acknowledged number arrived or ``--drain-s`` passed. Events: ``{"ack": i, "t": monotonic,
  "ledger": id}``, ``{"recv": i}``, ``{"error": text}``, ``{"done": true}``.
* ``produce``: create subscription ``--sub``, send ``--count`` messages,
  ``{"ack": i}`` each, ``{"done": true}``.
* ``lookup``: ``{"owner": brokerUrl}`` of the topic (an admin lookup, which
  asks the owner itself, so it too needs the names).
* ``consume``: receive ``--count`` messages on ``--sub``, ``{"recv": i}`` each,
  ``{"done": true}`` (stops after ``--drain-s`` without a message).
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from client import Client, InitialPosition, Timeout
from client.admin import Admin

MAX_MESSAGES = 100_000


class Events:
    def __init__(self, path: Path) -> None:
        self._file: TextIO = path.open("a", buffering=1)
        self._lock = threading.Lock()

    def write(self, **event: Any) -> None:
        with self._lock:
            self._file.write(json.dumps(event) + "\n")


class Received:
    """Numbers received so far, for the traffic mode's drain."""

    def __init__(self) -> None:
        self.numbers: set[int] = set()
        self.lock = threading.Lock()

    def add(self, i: int) -> None:
        with self.lock:
            self.numbers.add(i)

    def has_all(self, acked: int) -> bool:
        with self.lock:
            return all(i in self.numbers for i in range(acked))


def _receive(
    consumer: Any, events: Events, until: threading.Event | None, idle_s: float, seen: Received
) -> None:
    """Receive and acknowledge until ``until`` is set (traffic) or no message came for idle_s."""
    idle_since = time.monotonic()
    for _ in range(MAX_MESSAGES * 100):  # bounded: at most this many receive attempts
        if until is not None and until.is_set():
            return
        if until is None and time.monotonic() - idle_since > idle_s:
            return
        try:
            msg = consumer.receive(timeout_millis=200)
        except Timeout:
            continue
        idle_since = time.monotonic()
        number = int(msg.data())
        seen.add(number)
        events.write(recv=number)
        consumer.acknowledge(msg)


def traffic(args: argparse.Namespace, client: Client, events: Events) -> None:
    consumer = client.subscribe(args.topic, args.sub, initial_position=InitialPosition.Earliest)
    producer = client.create_producer(args.topic, batching_enabled=False, send_timeout_millis=60000)
    seen, stop_consuming = Received(), threading.Event()
    reader = threading.Thread(
        target=_receive, args=(consumer, events, stop_consuming, 0.0, seen), daemon=True
    )
    reader.start()
    stop, acked = Path(args.stop), 0
    for i in range(MAX_MESSAGES):
        if stop.exists():
            break
        try:
            msg_id = producer.send(str(i).encode())
        except Exception as exc:  # reported to the test, which fails on it
            events.write(error=f"send {i}: {exc!r}")
            break
        acked = i + 1
        events.write(ack=i, t=time.monotonic(), ledger=msg_id.position[0])
    deadline = time.monotonic() + args.drain_s
    while not seen.has_all(acked) and time.monotonic() < deadline:
        time.sleep(0.05)  # polling the consumer thread's progress, bounded by the deadline
    stop_consuming.set()
    reader.join(5)


def produce(args: argparse.Namespace, client: Client, events: Events) -> None:
    client.subscribe(args.topic, args.sub, initial_position=InitialPosition.Earliest).close()
    producer = client.create_producer(args.topic, send_timeout_millis=60000)
    for i in range(args.count):
        producer.send(str(i).encode())
        events.write(ack=i)


def consume(args: argparse.Namespace, client: Client, events: Events) -> None:
    consumer = client.subscribe(args.topic, args.sub, initial_position=InitialPosition.Earliest)
    _receive(consumer, events, None, args.drain_s, Received())


def lookup(args: argparse.Namespace, client: Client, events: Events) -> None:
    with Admin(args.url) as admin:
        events.write(owner=admin.topics.lookup(args.topic)["brokerUrl"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["traffic", "produce", "consume", "lookup"])
    parser.add_argument("--url", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--sub", default="audit")
    parser.add_argument("--stop", default="")
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--drain-s", type=float, default=20.0)
    args = parser.parse_args()
    events = Events(Path(args.out))
    client = Client(args.url, operation_timeout_seconds=60)
    try:
        {"traffic": traffic, "produce": produce, "consume": consume, "lookup": lookup}[args.mode](
            args, client, events
        )
    except Exception as exc:
        events.write(error=repr(exc))
        raise
    finally:
        client.close()
        events.write(done=True)


if __name__ == "__main__":
    main()
