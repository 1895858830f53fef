"""What the load manager leader decides, with no I/O: where an unowned bundle
goes, which bundles to shed from overloaded brokers, and which to split.

Theory of operation (Pulsar's modular load manager, simplified):

* A broker's *usage* is the largest of its resource fractions (CPU, memory,
  network in, network out; 0..1). Placement picks the broker with the
  lowest usage plus what was just assigned to it and not reported yet
  (each pending bundle counts as ``pending_weight``); ties go to the
  broker name, so decisions are reproducible.
* Shedding (ThresholdShedder): a broker whose usage is over the average by
  more than ``threshold`` gives up its busiest bundles (by msg rate in+out)
  until the rates it gives up reach its share of the excess; it keeps at
  least one bundle, and a bundle moved within the grace period is not
  moved again.
* Splitting: a bundle over any threshold (topics, sessions, msg rate,
  bandwidth) is split in halves, while the namespace stays within its
  maximum number of bundles.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class BundleLoad:
    topics: int = 0
    sessions: int = 0  # producers + consumers
    msg_rate_in: float = 0.0
    msg_rate_out: float = 0.0
    throughput_in: float = 0.0  # bytes/s
    throughput_out: float = 0.0

    @property
    def msg_rate(self) -> float:
        return self.msg_rate_in + self.msg_rate_out

    @property
    def throughput(self) -> float:
        return self.throughput_in + self.throughput_out


@dataclass
class BrokerLoad:
    broker: str
    cpu: float = 0.0  # fractions 0..1
    memory: float = 0.0
    bandwidth_in: float = 0.0
    bandwidth_out: float = 0.0
    bundles: dict[str, BundleLoad] = field(default_factory=dict)

    @property
    def usage(self) -> float:
        return max(self.cpu, self.memory, self.bandwidth_in, self.bandwidth_out)

    @property
    def msg_rate(self) -> float:
        return sum(b.msg_rate for b in self.bundles.values())


@dataclass(frozen=True)
class SplitThresholds:
    max_topics: int = 1000
    max_sessions: int = 1000
    max_msg_rate: float = 30000.0
    max_bandwidth_bytes: float = 100 * 1024 * 1024
    max_bundles_per_namespace: int = 128


def place(
    brokers: list[BrokerLoad], pending: dict[str, int] | None = None, pending_weight: float = 0.05
) -> str | None:
    """The broker an unowned bundle goes to (None when there is none)."""
    if not brokers:
        return None
    pending = pending or {}

    def score(b: BrokerLoad) -> tuple[float, str]:
        return (b.usage + pending.get(b.broker, 0) * pending_weight, b.broker)

    return min(brokers, key=score).broker


def shed(
    brokers: list[BrokerLoad],
    threshold: float,
    moved_at: dict[str, float],
    now_s: float,
    grace_s: float,
) -> list[tuple[str, str]]:
    """(bundle, from broker) pairs to unload now."""
    if len(brokers) < 2:
        return []
    average = sum(b.usage for b in brokers) / len(brokers)
    out: list[tuple[str, str]] = []
    for b in sorted(brokers, key=lambda x: x.broker):
        excess = b.usage - average
        if excess <= threshold or len(b.bundles) < 2 or b.usage <= 0:
            continue
        # Give up this share of the broker's traffic.
        target_rate = b.msg_rate * excess / b.usage
        given = 0.0
        candidates = sorted(b.bundles.items(), key=lambda kv: (-kv[1].msg_rate, kv[0]))
        kept = len(b.bundles)
        for name, load in candidates:
            if given >= target_rate or kept <= 1:
                break
            if now_s - moved_at.get(name, float("-inf")) < grace_s:
                continue
            out.append((name, b.broker))
            given += load.msg_rate
            kept -= 1
    return out


def split_candidates(
    bundles: dict[str, BundleLoad],
    namespace_of: dict[str, str],
    bundles_per_namespace: dict[str, int],
    limits: SplitThresholds,
) -> list[str]:
    """Bundles to split now, busiest first, keeping each namespace within
    ``max_bundles_per_namespace``."""
    counts = dict(bundles_per_namespace)
    out = []
    for name, load in sorted(bundles.items(), key=lambda kv: (-kv[1].msg_rate, kv[0])):
        over = (
            load.topics > limits.max_topics
            or load.sessions > limits.max_sessions
            or load.msg_rate > limits.max_msg_rate
            or load.throughput > limits.max_bandwidth_bytes
        )
        ns = namespace_of[name]
        if over and counts.get(ns, 0) < limits.max_bundles_per_namespace:
            out.append(name)
            counts[ns] = counts.get(ns, 0) + 1
    return out
