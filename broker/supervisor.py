"""The process supervisor under ``magnetar standalone`` and ``magnetar
local-cluster``: it starts the server processes, watches them, restarts one
that dies (``broker/supervision.py`` decides when), and stops them all.

- **One supervisor per data directory.** It locks ``<data-dir>`` before
  anything else (``protos/data_dir_lock.py``), so a second start on the same
  directory is refused naming the first one's pid, and every child locks its
  own subdirectory too. A child of an earlier supervisor still running there
  (only possible if it outlived its supervisor) is reported, not killed.
- **Ports are checked before anything starts**: a taken one is one line,
  ``port 2380 (raft) is in use on 127.0.0.1``, and exit code 1.
- **Children die with the supervisor, however it dies.** Each child asks
  the kernel for SIGKILL when its parent dies (``PR_SET_PDEATHSIG``, set by
  the child itself at start, see ``protos.serving.die_with_parent``), so a
  ``kill -9`` of the supervisor (a container runtime, the OOM killer) leaves
  no orphan holding ports and locks. A kill loses nothing acknowledged:
  every acknowledged entry and metadata write is on disk before its answer.
- **Readiness**: a child writes a ready file once it serves; it counts as
  ready when that exists *and* its gRPC health service answers SERVING.
- **Stop** (SIGTERM/SIGINT) takes at most ``shutdown_timeout_s`` (default
  10 s, ``--shutdown-timeout-s``) as a whole: brokers first (they hand their
  bundles over while the metastore still runs), then bookies, then
  metastores, each role by a deadline at 60 %, 80 % and 100 % of it. A
  child is started with its role's share as its own ``shutdown_timeout_s``
  (less, if its settings say less), and what has not exited by its role's
  deadline is killed.
"""

from __future__ import annotations

import abc
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.secure_setup import SecureFiles
from broker.supervision import ChildLife, ChildState, Event, RestartPolicy, next_event, transition
from protos.data_dir_lock import DataDirLock, DataDirLocked, holder_of
from protos.serving import PortInUse, StartRefused, check_port_free, health_serving
from protos.settings import SettingsError, load_settings
from protos.tls import TlsClient

SHUTDOWN_TIMEOUT_S = 10.0  # the whole stop, from the signal to the last child's exit
# Each role's deadline, as a share of it, in stop order.
STOP_SHARES = {"broker": 0.6, "bookie": 0.8, "metastore": 1.0}
# Kept between a child's own shutdown_timeout_s and its role's kill deadline.
STOP_MARGIN_S = 0.5
POLL_INTERVAL_S = 0.1  # how often the supervisor looks at its children
STALE_WAIT_S = 5.0  # how long children of a supervisor just killed get to die


class StartupError(RuntimeError):
    pass


@dataclass
class Child:
    name: str  # "metastore", "bookie-1", ...: names its log and ready files
    role: str  # metastore | bookie | broker
    cmd: list[str]
    ready_file: Path
    log_file: Path
    proc: subprocess.Popen
    life: ChildLife
    info: dict = field(default_factory=dict)


