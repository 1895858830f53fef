"""``make bench``: the performance matrix against the peers, in one sitting.

Starts what it needs and stops it at the end: Redis (the peer harness's
Redis Streams; ``appendfsync always`` is the peer with Magnetar's
durability, ``everysec`` the fastest pipelined anchor), a Magnetar
standalone (E=Qw=Qa=1) and, for the replicated rows, a local cluster of
one metastore, two bookies and one broker (E=Qw=Qa=2). Every timed run
holds ``flock /tmp/bench.lock`` (the machine-wide benchmark lock of
../shared/bench). Prints one table: each figure, what it is compared with
in the same sitting, the ratio, the target, and whether it is met; medians
over ``--reps``. ``--write-docs`` puts the table in docs/benchmarks.md with
the commit and the command.

    make bench                                   # --reps 3 --write-docs
    .venv/bin/python -m benchmarks.matrix --reps 1 --only partitions,sync

Needs ``redis-server`` (Debian's) and redis-py + hiredis in .venv (``make
bench`` installs both), and the peer harness at ../shared/bench/peers.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOCK = os.environ.get("BENCH_LOCK", "/tmp/bench.lock")
PY = sys.executable
REDIS_PORT = 16379  # the peer harness's
SECTIONS = ("partitions", "latency", "sync", "pipelined", "topics", "replicated")


@dataclass
class Row:
    what: str
    figure: float
    unit: str
    against: str = ""
    base: float | None = None
    target: str = ""
    ratio: float | None = None
    met: bool | None = None

    def __post_init__(self) -> None:
        if self.base:
            self.ratio = self.figure / self.base


def _locked(cmd: list[str], env: dict[str, str] | None = None) -> list[dict]:
    """Run ``cmd`` under the benchmark lock; its JSON output lines."""
    out = subprocess.run(
        ["flock", "-w", "1800", LOCK, *cmd],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def _median(values: list[float]) -> float:
    return float(statistics.median(values))


# ---------------------------------------------------------------- servers


@contextmanager
def redis(work: Path) -> Iterator[dict[str, str]]:
    peers_dir = work / "peers"
    (peers_dir / "pids").mkdir(parents=True)
    (peers_dir / "redis").mkdir()
    proc = subprocess.Popen(
        [
            *("redis-server", "--bind", "127.0.0.1", "--port", str(REDIS_PORT)),
            *("--protected-mode", "yes", "--dir", str(peers_dir / "redis")),
            *("--appendonly", "yes", "--appendfsync", "always", "--save", ""),
        ],
        stdout=subprocess.DEVNULL,
    )
    (peers_dir / "pids" / "redis.pid").write_text(str(proc.pid))
    try:
        yield {"PEERS_DIR": str(peers_dir)}
    finally:
        proc.terminate()
        proc.wait(30)


def _wait_file(path: Path, proc: subprocess.Popen, timeout_s: float, what: str) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists():
            return dict(json.loads(path.read_text()))
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited ({proc.returncode})")
        time.sleep(0.2)  # polling for a file another process writes
    raise RuntimeError(f"{what} did not start within {timeout_s:g} s")


@contextmanager
def magnetar(work: Path, kind: str) -> Iterator[Path]:
    """A standalone or a 1/2/1 local cluster; yields its endpoints.json."""
    data = work / kind
    if kind == "standalone":
        args = [
            *("standalone", "--data-dir", str(data)),
            *("--metastore-port", "0", "--raft-port", "0", "--bookie-port", "0"),
            *("--broker-port", "0", "--metastore-metrics-port", "-1"),
            *("--bookie-metrics-port", "-1", "--broker-metrics-port", "-1"),
        ]
    else:
        from broker.local_cluster import free_port_offset

        offset = free_port_offset()
        if offset is None:
            raise RuntimeError("no free port offset for a local cluster")
        args = [
            *("local-cluster", "--data-dir", str(data), "--port-offset", str(offset)),
            *("--metastores", "1", "--bookies", "2", "--brokers", "1"),
        ]
    log = open(work / f"{kind}.log", "w")  # noqa: SIM115 (the process keeps it)
    proc = subprocess.Popen(
        [PY, "-m", "broker.cli", *args], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        endpoints = data / "endpoints.json"
        _wait_file(endpoints, proc, 120, kind)
        yield endpoints
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _with_pids(endpoints: Path) -> Path:
    """local-cluster's endpoints with ``pids.broker``/``pids.bookie`` and
    ``service_url`` as the standalone's (what the scripts read)."""
    ep = json.loads(endpoints.read_text())
    if "pids" in ep and "broker" in ep["pids"]:
        return endpoints
    pids = ep.get("pids", {})  # by child name: broker-0, bookie-0, ...
    ep["pids"] = {role: pids[f"{role}-0"] for role in ("broker", "bookie") if f"{role}-0" in pids}
    out = endpoints.with_name("endpoints-flat.json")
    out.write_text(json.dumps(ep))
    return out


