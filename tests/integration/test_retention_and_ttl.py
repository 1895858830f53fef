"""Retention and message TTL enforced on real processes (issue 22, points 3
and 4), with the check intervals shortened through the TOML file: consumed
ledgers go or stay as retention says (also after a live change), expiry
acknowledges old messages on every subscription without deleting what
retention keeps, and ``topics expire-messages`` does the same on demand."""

from __future__ import annotations

import itertools

import pytest

from client import Client, InitialPosition
from client.admin import Admin
from client.exceptions import Timeout
from tests.harness import wait_for
from tests.tenancy import own_namespace, standalone_with

_n = itertools.count()

SETTINGS = """\
message_expiry_check_interval_s = 1
retention_check_interval_s = 1
managed_ledger_max_entries_per_ledger = 5
managed_ledger_min_ledger_rollover_time_minutes = 0
"""


@pytest.fixture(scope="module")
def short_checks(tmp_path_factory):
    with standalone_with(tmp_path_factory.mktemp("retention"), SETTINGS) as c:
        yield c


@pytest.fixture
def admin(short_checks):
    with Admin(short_checks.service_url) as a:
        yield a


@pytest.fixture
def namespace(admin):
    with own_namespace(admin, "ret") as ns:
        yield ns


def _produce_and_consume(c: Client, topic: str, n: int, size: int = 100) -> None:
    consumer = c.subscribe(topic, "reader-of-all")
    producer = c.create_producer(topic, batching_enabled=False)
    for i in range(n):
        producer.send(f"{i:04d}".encode().ljust(size, b"."))
    for _ in range(n):
        consumer.acknowledge(consumer.receive(timeout_millis=10000))
    consumer.close()


def _earliest(c: Client, topic: str) -> list[int]:
    """The messages a new subscription at earliest reads."""
    reader = c.subscribe(topic, f"earliest-{next(_n)}", initial_position=InitialPosition.Earliest)
    got = []
    while True:
        try:
            msg = reader.receive(timeout_millis=1500)
        except Timeout:
            break
        got.append(int(msg.data()[:4]))
        reader.acknowledge(msg)
    reader.unsubscribe()
    return got


def test_unlimited_retention_keeps_consumed_ledgers_and_none_drops_them(
    admin, namespace, short_checks
):
    kept, dropped = f"persistent://{namespace}/kept", f"persistent://{namespace}/dropped"
    with Client(short_checks.service_url) as c:
        c.create_producer(kept).close()
        admin.topics.set_retention(kept, -1, -1)  # a topic override; the namespace has none
        _produce_and_consume(c, kept, 30)
        _produce_and_consume(c, dropped, 30)
        assert _earliest(c, kept) == list(range(30))
        # 0/0 (the broker's default here): consumed ledgers go, all but the
        # one being written.
        assert wait_for(lambda: len(_earliest(c, dropped)) <= 5, 20, "consumed ledgers to go")


def test_a_live_change_of_retention_trims_at_the_next_check(admin, namespace, short_checks):
    topic = f"persistent://{namespace}/changing"
    admin.namespaces.set_retention(namespace, -1, -1)
    with Client(short_checks.service_url) as c:
        _produce_and_consume(c, topic, 30)
        assert _earliest(c, topic) == list(range(30))
        admin.namespaces.set_retention(namespace, 0, 0)
        assert wait_for(lambda: len(_earliest(c, topic)) <= 5, 20, "retention 0/0 to apply")


def test_retention_by_size_keeps_the_newest_consumed_data(admin, namespace, short_checks):
    topic = f"persistent://{namespace}/sized"
    admin.namespaces.set_retention(namespace, -1, 1)  # 1 MB, any age
    with Client(short_checks.service_url) as c:
        _produce_and_consume(c, topic, 30, size=100 * 1024)  # 3 MB in ledgers of 500 KB

        def trimmed_to_size() -> bool:
            got = _earliest(c, topic)
            return 5 <= len(got) < 30 and got == list(range(30 - len(got), 30))

        assert wait_for(trimmed_to_size, 20, "retention by size to keep the newest ledgers")


def test_message_ttl_expires_unacknowledged_messages_but_retention_keeps_them(
    admin, namespace, short_checks
):
    topic = f"persistent://{namespace}/ttl"
    admin.namespaces.set_retention(namespace, -1, -1)
    with Client(short_checks.service_url) as c:
        slow = c.subscribe(topic, "slow")
        other = c.subscribe(topic, "other")
        producer = c.create_producer(topic)
        for i in range(10):
            producer.send(f"{i:04d}".encode())
        admin.namespaces.set_message_ttl(namespace, 2)

        def expired() -> bool:
            subs = admin.topics.stats(topic)["subscriptions"]
            return all(subs[s]["msgBacklog"] == 0 for s in ("slow", "other"))

        assert wait_for(expired, 20, "the TTL to expire both subscriptions' backlogs")
        subs = admin.topics.stats(topic)["subscriptions"]
        assert subs["slow"]["totalMsgExpired"] == 10
        assert subs["other"]["lastExpireTimestamp"] > 0
        # Expiry moved the cursors; retention still keeps the messages.
        assert _earliest(c, topic) == list(range(10))
        slow.close()
        other.close()


def test_expire_messages_on_demand(admin, namespace, short_checks):
    topic = f"persistent://{namespace}/on-demand"
    with Client(short_checks.service_url) as c:
        c.subscribe(topic, "a").close()
        c.subscribe(topic, "b").close()
        producer = c.create_producer(topic)
        for _ in range(7):
            producer.send(b"m")
    assert admin.topics.expire_messages(topic, "a", 3600)["expired"] == 0
    assert admin.topics.expire_messages(topic, "a", 0)["expired"] == 7
    subs = admin.topics.stats(topic)["subscriptions"]
    assert (subs["a"]["msgBacklog"], subs["b"]["msgBacklog"]) == (0, 7)
    assert admin.topics.expire_messages_all_subscriptions(topic, 0)["expired"] == {"a": 0, "b": 7}
    assert admin.topics.stats(topic)["subscriptions"]["b"]["msgBacklog"] == 0