class Supervisor(abc.ABC):
    """Start, watch, restart and stop child server processes. Subclasses say
    what to start (:meth:`start_children`) and which fixed ports that takes
    (:meth:`planned_ports`)."""

    kind = "supervisor"  # names the holder of the data dir's lock

    def __init__(
        self,
        data_dir: Path,
        *,
        config_file: str | None,
        policy: RestartPolicy | None = None,
        shutdown_timeout_s: float = SHUTDOWN_TIMEOUT_S,
    ) -> None:
        self.data_dir = data_dir.resolve()
        self.config_file = config_file
        self.policy = policy or RestartPolicy()
        self.shutdown_timeout_s = shutdown_timeout_s
        self.settings = role_settings(config_file)
        # --secure: the CA, certificates, keys and token under the data dir
        # (broker/secure_setup.py) every child is started with.
        self.secure: SecureFiles | None = None
        self.children: list[Child] = []
        self.endpoints: dict = {}
        self._stopping = False
        self._lock: DataDirLock | None = None

    # ------------------------------------------------------------ subclass API

    @abc.abstractmethod
    def planned_ports(self) -> list[tuple[str, int, str]]:
        """(role, port, what) of every fixed port the children will listen on."""

    @abc.abstractmethod
    def start_children(self) -> dict:
        """Start every child (in dependency order, waiting for each to be
        ready) and return the endpoints to publish."""

    @abc.abstractmethod
    def child_dirs(self) -> list[Path]:
        """The data directories the children will lock."""

    # ---------------------------------------------------------------- start

    def start(self) -> dict:
        try:
            self._lock = DataDirLock(self.data_dir, self.kind)
        except DataDirLocked as exc:
            raise StartupError(str(exc)) from None
        self._check_stale()
        try:
            for role, port, what in self.planned_ports():
                check_port_free(self.bind_address(role), port, what)
        except (PortInUse, StartRefused) as exc:
            raise StartupError(str(exc)) from None
        self._warn_capped_timeouts()
        self.endpoints = self.start_children()
        self.endpoints["supervisor_pid"] = os.getpid()
        self._publish()
        return self.endpoints

    def bind_address(self, role: str) -> str:
        return str(self.settings[role].bind_address or "127.0.0.1")

    def child_timeout_s(self, role: str) -> float:
        """A child's own shutdown_timeout_s: its role's share of the stop,
        or less if its settings say less."""
        start = max([0.0] + [v for r, v in STOP_SHARES.items() if v < STOP_SHARES[role]])
        share = (STOP_SHARES[role] - start) * self.shutdown_timeout_s - STOP_MARGIN_S
        return round(max(0.5, min(share, self.settings[role].shutdown_timeout_s)), 2)

    def _warn_capped_timeouts(self) -> None:
        """A shutdown_timeout_s set in the config or environment that its
        role's share overrides is said once (the default is not: the share
        replaces it, as documented)."""
        for role, settings in self.settings.items():
            default = type(settings).__dataclass_fields__["shutdown_timeout_s"].default
            value = settings.shutdown_timeout_s
            if value != default and value > self.child_timeout_s(role):
                print(
                    f"magnetar: [{role}] shutdown_timeout_s = {value:g} "
                    f"is capped at {self.child_timeout_s(role):g} s, its share of "
                    f"--shutdown-timeout-s {self.shutdown_timeout_s:g}",
                    file=sys.stderr,
                )

    def _check_stale(self) -> None:
        """Children of an earlier supervisor of this data dir that still run.
        Children of one just killed get a moment: they die with it, but not
        in the same instant."""
        deadline = time.monotonic() + STALE_WAIT_S
        for d in self.child_dirs():
            while (holder := holder_of(d)) is not None and time.monotonic() < deadline:
                time.sleep(POLL_INTERVAL_S)  # polling another process's lock
            if holder is not None:
                raise StartupError(
                    f"{d} is still in use by {holder}, left running by an earlier "
                    "supervisor of this data dir; stop it first"
                )

    def secure_args(self, role: str, port_tls: int) -> list[str]:
        """With --secure, a child's security settings (``--set`` flags): TLS
        on ``port_tls`` (0: a free one), tokens, authorization, and for the
        broker and the bookie their own calls over TLS with the superuser's
        token."""
        if self.secure is None:
            return []
        values = {**self.secure.settings(), TLS_PORT_SETTING[role]: port_tls}
        if role == "metastore":
            values["raft_password"] = f"file://{self.secure.raft_secret}"
        else:
            values.update(self.secure.client_settings())
        return [a for k, v in values.items() for a in ("--set", f"{k}={_flag_value(v)}")]

    def secure_endpoints(self, service_url_tls: str) -> dict[str, object]:
        """What endpoints.json adds with --secure: where the CA and the
        superuser's token are, and how to connect (printed at start)."""
        if self.secure is None:
            return {}
        return {
            "security": {
                "ca": str(self.secure.ca),
                "admin_token": str(self.secure.admin_token),
                "how_to_connect": self.secure.how_to_connect(service_url_tls),
            }
        }

    def metastore_for_children(self, metastores: list[Child]) -> str:
        """The metastore list the bookies and brokers are given: the TLS
        ports when their own calls use TLS (--secure)."""
        key = "local_tls" if self.secure is not None else "local"
        return ",".join(str(c.info.get(key) or local(c.info)) for c in metastores)

    def launch(self, name: str, role: str, port: int, metrics_port: int, extra: list[str]) -> Child:
        """Start one child process (not waiting for it)."""
        run_dir, logs = self.data_dir / "run", self.data_dir / "logs"
        run_dir.mkdir(parents=True, exist_ok=True)
        logs.mkdir(parents=True, exist_ok=True)
        ready = run_dir / f"{name}.ready.json"
        cmd = [sys.executable, "-m", "broker.cli", role, "--port", str(port)]
        cmd += ["--metrics-port", str(metrics_port), "--ready-file", str(ready), *extra]
        cmd += ["--set", f"shutdown_timeout_s={self.child_timeout_s(role)}"]
        if self.config_file:
            cmd += ["--config", self.config_file]
        log_file = logs / f"{name}.log"
        proc = self._popen(cmd, ready, log_file)
        child = Child(name, role, cmd, ready, log_file, proc, ChildLife.spawned(time.monotonic()))
        self.children.append(child)
        return child

    def _popen(self, cmd: list[str], ready: Path, log_file: Path) -> subprocess.Popen:
        ready.unlink(missing_ok=True)
        env = {**os.environ, "MAGNETAR_SUPERVISOR_PID": str(os.getpid())}
        with open(log_file, "ab") as log:
            # A session of its own: a Ctrl-C in the terminal reaches the
            # supervisor only, which stops the children in order.
            return subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )

    def await_ready(self, children: list[Child]) -> list[Child]:
        """Until every child is ready (StartupError if one exits or time is up)."""
        deadline = time.monotonic() + self.policy.start_timeout_s
        for child in children:
            while not self._is_ready(child):
                if self._stopping:
                    raise StartupError("stopped while starting")
                if child.proc.poll() is not None:
                    raise StartupError(
                        f"the {child.name} exited with code {child.proc.returncode} while "
                        f"starting: {last_line(child.log_file)} (log: {child.log_file})"
                    )
                if time.monotonic() > deadline:
                    raise StartupError(
                        f"the {child.name} did not become ready within "
                        f"{self.policy.start_timeout_s:g} s; see {child.log_file}"
                    )
                time.sleep(POLL_INTERVAL_S)  # polling a child process's ready file
            child.life = transition(child.life, Event.READY, time.monotonic(), self.policy)
            _pin_ports(child)
        return children

    def _is_ready(self, child: Child) -> bool:
        if not child.ready_file.exists():
            return False
        child.info = json.loads(child.ready_file.read_text())
        return health_serving(local(child.info), tls=_health_tls(child.info))

    def _publish(self) -> None:
        """``<data-dir>/endpoints.json`` (addresses, pids, states), replaced atomically."""
        self.endpoints["pids"] = {c.name: c.proc.pid for c in self.children}
        self.endpoints["states"] = {c.name: c.life.state.value for c in self.children}
        tmp = self.data_dir / "endpoints.json.tmp"
        tmp.write_text(json.dumps(self.endpoints, indent=2))
        os.replace(tmp, self.data_dir / "endpoints.json")

    # ---------------------------------------------------------------- watch

    def watch(self) -> int:
        """Watch the children until SIGTERM/SIGINT; then stop them. Returns 0."""

        def on_signal(signum: int, frame: object) -> None:
            self._stopping = True

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        while not self._stopping:  # also set by a signal that came during the start
            if self._step(time.monotonic()):
                self._publish()
            time.sleep(POLL_INTERVAL_S)  # the supervisor's watch period
        self.stop()
        return 0

    def _step(self, now: float) -> bool:
        """Feed each child's life what happened; True if a state changed."""
        changed = False
        for child in self.children:
            event = self._observe(child, now)
            if event is None:
                continue
            before = child.life.state
            if event is Event.START_TIMEOUT:
                child.proc.kill()
                child.proc.wait()
            child.life = transition(child.life, event, now, self.policy)
            self._report(child, before, event)
            if child.life.state is ChildState.STARTING:
                child.proc = self._popen(child.cmd, child.ready_file, child.log_file)
            changed = True
        return changed

    def _observe(self, child: Child, now: float) -> Event | None:
        state = child.life.state
        if state in (ChildState.STARTING, ChildState.RUNNING) and child.proc.poll() is not None:
            return Event.EXITED
        if state is ChildState.STARTING and self._is_ready(child):
            return Event.READY
        return next_event(child.life, now, self.policy)

    def _report(self, child: Child, before: ChildState, event: Event) -> None:
        life = child.life
        if event is Event.READY:
            msg = f"the {child.name} is serving again (pid {child.proc.pid})"
        elif life.state is ChildState.BACKOFF:
            what = "exited" if event is Event.EXITED else "did not become ready"
            msg = (
                f"the {child.name} {what} (code {child.proc.returncode}); restarting it in "
                f"{life.backoff_s:g} s"
            )
        elif life.state is ChildState.DOWN:
            msg = f"the {child.name} exited with code {child.proc.returncode}; {life.reason}"
        else:
            msg = f"restarting the {child.name}"
        print(f"magnetar: {msg}", file=sys.stderr, flush=True)

    # ---------------------------------------------------------------- stop

    def stop(self) -> None:
        self._stopping = True
        started = time.monotonic()
        for role, share in STOP_SHARES.items():
            group = [c for c in self.children if c.role == role and c.proc.poll() is None]
            for child in group:
                child.proc.send_signal(signal.SIGTERM)
            deadline = started + share * self.shutdown_timeout_s
            for child in group:
                try:
                    child.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    child.proc.kill()
                    child.proc.wait()
        (self.data_dir / "endpoints.json").unlink(missing_ok=True)
        if self._lock is not None:
            self._lock.release()
            self._lock = None


