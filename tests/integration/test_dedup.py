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
            *(sys.executable, "-m", "client.admin_cli", "namespaces"),
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


def test_the_broker_setting_turns_deduplication_on_without_a_namespace_policy(
    fresh_cluster, tmp_path
):
    config = tmp_path / "magnetar.toml"
    config.write_text("[broker]\nbroker_deduplication_enabled = true\n")
    fresh_cluster.extra_args = ["--config", str(config)]
    cluster = fresh_cluster.start()
    with Client(cluster.service_url) as c:
        p = c.create_producer("by-setting", producer_name="s-1", batching_enabled=False)
        p.send(b"x", sequence_id=7)
        assert p.send(b"x again", sequence_id=7).entry_id() == -1
        # A namespace policy overrides the broker setting.
        with Admin(cluster.service_url) as admin:
            admin.namespaces.set_deduplication("public/default", False)
        assert p.send(b"x once more", sequence_id=7).entry_id() >= 0


def test_a_send_whose_write_failed_is_stored_exactly_once_when_retried(fresh_cluster, tmp_path):
    import signal

    from client import Result
    from tests.harness import wait_for

    config = tmp_path / "magnetar.toml"
    config.write_text(
        "[broker]\nbroker_deduplication_enabled = true\nbookie_timeout_ms = 1000\n"
        "managed_ledger_failed_add_hold_seconds = 1\n"
    )
    fresh_cluster.extra_args = ["--config", str(config)]
    cluster = fresh_cluster.start()
    bookie = cluster.endpoints["pids"]["bookie"]
    broker_log = cluster.data_dir / "logs" / "broker.log"
    topic = "retry-after-failure"
    with Client(cluster.service_url) as c:
        p = c.create_producer(
            topic, producer_name="r-1", batching_enabled=False, send_timeout_millis=0
        )
        p.send(b"m0", sequence_id=0)
        results: list = []
        os.kill(bookie, signal.SIGSTOP)  # the bookie hangs: the next write fails
        try:
            p.send_async(b"m1", lambda res, msg_id: results.append(res), sequence_id=1)
            # Its ledger failed, and no new one took it within the hold: the
            # send failed back to the producer, which sends it again.
            wait_for(lambda: "adds held for" in broker_log.read_text(), 60, "the hold to end")
        finally:
            os.kill(bookie, signal.SIGCONT)
        # The broker closed the failed ledger (recovering what the bookie had
        # stored after all) and went on in a new one. The resend is stored if
        # the first write was lost and answered as a duplicate if it was not:
        # m1 is stored exactly once either way, and later sends go on.
        p.flush()
        assert results == [Result.Ok]
        assert p.send(b"m2", sequence_id=2).entry_id() >= 0
        sub = c.subscribe(topic, "audit", initial_position=InitialPosition.Earliest)
        got = _drain(sub)
    assert got == [b"m0", b"m1", b"m2"]