# ---------------------------------------------------------------- runs


class Sitting:
    def __init__(self, work: Path, reps: int, env: dict[str, str]) -> None:
        self.work = work
        self.reps = reps
        self.env = env
        self.rows: list[Row] = []
        self._n = 0

    def peers_one(self, peer: str, endpoints: Path, *args: str) -> dict:
        """One run of the peer harness (``args`` as ``peers.py one`` takes them)."""
        self._n += 1
        out = self.work / f"peers-{self._n}.jsonl"
        env = {**self.env, "MAGNETAR_ENDPOINTS": str(endpoints)}
        env["MAGNETAR_SERVICE_URL"] = json.loads(endpoints.read_text())["service_url"]
        cmd = [PY, "benchmarks/peers_magnetar.py", "one", "--peer", peer, *args, "--out", str(out)]
        _locked(cmd, env)
        return dict(json.loads(out.read_text().splitlines()[-1]))

    def repeated(self, run: Callable[[], float]) -> float:
        return _median([run() for _ in range(self.reps)])

    def add(self, row: Row) -> None:
        self.rows.append(row)
        print(_line(row), file=sys.stderr, flush=True)


def _at_least(row: Row, bound: float) -> Row:
    row.target = f"≥ {bound:g}x"
    row.met = row.ratio is not None and row.ratio >= bound
    return row


def _at_most(row: Row, bound: float, on_ratio: bool = True) -> Row:
    value = row.ratio if on_ratio else row.figure
    row.target = f"≤ {bound:g}{'x' if on_ratio else ' ' + row.unit}"
    row.met = value is not None and value <= bound
    return row


def partitions(s: Sitting, endpoints: Path, where: str) -> dict[tuple[str, int], float]:
    cells: dict[tuple[str, int], list[float]] = {}
    for _ in range(s.reps):
        for res in _locked([PY, "benchmarks/partitions.py", "--endpoints", str(endpoints)]):
            cells.setdefault((res["routing"], res["partitions"]), []).append(res["msgs_s"])
    med = {k: _median(v) for k, v in cells.items()}
    for routing in ("keyed", "round-robin"):
        one = med[(routing, 1)]
        s.add(Row(f"{where}: 1 partition, {routing}", one, "msg/s"))
        for parts, bound in ((10, 0.9), (100, 0.8)):
            row = Row(
                f"{where}: {parts} partitions, {routing}",
                med[(routing, parts)],
                "msg/s",
                "1 partition",
                one,
            )
            s.add(_at_least(row, bound))
    return med


def latency(s: Sitting, endpoints: Path) -> None:
    def pub(peer: str, pct: str) -> Callable[[], float]:
        args = ("--redis-fsync", "always") if peer == "redis" else ()
        return lambda: s.peers_one(
            peer, endpoints, *args, "--workload", "latency", "--rate", "2000", "--duration", "10"
        )["lat_ms"][pct]

    def e2e(peer: str, pct: str) -> Callable[[], float]:
        args = ("--redis-fsync", "always") if peer == "redis" else ()
        return lambda: s.peers_one(
            peer,
            endpoints,
            *args,
            "--workload",
            "e2e",
            "--n",
            "50000",
            "--rate",
            "2000",
            "--duration",
            "10",
            "--max-seconds",
            "60",
        )["lat_ms"][pct]

    ours = _runs(s, {"pub": pub("magnetar", "p99"), "e2e": e2e("magnetar", "p99")})
    theirs = _runs(s, {"pub": pub("redis", "p99"), "e2e": e2e("redis", "p99")})
    s.add(
        _at_most(
            Row("publish→ack p99 @2,000/s", ours["pub"], "ms", "Redis always", theirs["pub"]), 2
        )
    )
    s.add(_at_most(Row("e2e p99 @2,000/s", ours["e2e"], "ms", "Redis always", theirs["e2e"]), 1.5))
    floor = s.repeated(lambda: _locked([PY, "benchmarks/latency_floor.py"])[0]["p99_ms"])
    s.add(
        Row(
            "reference: bare 2 gRPC hops + group-commit fsync, 1 ms batches, p99 @2,000/s",
            floor,
            "ms",
            "Redis always",
            theirs["pub"],
        )
    )
    ours999 = s.repeated(e2e("magnetar", "p999"))
    theirs999 = s.repeated(e2e("redis", "p999"))
    s.add(_at_most(Row("e2e p99.9 @2,000/s", ours999, "ms", "Redis always", theirs999), 2))