def role_settings(config_file: str | None) -> dict[str, Any]:
    """Each role's settings from the config file and the environment (what
    its children will read, before their command-line flags)."""
    from bookie.settings import BookieSettings
    from broker.settings import BrokerSettings
    from metastore.settings import MetastoreSettings

    classes = {"broker": BrokerSettings, "bookie": BookieSettings, "metastore": MetastoreSettings}
    try:
        return {role: load_settings(cls, role, config_file) for role, cls in classes.items()}
    except SettingsError as exc:
        raise StartupError(str(exc)) from None


def local(info: dict) -> str:
    """A ready child's address as seen from this machine."""
    return str(info.get("local") or info["grpc"])


def _health_tls(info: dict) -> TlsClient | None:
    """How to ask a child whose only gRPC port is its TLS one (it is ours:
    whatever certificate it shows is trusted)."""
    if info.get("local_tls") and info.get("local") == info.get("local_tls"):
        return TlsClient(validate_hostname=False, allow_insecure=True)
    return None


TLS_PORT_SETTING = {
    "metastore": "metastore_port_tls",
    "bookie": "bookie_port_tls",
    "broker": "broker_service_port_tls",
}


def _flag_value(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _pin_ports(child: Child) -> None:
    """A restart reuses the ports the first start got (0 = a free one)."""
    cmd = child.cmd
    tls = child.info.get("local_tls") or ""
    setting = TLS_PORT_SETTING.get(child.role, "")
    if tls and f"{setting}=0" in cmd:
        cmd[cmd.index(f"{setting}=0")] = f"{setting}={tls.rpartition(':')[2]}"
    pins = {}
    if child.info["local"] != tls:  # it has a plaintext port
        pins["--port"] = child.info["local"].rpartition(":")[2]
    if child.info.get("metrics", -1) >= 0:
        pins["--metrics-port"] = str(child.info["metrics"])
    if "raft" in child.info and "--raft-port" in cmd:
        pins["--raft-port"] = child.info["raft"].rpartition(":")[2]
    for flag, value in pins.items():
        cmd[cmd.index(flag) + 1] = value


def last_line(path: Path) -> str:
    """The last non-empty line of a child's log (its refusal, usually)."""
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1].strip() if lines else ""


def run(supervisor: Supervisor) -> int:
    def early_stop(signum: int, frame: object) -> None:
        supervisor._stopping = True

    signal.signal(signal.SIGTERM, early_stop)
    signal.signal(signal.SIGINT, early_stop)
    try:
        endpoints = supervisor.start()
    except StartupError as exc:
        print(f"magnetar: {exc}", file=sys.stderr)
        if supervisor._lock is not None:
            supervisor.stop()
        return 1
    print(endpoints["service_url"], flush=True)
    if "security" in endpoints:
        print(endpoints["security"]["how_to_connect"], flush=True)
    return supervisor.watch()
