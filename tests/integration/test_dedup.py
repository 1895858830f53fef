"""Broker-side deduplication (seed: Message deduplication)."""

from __future__ import annotations

import os
import subprocess
import sys

from client import Client, InitialPosition, Timeout
from client.admin import Admin
from tests.harness import ROOT

TOPIC = "dedup-topic"


def _drain(consumer, limit: int = 100) -> list[bytes]:  # type: ignore[no-untyped-def]
    out: list[bytes] = []
    while len(out) < limit:
        try:
            out.append(consumer.receive(timeout_millis=1500).data())
        except Timeout:
            break
    return out


def test_resent_messages_are_stored_once_even_across_a_restart(fresh_cluster):
    cluster = fresh_cluster.start()
    out = subprocess.run(
        [
            *(sys.executable, "-m", "broker.cli", "admin", "namespaces"),
            *("set-deduplication", "public/default", "--enable"),
        ],
        cwd=ROOT,
        env={**os.environ, "MAGNETAR_SERVICE_URL": cluster.service_url},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    with Client(cluster.service_url) as c:
        p = c.create_producer(TOPIC, producer_name="app-1", batching_enabled=False)
        ids = [p.send(f"m{i}".encode(), sequence_id=i) for i in range(10)]
        assert all(mid.entry_id() >= 0 for mid in ids)
        dup = p.send(b"m5 again", sequence_id=5)
        assert (dup.ledger_id(), dup.entry_id()) == (-1, -1)
        p.close()
    cluster.stop()
    cluster.start()  # the state is rebuilt from the snapshot and a replay
    with Client(cluster.service_url) as c:
        p = c.create_producer(TOPIC, producer_name="app-1", batching_enabled=False)
        assert p.last_sequence_id() == 9
        assert p.send(b"m3 again", sequence_id=3).entry_id() == -1
        assert p.send(b"m10", sequence_id=10).entry_id() >= 0
        other = c.create_producer(TOPIC, producer_name="app-2", batching_enabled=False)
        assert other.send(b"other 3", sequence_id=3).entry_id() >= 0  # per producer name
        sub = c.subscribe(TOPIC, "audit", initial_position=InitialPosition.Earliest)
        got = _drain(sub)
    assert got == [f"m{i}".encode() for i in range(11)] + [b"other 3"]


def test_without_deduplication_a_resend_is_stored_again(cluster, topic):
    with Admin(cluster.service_url) as admin:
        admin.namespaces.set_deduplication("public/default", False)
    with Client(cluster.service_url) as c:
        p = c.create_producer(topic, producer_name="plain", batching_enabled=False)
        p.send(b"a", sequence_id=1)
        assert p.send(b"a again", sequence_id=1).entry_id() >= 0
        sub = c.subscribe(topic, "s", initial_position=InitialPosition.Earliest)
        assert _drain(sub) == [b"a", b"a again"]
