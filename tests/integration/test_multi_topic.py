"""Multi-topic subscriptions: a list of topics, and a regex over one
namespace that picks up topics created later."""

from __future__ import annotations

import re

import pytest

from client import Client, ConsumerType, InitialPosition, InvalidConfiguration, Timeout
from client.admin import Admin
from tests.harness import wait_for

FULL = "persistent://public/default/"


def _receive(consumer, n: int) -> list:  # type: ignore[no-untyped-def]
    got = []
    for _ in range(n):
        m = consumer.receive(timeout_millis=10000)
        consumer.acknowledge(m)
        got.append(m)
    return got


def test_a_list_of_topics_is_one_consumer_and_acks_reach_each_topic(cluster, topic):
    t1, t2 = topic + "-one", topic + "-two"
    with Client(cluster.service_url) as c:
        consumer = c.subscribe(
            [t1, t2],
            "multi",
            consumer_type=ConsumerType.Shared,
            initial_position=InitialPosition.Earliest,
        )
        for t in (t1, t2):
            p = c.create_producer(t, batching_enabled=False)
            for i in range(5):
                p.send(f"{t}/{i}".encode())
        got = _receive(consumer, 10)
        assert {m.topic_name() for m in got} == {FULL + t1, FULL + t2}
        for t in (t1, t2):
            assert [m.data() for m in got if m.topic_name() == FULL + t] == [
                f"{t}/{i}".encode() for i in range(5)
            ]
        # Acknowledging by message id alone also finds the topic.
        p = c.create_producer(t2, batching_enabled=False)
        p.send(b"late")
        late = consumer.receive(timeout_millis=10000)
        consumer.acknowledge(late.message_id())
        consumer.close()
        with Admin(cluster.service_url) as admin:
            for t in (t1, t2):

                def drained(t: str = t) -> bool:
                    return admin.topics.stats(t)["subscriptions"]["multi"]["msgBacklog"] == 0

                wait_for(
                    drained,
                    10,
                    f"{t}'s backlog to reach 0",
                )


def test_a_pattern_subscribes_to_matching_topics_including_later_ones(cluster, topic):
    base = topic.replace("_", "-")
    with Client(cluster.service_url) as c, Admin(cluster.service_url) as admin:
        for suffix in ("a", "b", "other"):
            c.create_producer(f"{base}-{'fin-' if suffix != 'other' else ''}{suffix}").close()
        admin.topics.create_partitioned_topic(f"{base}-fin-parted", 2)
        consumer = c.subscribe(
            re.compile(f"persistent://public/default/{re.escape(base)}-fin-.*"),
            "rx",
            initial_position=InitialPosition.Earliest,
            pattern_auto_discovery_period=0.5,
        )
        for name in ("fin-a", "fin-b", "other", "fin-parted"):
            p = c.create_producer(f"{base}-{name}", batching_enabled=False)
            p.send(name.encode())
            p.close()
        got = sorted(m.data() for m in _receive(consumer, 3))
        assert got == [b"fin-a", b"fin-b", b"fin-parted"]
        with pytest.raises(Timeout):
            consumer.receive(timeout_millis=300)  # "other" does not match
        # A topic created after subscribing is found by the next discovery.
        later = c.create_producer(f"{base}-fin-later", batching_enabled=False)
        later.send(b"later")
        assert consumer.receive(timeout_millis=15000).data() == b"later"


def test_patterns_must_stay_in_one_namespace(cluster):
    with Client(cluster.service_url) as c:
        for bad in ("persistent://public/.*/x", "persistent://.*/default/x", "ftp://public/d/x"):
            with pytest.raises(InvalidConfiguration, match="one namespace"):
                c.subscribe(re.compile(bad), "s")
        # A short pattern means public/default.
        consumer = c.subscribe(re.compile("no-such-topic-prefix-.*"), "short")
        assert consumer.topic() == "no-such-topic-prefix-.*"
        with pytest.raises(Timeout):
            consumer.receive(timeout_millis=100)