def _runs(s: Sitting, runs: dict[str, Callable[[], float]]) -> dict[str, float]:
    return {name: s.repeated(run) for name, run in runs.items()}


def sync_and_cpu(s: Sitting, endpoints: Path) -> None:
    def floor() -> float:
        cases = _locked([PY, "benchmarks/grpc_floor.py", "--n", "3000"])
        return float(next(c["round_trips_s"] for c in cases if c["case"].startswith("2 hops")))

    def aio_sync() -> float:
        res = s.peers_one(
            "magnetar",
            endpoints,
            "--workload",
            "produce",
            "--mode",
            "sync",
            "--n",
            "5000",
            "--max-seconds",
            "20",
        )
        return float(res["msgs_s"])

    own: list[dict] = []

    def sdk_sync() -> float:
        res = _locked(
            [
                PY,
                "benchmarks/produce_consume.py",
                "--endpoints",
                str(endpoints),
                "--sync-n",
                "5000",
                "--workloads",
                "sync,pipelined",
            ]
        )
        own.extend(res)
        return float(next(r["msgs_s"] for r in res if r["workload"] == "sync"))

    base = s.repeated(floor)
    s.add(
        _at_least(
            Row(
                "one-at-a-time send, aio SDK",
                s.repeated(aio_sync),
                "msg/s",
                "2-hop gRPC floor",
                base,
            ),
            0.9,
        )
    )
    s.add(
        _at_least(
            Row(
                "one-at-a-time send, sync SDK",
                s.repeated(sdk_sync),
                "msg/s",
                "2-hop gRPC floor",
                base,
            ),
            0.9,
        )
    )
    cpu = _median([r["client_cpu_us_per_msg"] for r in own if r["workload"] == "pipelined"])
    s.add(_at_most(Row("client CPU per pipelined message, sync SDK", cpu, "µs"), 12, False))


def pipelined(s: Sitting, endpoints: Path) -> None:
    runs: list[dict] = []

    def ours() -> float:
        res = s.peers_one(
            "magnetar",
            endpoints,
            "--workload",
            "produce",
            "--mode",
            "pipelined",
            "--n",
            "100000",
            "--max-seconds",
            "20",
        )
        runs.append(res)
        return float(res["msgs_s"])

    def redis_batch() -> float:
        res = s.peers_one(
            "redis",
            endpoints,
            "--redis-fsync",
            "everysec",
            "--workload",
            "produce",
            "--mode",
            "batch",
            "--n",
            "100000",
            "--max-seconds",
            "20",
        )
        return float(res["msgs_s"])

    figure, base = s.repeated(ours), s.repeated(redis_batch)
    s.add(
        _at_least(
            Row("pipelined 1 KiB, aio SDK", figure, "msg/s", "Redis everysec, client batch", base),
            1.0,
        )
    )
    cpu = _median([r["client_cpu_s"] / r["n_done"] * 1e6 for r in runs])
    s.add(_at_most(Row("client CPU per pipelined message, aio SDK", cpu, "µs"), 12, False))


def topics(s: Sitting, endpoints: Path) -> None:
    res = {
        r["phase"]: r
        for r in _locked([PY, "benchmarks/many_topics.py", "--endpoints", str(endpoints)])
    }
    s.add(
        _at_most(
            Row("1,000 topics created, one send each", res["create"]["seconds"], "s"), 5, False
        )
    )
    s.add(
        _at_most(
            Row("broker memory per idle topic", res["idle"]["kib_per_idle_topic"], "KiB"), 20, False
        )
    )
    s.add(
        _at_most(
            Row("new producer's first send, 10,000 idle topics, p99", res["probe"]["p99_ms"], "ms"),
            50,
            False,
        )
    )


