"""``magnetar verify``: a fault-injection verifier in the spirit of Jepsen,
for operators to run against their own cluster (docs/reliability.md,
"magnetar verify").

It runs a workload (producers with deduplication; consumers on an
Exclusive, a Failover, a Shared and a Key_Shared subscription), injects
faults from a seeded schedule, then checks the recorded history and
writes ``history.jsonl.gz``, ``report.json``, ``report.md`` and
``timeline.svg`` to ``--out``. Exit status: 0 when the verdict is PASS,
1 when it is FAIL, 3 when it is INCONCLUSIVE (no anomaly, but a fault could
not be injected or undone, the cluster did not recover, or nothing was
acknowledged), 2 for a usage error, 4 when the workload could not start.

Where the cluster is:

* ``--cluster DIR``: a running ``magnetar local-cluster --data-dir DIR``
  (faults: kill9, pause, restart; its supervisor starts processes again);
* ``--netns``: the verifier starts a cluster of its own (3 metastore
  nodes, 3 bookies, 2 brokers), each process in a network namespace, and
  can also partition the network (root only);
* ``--service-url URL`` with ``--faults none``: the workload and the
  checks alone, against any cluster.
"""

from __future__ import annotations

import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import click

from client.admin import Admin
from client.verify_checker import check
from client.verify_faults import (
    ControlError,
    Injector,
    LocalClusterControl,
    NetClusterControl,
    aim_at_owner,
)
from client.verify_report import timeline, write
from client.verify_schedule import (
    PROCESS_KINDS,
    Fault,
    ScheduleError,
    check_kinds,
    parse_range,
    schedule,
)
from client.verify_workload import Recorder, Workload, read_history


def _kinds(text: str) -> list[str]:
    return [] if text.strip() == "none" else [k.strip() for k in text.split(",") if k.strip()]


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--cluster", "cluster_dir", type=click.Path(file_okay=False), help="A local-cluster's data dir."
)
@click.option("--netns", is_flag=True, help="Start a cluster in network namespaces (root).")
@click.option("--service-url", help="Any cluster (with --faults none).")
@click.option(
    "--duration",
    "duration_s",
    default=300.0,
    show_default=True,
    help="Seconds of faults and traffic.",
)
@click.option(
    "--faults",
    default=",".join(PROCESS_KINDS),
    show_default=True,
    help="Comma-separated kinds: kill9, pause, restart; with --netns also broker-metastore, "
    "isolate-metastore, bookie-broker, client-broker, flap; or none.",
)
@click.option(
    "--fault-interval",
    default="20-60",
    show_default=True,
    help="Seconds between faults (LOW-HIGH).",
)
@click.option(
    "--fault-hold", default="3-15", show_default=True, help="Seconds a fault lasts (LOW-HIGH)."
)
@click.option("--seed", default=1, show_default=True, help="Seed of the fault schedule.")
@click.option(
    "--broker-target",
    type=click.Choice(["owner", "any"]),
    default="owner",
    show_default=True,
    help="A fault on a broker hits the test topic's owner at that moment, or any broker.",
)
@click.option(
    "--keep-alive",
    default=30,
    show_default=True,
    help="The workload's Client(keep_alive_interval_seconds=...).",
)
@click.option(
    "--producers", default=2, show_default=True, help="Producers (each with deduplication)."
)
@click.option("--rate", default=25.0, show_default=True, help="Sends per second per producer.")
@click.option(
    "--namespace", default="public/default", show_default=True, help="Namespace of the test topic."
)
@click.option(
    "--drain",
    "drain_s",
    default=180.0,
    show_default=True,
    help="Longest wait for deliveries at the end.",
)
@click.option(
    "--out",
    "out_dir",
    default="./verify-out",
    show_default=True,
    help="Directory for the history and report.",
)
def main(**opts: Any) -> None:
    """Run a workload, inject faults, check the history; print the verdict."""
    try:
        kinds = _kinds(opts["faults"])
        check_kinds(kinds, opts["netns"])
        interval = parse_range(opts["fault_interval"], "--fault-interval")
        hold = parse_range(opts["fault_hold"], "--fault-hold")
    except ScheduleError as exc:
        raise click.UsageError(str(exc)) from None
    where = [w for w in ("cluster_dir", "netns", "service_url") if opts[w]]
    if len(where) != 1:
        raise click.UsageError("give one of --cluster DIR, --netns or --service-url URL")
    if opts["service_url"] and kinds:
        raise click.UsageError(
            "--service-url runs no faults: add --faults none, or use --cluster/--netns"
        )
    if min(opts["duration_s"], opts["producers"], opts["rate"], opts["keep_alive"]) <= 0:
        raise click.UsageError("--duration, --producers, --rate and --keep-alive must be positive")
    out = Path(opts["out_dir"])
    out.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        try:
            control = _control(opts, out, stack)
            faults = schedule(
                opts["seed"],
                opts["duration_s"],
                kinds,
                control.roles() if control else {},
                interval,
                hold,
            )
        except (ControlError, ScheduleError) as exc:
            raise click.UsageError(str(exc)) from None
        url = control.service_url if control else opts["service_url"]
        # A SIGTERM ends the run like Ctrl-C: faults undone, the cluster stopped.
        signal.signal(signal.SIGTERM, _interrupt)
        report = _run(opts, out, url, control, faults)
    click.echo(
        f"{report['verdict']}: {report['counts']['acknowledged']} acknowledged sends, "
        f"{len(report['faults'])} faults, anomalies {report['anomalies'] or 'none'}; "
        f"report in {out / 'report.md'}"
    )
    for doubt in report["doubts"]:
        click.echo(f"doubt: {doubt}")
    sys.exit(EXIT_CODES[report["verdict"]])


