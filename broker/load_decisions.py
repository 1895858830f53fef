"""What the load manager leader decides, with no I/O: where an unowned bundle
goes, which bundles to shed from overloaded brokers, and which to split.

Theory of operation (Pulsar's modular load manager, simplified):

* A broker's *usage* is the largest of its weighted resource fractions
  (CPU, memory, network in, network out; 0..1), smoothed over reports
  (``usage = h * previous + (1 - h) * current``). Placement leaves out
  overloaded brokers and picks the one with the least message rate, each
  bundle it holds counting as an average bundle; ties go to the broker
  name, so decisions are reproducible.
* Shedding (ThresholdShedder): a broker whose usage is over the average by
  more than ``threshold`` gives up its busiest bundles (by msg rate in+out)
  until the rates it gives up reach its share of the excess; it keeps at
  least one bundle, and a bundle moved within the grace period is not
  moved again.
* Splitting: a bundle over any threshold (topics, sessions, msg rate,
  bandwidth) is split in halves, while the namespace stays within its
  maximum number of bundles. The halves stay with the broker that split
  them, topics loaded; they are unloaded at once (so they can be placed
  anywhere) only when that is enabled and some other broker reports load:
  with a single broker, unloading would close every topic of the bundle
  just to load it again where it was.
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
    smoothed_usage: float | None = None  # set by UsageHistory; else the latest figures

    @property
    def usage(self) -> float:
        if self.smoothed_usage is not None:
            return self.smoothed_usage
        return max(self.cpu, self.memory, self.bandwidth_in, self.bandwidth_out)

    @property
    def msg_rate(self) -> float:
        return sum(b.msg_rate for b in self.bundles.values())


@dataclass(frozen=True)
class ResourceWeights:
    cpu: float = 1.0
    memory: float = 1.0
    bandwidth_in: float = 1.0
    bandwidth_out: float = 1.0

    def usage(self, b: BrokerLoad) -> float:
        return max(
            b.cpu * self.cpu,
            b.memory * self.memory,
            b.bandwidth_in * self.bandwidth_in,
            b.bandwidth_out * self.bandwidth_out,
        )


class UsageHistory:
    """Each broker's smoothed usage: ``h * previous + (1 - h) * current``
    (Pulsar's loadBalancerHistoryResourcePercentage), so one busy sample
    does not move bundles. Brokers not in a round are forgotten."""

    def __init__(self, history: float, weights: ResourceWeights) -> None:
        if not 0.0 <= history < 1.0:
            raise ValueError(f"history {history} must be in [0, 1)")
        self.history = history
        self.weights = weights
        self._usage: dict[str, float] = {}

    def smooth(self, brokers: list[BrokerLoad]) -> list[BrokerLoad]:
        """The same brokers with ``smoothed_usage`` set."""
        now: dict[str, float] = {}
        for b in brokers:
            current = self.weights.usage(b)
            previous = self._usage.get(b.broker)
            now[b.broker] = (
                current
                if previous is None
                else self.history * previous + (1 - self.history) * current
            )
            b.smoothed_usage = now[b.broker]
        self._usage = now  # bounded by the live brokers
        return brokers


@dataclass(frozen=True)
class SplitThresholds:
    max_topics: int = 1000
    max_sessions: int = 1000
    max_msg_rate: float = 30000.0
    max_bandwidth_bytes: float = 100 * 1024 * 1024
    max_bundles_per_namespace: int = 128


def bundle_load_to_json(load: BundleLoad) -> dict[str, float]:
    return {
        "topics": load.topics,
        "sessions": load.sessions,
        "msgRateIn": load.msg_rate_in,
        "msgRateOut": load.msg_rate_out,
        "msgThroughputIn": load.throughput_in,
        "msgThroughputOut": load.throughput_out,
    }


def broker_load_from_report(report: dict, broker: str) -> BrokerLoad:
    """A report as the decisions see it (missing figures count as zero)."""
    bundles = {
        name: BundleLoad(
            topics=int(b.get("topics", 0)),
            sessions=int(b.get("sessions", 0)),
            msg_rate_in=float(b.get("msgRateIn", 0.0)),
            msg_rate_out=float(b.get("msgRateOut", 0.0)),
            throughput_in=float(b.get("msgThroughputIn", 0.0)),
            throughput_out=float(b.get("msgThroughputOut", 0.0)),
        )
        for name, b in dict(report.get("bundles", {})).items()
    }
    return BrokerLoad(
        broker,
        cpu=float(report.get("cpu", 0.0)),
        memory=float(report.get("memory", 0.0)),
        bandwidth_in=float(report.get("bandwidthIn", 0.0)),
        bandwidth_out=float(report.get("bandwidthOut", 0.0)),
        bundles=bundles,
    )


def place(
    brokers: list[BrokerLoad], held: dict[str, int] | None = None, overloaded: float = 0.85
) -> str | None:
    """The broker an unowned bundle goes to (None when there is none).

    Pulsar's LeastLongTermMessageRate: brokers whose usage is over
    ``overloaded`` are left out (unless all are); of the rest, the one with
    the least message rate, where each bundle a broker holds (``held``,
    fresher than its report) adds the average rate of a bundle, at least 1
    msg/s; so idle brokers take bundles in turn. CPU and memory only decide
    who is overloaded: one busy sample must not send every bundle elsewhere.
    """
    if not brokers:
        return None
    held = held or {}
    fit = [b for b in brokers if b.usage <= overloaded] or brokers
    bundles = sum(len(b.bundles) for b in brokers)
    total_rate = sum(b.msg_rate for b in brokers)
    per_bundle = max(1.0, total_rate / bundles if bundles else 0.0)

    def load(b: BrokerLoad) -> float:
        return b.msg_rate + held.get(b.broker, 0) * per_bundle

    return min(fit, key=lambda b: (load(b), b.broker)).broker


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


def unload_split_halves(enabled: bool, brokers: int) -> bool:
    """Whether an automatic split unloads its halves at once: only when
    enabled and ``brokers`` (those reporting load) leave somewhere else to go."""
    return enabled and brokers > 1