def replicated(s: Sitting, standalone: Path, cluster: Path) -> None:
    def run(endpoints: Path) -> tuple[float, float]:
        res = _locked(
            [
                PY,
                "benchmarks/produce_consume.py",
                "--endpoints",
                str(endpoints),
                "--workloads",
                "pipelined,e2e-rate",
            ]
        )
        pipe = next(r for r in res if r["workload"] == "pipelined")["msgs_s"]
        e2e = next(r for r in res if r["workload"].startswith("e2e"))["e2e_latency_ms"]["p99"]
        return float(pipe), float(e2e)

    ours = [run(cluster) for _ in range(s.reps)]
    base = [run(standalone) for _ in range(s.reps)]
    pipe, pipe_base = _median([o[0] for o in ours]), _median([b[0] for b in base])
    e2e, e2e_base = _median([o[1] for o in ours]), _median([b[1] for b in base])
    s.add(
        _at_least(
            Row("replicated 2/2/2 pipelined, sync SDK", pipe, "msg/s", "standalone", pipe_base), 0.5
        )
    )
    s.add(_at_most(Row("replicated 2/2/2 e2e p99 @2,000/s", e2e, "ms", "standalone", e2e_base), 2))


# ---------------------------------------------------------------- the table


def _fmt(v: float | None) -> str:
    if v is None:
        return ""
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def _line(row: Row) -> str:
    ratio = f"{row.ratio:.2f}x" if row.ratio is not None else ""
    met = "" if row.met is None else ("yes" if row.met else "**no**")
    against = f"{row.against} {_fmt(row.base)} {row.unit}" if row.against else ""
    return f"| {row.what} | {_fmt(row.figure)} {row.unit} | {against} | {ratio} | {row.target} | {met} |"


def table(rows: list[Row]) -> str:
    head = "| figure | Magnetar | compared with (same sitting) | ratio | target | met |\n"
    head += "|---|---|---|---|---|---|\n"
    return head + "\n".join(_line(r) for r in rows) + "\n"


def write_docs(text: str, command: str) -> None:
    path = ROOT / "docs" / "benchmarks.md"
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.strip()
    start, end = "<!-- matrix:start -->", "<!-- matrix:end -->"
    block = (
        f"{start}\nCommit `{commit}`{' (with uncommitted changes)' if dirty else ''}, "
        f"{time.strftime('%Y-%m-%d')}, `{command}`:\n\n{text}{end}"
    )
    doc = path.read_text()
    if start in doc:
        doc = doc[: doc.index(start)] + block + doc[doc.index(end) + len(end) :]
    else:
        doc += "\n" + block + "\n"
    path.write_text(doc)


def run_sections(s: Sitting, only: set[str], standalone: Path) -> None:
    if "partitions" in only:
        partitions(s, standalone, "standalone")
    if "latency" in only:
        latency(s, standalone)
    if "sync" in only:
        sync_and_cpu(s, standalone)
    if "pipelined" in only:
        pipelined(s, standalone)
    if "replicated" in only or "partitions" in only:
        with magnetar(s.work, "cluster") as raw:
            cluster = _with_pids(raw)
            if "partitions" in only:
                partitions(s, cluster, "local-cluster")
            if "replicated" in only:
                replicated(s, standalone, cluster)
    if "topics" in only:  # last: it leaves 11,000 topics on the standalone
        topics(s, standalone)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--only", default=",".join(SECTIONS), help=f"among {','.join(SECTIONS)}")
    ap.add_argument("--write-docs", action="store_true")
    a = ap.parse_args()
    only = set(a.only.split(","))
    unknown = only - set(SECTIONS)
    if unknown:
        ap.error(f"unknown sections {sorted(unknown)}")
    if shutil.which("redis-server") is None:
        sys.exit("redis-server is missing: `make bench` installs it (apt-get install redis-server)")
    s: Sitting
    work = Path(tempfile.mkdtemp(prefix="magnetar-bench-"))
    try:
        with redis(work) as env, magnetar(work, "standalone") as standalone:
            s = Sitting(work, a.reps, env)
            run_sections(s, only, standalone)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = table(s.rows)
    print(text)
    if a.write_docs:
        write_docs(text, "make bench")


if __name__ == "__main__":
    main()