EXIT_CODES = {"PASS": 0, "FAIL": 1, "INCONCLUSIVE": 3}


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _control(opts: dict[str, Any], out: Path, stack: ExitStack) -> Any:
    if opts["cluster_dir"]:
        return LocalClusterControl(Path(opts["cluster_dir"]))
    if not opts["netns"]:
        return None
    from client.net_cluster import NetCluster, NetClusterError
    from client.netlab import NetLab

    why = NetLab.unavailable()
    if why is not None:
        raise ControlError(f"--netns: {why}")
    lab = stack.enter_context(NetLab())
    data = out / "cluster"
    shutil.rmtree(data, ignore_errors=True)
    cluster = NetCluster(lab, data, metastores=3, bookies=3, brokers=2)
    stack.callback(cluster.stop_all)
    try:
        cluster.start_all(timeout_s=120)
    except NetClusterError as exc:
        raise ControlError(f"the cluster did not start: {exc}") from None
    return NetClusterControl(cluster)


def _run(opts: dict[str, Any], out: Path, url: str, control: Any, faults: list[Fault]) -> dict:
    history = out / "history.jsonl.gz"
    rec = Recorder(history)
    topic = f"persistent://{opts['namespace']}/verify-{int(time.time())}"
    try:
        workload = Workload(
            url, topic, rec, opts["producers"], opts["rate"],
            client_options={"keep_alive_interval_seconds": opts["keep_alive"]},
        )  # fmt: skip
    except Exception as exc:  # the cluster is not there or refuses the workload
        rec.close()
        click.echo(f"verify: cannot start the workload on {url}: {exc}", err=True)
        sys.exit(EXIT_SETUP)
    stop = threading.Event()
    injector = Injector(control, stop) if control else None
    owner = (lambda: _owner(url, topic, control)) if opts["broker_target"] == "owner" else None
    thread = threading.Thread(
        target=_inject_all, args=(injector, faults, rec, stop, owner), daemon=True
    )
    workload.start()
    thread.start()
    click.echo(
        f"verify: {topic} on {url}, {len(faults)} faults planned over {opts['duration_s']:g} s"
    )
    try:
        stop.wait(opts["duration_s"])  # the run's length
    except KeyboardInterrupt:
        click.echo("verify: interrupted; checking what was recorded")
    stop.set()
    try:
        thread.join(HOLD_JOIN_S)
        workload.stop(opts["drain_s"])
    finally:
        rec.close()
    verdict = check(read_history(history))
    run = {
        k: opts[k]
        for k in (
            "duration_s",
            "faults",
            "fault_interval",
            "fault_hold",
            "seed",
            "broker_target",
            "keep_alive",
            "producers",
            "rate",
        )
    }
    run.update(service_url=url, topic=topic, netns=opts["netns"])
    return write(out, verdict, timeline(read_history(history)), run)


HOLD_JOIN_S = 180  # longest wait for the fault in progress to be undone
EXIT_SETUP = 4  # the workload could not start: nothing was verified


def _owner(url: str, topic: str, control: Any) -> str | None:
    """The process name of the broker that owns ``topic`` now (None: unknown)."""
    try:
        with Admin(url, timeout_seconds=10) as admin:
            address = str(admin.topics.lookup(topic)["brokerUrl"]).removeprefix("magnetar://")
    except Exception:
        return None
    return control.broker_named(address)  # type: ignore[no-any-return]


def _inject_all(
    injector: Injector | None,
    faults: list[Fault],
    rec: Recorder,
    stop: threading.Event,
    owner: Callable[[], str | None] | None,
) -> None:
    roles = injector.control.roles() if injector is not None else {}
    if injector is None:
        return
    for fault in faults:
        if stop.wait(max(0.0, fault.at_s - rec.now())):  # the schedule's time
            return
        if owner is not None:
            fault = aim_at_owner(fault, owner(), roles)
        started = rec.now()
        try:
            result = injector.inject(fault)
        except Exception as exc:  # recorded; the run goes on
            result = {"error": str(exc), "held_s": rec.now() - started}
        rec.record(
            "fault", t=started, end=started + result["held_s"], label=fault.label,
            kind=fault.kind, targets=list(fault.targets), **result,
        )  # fmt: skip


if __name__ == "__main__":
    main(prog_name="magnetar verify")
