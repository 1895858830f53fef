"""How ``magnetar verify`` reaches the cluster it injects faults into, and
the injection itself (the schedule is ``client/verify_schedule.py``).

Two kinds of cluster:

* :class:`LocalClusterControl`: a running ``magnetar local-cluster``, found
  through its ``endpoints.json`` (pids and states of every process). Its
  supervisor starts a killed or stopped process again; the verifier waits
  for that before the next fault.
* :class:`NetClusterControl`: a cluster the verifier starts itself with
  ``--netns``, every process in its own network namespace
  (``client/net_cluster.py``), which also allows network partitions. The
  verifier starts a killed process again itself.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Protocol

from client.net_cluster import NetCluster, NetClusterError
from client.netlab import NetLab
from client.verify_schedule import TARGET_ROLES, Fault

HEALTHY_TIMEOUT_S = 120  # longest wait for every process to serve again after a fault
FLAP_HALF_PERIOD_S = 0.5  # a flapping link is down this long, then up as long


def partition_steps(
    kind: str, targets: tuple[str, ...], metastores: list[str]
) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    """What a partition fault does: host pairs cut both ways, hosts whose
    link goes down, brokers whose answers to the verifier are dropped."""
    a = targets[0]
    if kind == "broker-metastore":
        return [(a, m) for m in metastores], [], []
    if kind == "bookie-broker":
        return [(a, targets[1])], [], []
    if kind == "isolate-metastore":
        return [], [a], []
    if kind == "client-broker":
        return [], [], [a]
    raise ControlError(f"{kind!r} is not a partition")


class ControlError(RuntimeError):
    """The cluster cannot be reached or controlled as asked."""


class ClusterControl(Protocol):
    service_url: str

    def roles(self) -> dict[str, str]: ...

    def pid(self, name: str) -> int: ...

    def after_exit(self, name: str) -> None:
        """A process of the cluster was killed or stopped: have it started again."""

    def healthy(self) -> bool: ...

    def broker_named(self, address: str) -> str | None:
        """The process name of the broker at ``host:port``."""


class LocalClusterControl:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "endpoints.json"
        if not self.path.exists():
            raise ControlError(
                f"{self.path} does not exist: is `magnetar local-cluster --data-dir {data_dir}` running?"
            )
        self.service_url = str(self._read()["service_url"])

    def _read(self) -> dict:
        for _ in range(50):  # replaced atomically; a read may still race a restart
            try:
                return json.loads(self.path.read_text())
            except (OSError, ValueError):
                time.sleep(0.1)  # the supervisor is replacing it: read it again
        raise ControlError(f"cannot read {self.path}")

    def roles(self) -> dict[str, str]:
        return {name: name.rsplit("-", 1)[0] for name in self._read()["pids"]}

    def pid(self, name: str) -> int:
        """The pid of a running process (its last pid may be reused once it is down)."""
        endpoints = self._read()
        state = endpoints.get("states", {}).get(name)
        if state != "running":
            raise ControlError(f"{name} is {state}, not running: no fault injected")
        return int(endpoints["pids"][name])

    def after_exit(self, name: str) -> None:
        pass  # the supervisor restarts it

    def broker_named(self, address: str) -> str | None:
        brokers = self._read().get("brokers", [])
        return f"broker-{brokers.index(address)}" if address in brokers else None

    def healthy(self) -> bool:
        states = self._read().get("states", {})
        return bool(states) and all(s == "running" for s in states.values())


class NetClusterControl:
    def __init__(self, cluster: NetCluster) -> None:
        self.cluster = cluster
        self.service_url = cluster.service_url

    def roles(self) -> dict[str, str]:
        return self.cluster.roles()

    def pid(self, name: str) -> int:
        return self.cluster.procs[name].pid

    def after_exit(self, name: str) -> None:
        proc = self.cluster.procs[name]
        try:
            proc.wait(timeout=30)
        except Exception:
            proc.kill()
            proc.wait(timeout=10)
        self.cluster.start(name)

    def broker_named(self, address: str) -> str | None:
        return next(
            (k for k in self.cluster.brokers if self.cluster.url(k).endswith(address)), None
        )

    def healthy(self) -> bool:
        for name in self.cluster.procs:
            try:
                self.cluster.wait_ready(name, 0)
            except NetClusterError:
                return False
        return True


def aim_at_owner(fault: Fault, owner: str | None, roles: dict[str, str]) -> Fault:
    """The fault with its broker target replaced by ``owner`` (the broker
    that owns the test topic now), when there is one: a broker-only kind's
    broker, or an any-process kind's target when the draw was a broker."""
    if owner is None:
        return fault
    targets = [
        owner if role == "broker" or (role == "any" and roles.get(t) == "broker") else t
        for role, t in zip(TARGET_ROLES[fault.kind], fault.targets, strict=True)
    ]
    return replace(fault, targets=tuple(targets))


