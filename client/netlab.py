"""A small network for partitions (``magnetar verify --netns`` and the
partition tests): one Linux bridge and one network namespace per process
(docs/reliability.md, "Network partitions").

Each namespace gets an address 10.<net>.0.<i>/24 on a veth pair whose other
end is on the bridge; the test process itself is on the bridge as
10.<net>.0.254 ("host"), so it reaches every process like a client would. Faults:

- ``cut(a, b)`` / ``heal(a, b)``: iptables DROP of everything between two
  hosts, both ways, inside both namespaces (the rest keeps talking);
- ``drop(a, b)`` / ``undrop(a, b)``: what a sends to b is dropped (one way);
- ``isolate(a)`` / ``rejoin(a)``: the host's link goes down / up.

``close()`` kills every process started in the namespaces and deletes the
namespaces, veths, bridge and the FORWARD rules it added, whatever state the
test or run left them in; use the lab as a context manager (or a fixture)
so that happens when a test fails. ``NetLab.unavailable()`` says why a machine
cannot run it (not root, no ``ip``/``iptables``), for a one-line skip.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field

HOST_INDEX = 254  # the test process's address on the bridge


def _run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=30)


@dataclass
class Host:
    name: str
    namespace: str
    ip: str
    veth: str
    procs: list[subprocess.Popen] = field(default_factory=list)


class NetLab:
    def __init__(self, net: int | None = None) -> None:
        # Names are short (interface names are at most 15 characters) and
        # unique per test process, so parallel or leftover labs do not clash.
        self.tag = f"ml{os.getpid() % 100000}"
        self.net = net if net is not None else 100 + os.getpid() % 100
        self.bridge = f"{self.tag}br"
        self.hosts: dict[str, Host] = {}
        self._forward_rules: list[list[str]] = []
        self._cuts: set[tuple[str, str]] = set()
        _run("ip", "link", "add", self.bridge, "type", "bridge")
        _run("ip", "addr", "add", f"10.{self.net}.0.{HOST_INDEX}/24", "dev", self.bridge)
        _run("ip", "link", "set", self.bridge, "up")
        # With a Docker engine, bridged packets meet FORWARD's DROP policy.
        for direction in ("-i", "-o"):
            rule = ["FORWARD", direction, self.bridge, "-j", "ACCEPT"]
            if _run("iptables", "-I", *rule, check=False).returncode == 0:
                self._forward_rules.append(rule)

    @staticmethod
    def unavailable() -> str | None:
        if os.geteuid() != 0:
            return "network namespaces need root"
        for tool in ("ip", "iptables"):
            if shutil.which(tool) is None:
                return f"no {tool} command"
        probe = _run("ip", "netns", "list", check=False)
        if probe.returncode != 0:
            return f"ip netns does not work here: {probe.stderr.strip()}"
        return None

    @property
    def host_ip(self) -> str:
        return f"10.{self.net}.0.{HOST_INDEX}"

    def add_host(self, name: str) -> Host:
        i = len(self.hosts) + 1
        host = Host(name, f"{self.tag}-{name}", f"10.{self.net}.0.{i}", f"{self.tag}v{i}")
        _run("ip", "netns", "add", host.namespace)
        _run("ip", "link", "add", host.veth, "type", "veth", "peer", "name", "eth0",
             "netns", host.namespace)  # fmt: skip
        _run("ip", "link", "set", host.veth, "master", self.bridge, "up")
        _run("ip", "-n", host.namespace, "addr", "add", f"{host.ip}/24", "dev", "eth0")
        _run("ip", "-n", host.namespace, "link", "set", "eth0", "up")
        _run("ip", "-n", host.namespace, "link", "set", "lo", "up")
        self.hosts[name] = host
        return host

    def popen(self, name: str, cmd: Sequence[str], **kwargs: object) -> subprocess.Popen:
        """Start ``cmd`` inside host ``name``'s namespace."""
        host = self.hosts[name]
        # A session of its own: a Ctrl-C at the terminal reaches the verifier
        # (or test), which stops the cluster itself, not every process at once.
        proc = subprocess.Popen(  # type: ignore[call-overload]
            ["ip", "netns", "exec", host.namespace, *cmd], start_new_session=True, **kwargs
        )
        host.procs.append(proc)
        return proc

    # ------------------------------------------------------------ faults

    def _ip(self, name: str) -> str:
        return self.host_ip if name == "host" else self.hosts[name].ip

    def _rules(self, action: str, a: str, b: str) -> None:
        """DROP rules (``-A`` adds, ``-D`` deletes) for traffic between a and
        b, in each side's namespace ("host", the test process, has none:
        its side is covered by the other's rules)."""
        for here, there in ((a, b), (b, a)):
            if here == "host":
                continue
            ns, peer = self.hosts[here].namespace, self._ip(there)
            for chain, flag in (("INPUT", "-s"), ("OUTPUT", "-d")):
                # Deleting is best effort: a rule a failed cut never added is not there.
                _run("ip", "netns", "exec", ns, "iptables", action, chain, flag, peer, "-j", "DROP",
                     check=action != "-D")  # fmt: skip

    def cut(self, a: str, b: str) -> None:
        """Drop everything between ``a`` and ``b`` ("host" is the test process)."""
        pair = (min(a, b), max(a, b))
        if pair not in self._cuts:
            self._cuts.add(pair)  # first: a cut that fails halfway is still healed
            self._rules("-A", *pair)

    def heal(self, a: str, b: str) -> None:
        pair = (min(a, b), max(a, b))
        if pair in self._cuts:
            self._rules("-D", *pair)
            self._cuts.discard(pair)

    def drop(self, src: str, dst: str) -> None:
        """Drop what ``src`` sends to ``dst`` (one way; ``src`` is not "host")."""
        rule = ["OUTPUT", "-d", self._ip(dst), "-j", "DROP"]
        _run("ip", "netns", "exec", self.hosts[src].namespace, "iptables", "-A", *rule)

    def undrop(self, src: str, dst: str) -> None:
        rule = ["OUTPUT", "-d", self._ip(dst), "-j", "DROP"]
        _run("ip", "netns", "exec", self.hosts[src].namespace, "iptables", "-D", *rule, check=False)

    def isolate(self, name: str) -> None:
        _run("ip", "link", "set", self.hosts[name].veth, "down")

    def rejoin(self, name: str) -> None:
        _run("ip", "link", "set", self.hosts[name].veth, "up")

    # ------------------------------------------------------------ teardown

    def close(self) -> None:
        for host in self.hosts.values():
            for proc in host.procs:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGKILL)
            pids = _run("ip", "netns", "pids", host.namespace, check=False).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            for proc in host.procs:
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
            _run("ip", "netns", "del", host.namespace, check=False)
            _run("ip", "link", "del", host.veth, check=False)
        _run("ip", "link", "del", self.bridge, check=False)
        for rule in self._forward_rules:
            _run("iptables", "-D", *rule, check=False)
        self.hosts.clear()
        self._forward_rules.clear()

    def __enter__(self) -> NetLab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