class Injector:
    """Does one fault, holds it, undoes it, and waits for the cluster to be
    healthy again; says what it did (the report's fault bands)."""

    def __init__(self, control: ClusterControl, stop: threading.Event) -> None:
        self.control = control
        self.stop = stop
        self._old_pid = 0  # the pid of the process the last process fault hit

    def inject(self, fault: Fault) -> dict:
        """Do, hold, undo ``fault``; how long it was held, and how long after
        that every process served again (None: not within HEALTHY_TIMEOUT_S)."""
        kind, targets = fault.kind, fault.targets
        began = time.monotonic()
        if kind in ("kill9", "pause", "restart"):
            self._process(kind, targets[0], fault.hold_s)
        else:
            self._partition(kind, targets, fault.hold_s)
        undone = time.monotonic()
        healthy = self._wait_healthy(targets[0] if kind in ("kill9", "restart") else None)
        return {
            "held_s": round(undone - began, 2),
            "recovered_s": round(time.monotonic() - undone, 2) if healthy else None,
        }

    def _process(self, kind: str, name: str, hold_s: float) -> None:
        self._old_pid = pid = self.control.pid(name)
        sig = {"kill9": signal.SIGKILL, "pause": signal.SIGSTOP, "restart": signal.SIGTERM}[kind]
        os.kill(pid, sig)
        try:
            self.stop.wait(hold_s)  # the fault's length (the schedule), not a synchronisation
        finally:
            if kind == "pause":
                os.kill(pid, signal.SIGCONT)
        if kind != "pause":
            self.control.after_exit(name)

    def _partition(self, kind: str, targets: tuple[str, ...], hold_s: float) -> None:
        if not isinstance(self.control, NetClusterControl):
            raise ControlError(f"fault {kind!r} needs --netns")
        c = self.control.cluster
        if kind == "flap":
            self._flap(c.lab, targets[0], hold_s)
            return
        cuts, isolated, dropped = partition_steps(kind, targets, c.metastores)
        try:
            for a, b in cuts:
                c.lab.cut(a, b)
            for name in isolated:
                c.lab.isolate(name)
            for name in dropped:
                c.lab.drop(name, "host")
            self.stop.wait(hold_s)  # the fault's length
        finally:  # every step undone, each on its own: one failing leaves the rest healed
            undo = [*(partial(c.lab.heal, a, b) for a, b in cuts)]
            undo += [partial(c.lab.rejoin, n) for n in isolated]
            undo += [partial(c.lab.undrop, n, "host") for n in dropped]
            errors = []
            for step in undo:
                try:
                    step()
                except Exception as exc:
                    errors.append(exc)
            if errors:
                raise ControlError(f"undoing {kind} failed: {errors[0]}")

    def _flap(self, lab: NetLab, name: str, hold_s: float) -> None:
        ends = time.monotonic() + hold_s
        try:
            while time.monotonic() < ends and not self.stop.is_set():  # bounded by hold_s
                lab.isolate(name)
                self.stop.wait(FLAP_HALF_PERIOD_S)  # the fault's own rhythm
                lab.rejoin(name)
                self.stop.wait(FLAP_HALF_PERIOD_S)
        finally:
            lab.rejoin(name)

    def _replaced(self, name: str) -> bool:
        try:
            return self.control.pid(name) != self._old_pid
        except ControlError:  # not running yet
            return False

    def _wait_healthy(self, replaced: str | None) -> bool:
        """Every process serving (and ``replaced``, killed or stopped, running
        under a new pid) within HEALTHY_TIMEOUT_S. Also when the run is
        ending (a fault cut short): the drain needs the cluster back."""
        deadline = time.monotonic() + HEALTHY_TIMEOUT_S
        while time.monotonic() < deadline:
            if (replaced is None or self._replaced(replaced)) and self.control.healthy():
                return True
            time.sleep(0.2)  # polling the cluster's state, bounded by the deadline
        return False
