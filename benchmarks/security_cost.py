"""What token authentication and authorization cost (issue 23's measures).
Prints figures; asserts nothing.

    .venv/bin/python -m benchmarks.security_cost [--pairs 3] [--n 100000]

Four standalones side by side, used one at a time: ``plain`` (security
off, the default), ``auth`` (authentication and authorization on, no TLS),
``client_tls`` (the same with the client on the broker's TLS port; the
cluster's own calls in plaintext) and ``secure`` (``magnetar standalone
--secure``: TLS on every process and on the client's connection, the
brokers' and bookies' own calls over TLS, tokens, authorization, the Raft
secret). The client of the last two is a
role with a namespace grant, not a superuser, so every decision reads the
grants. Runs take the three in turn ``--pairs`` times, so drift hits all
alike:

- pipelined: ``--n`` 1 KiB messages with ``send_async`` (batching, 10,000
  in flight), produce_consume.py's workload; msg/s, and the CPU the broker
  and the bookie spent per message (steadier than throughput on a shared
  2-core machine);
- e2e: a producer at ``--rate`` msg/s for ``--seconds`` and a consumer
  receiving and acknowledging; end-to-end p50/p99/p99.9.

Medians per side and the auth/plain and secure/plain ratios are printed
(secure/auth is what TLS alone costs). Then, in this
process, the cost of one call's checks: a cached token check, an uncached
one (the first call with a token: the HS256 signature), and the
authorization decision of a Lookup with the grants remembered.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

import psutil

from benchmarks.produce_consume import run_e2e_rate, run_pipelined
from broker.access_rules import BrokerGatekeeper
from broker.authorizer import BrokerAuthorizer, NamespaceAccess
from broker.permissions import AuthAction, AuthPolicies
from broker.secure_setup import ensure_secure_files
from client import AuthenticationToken
from client.admin import Admin
from protos import broker_pb2
from protos.tokens import TokenVerifier, create_secret_key, create_token
from tests.harness import StandaloneCluster

SECURED = """authentication_enabled = true
authorization_enabled = true
superuser_roles = "admin"
token_secret_key = "file://{key}"
"""


def _grant_app(url: str, admin_token: str, client: dict) -> None:
    with Admin(url, authentication=AuthenticationToken(admin_token), **client) as admin:
        admin.tenants.create_tenant("bench")
        admin.namespaces.create_namespace("bench/ns", bundles=1)
        admin.namespaces.grant_permission_on_namespace("bench/ns", "app", ["produce", "consume"])


def _auth(base: Path, client_tls: bool = False) -> tuple[StandaloneCluster, str, dict]:
    """Tokens and authorization; with ``client_tls`` a TLS port on the broker
    for the client (the cluster's own calls stay plaintext)."""
    base.mkdir(parents=True)
    key = create_secret_key()
    (base / "secret.key").write_bytes(key)
    (base / "admin.token").write_text(create_token("admin", secret_key=key))
    own = SECURED.format(key=base / "secret.key")
    internal = f'broker_client_auth_params = "file://{base / "admin.token"}"\n'
    broker_tls, client = "", {}
    if client_tls:
        files = ensure_secure_files(base)
        broker_tls = (
            f'broker_service_port_tls = 0\ntls_certificate_file_path = "{files.certificate}"\n'
            f'tls_key_file_path = "{files.key}"\n'
        )
        client = {"tls_trust_certs_file_path": str(files.ca)}
    (base / "magnetar.toml").write_text(
        f"[metastore]\n{own}\n[bookie]\n{own}{internal}\n[broker]\n{own}{internal}{broker_tls}"
    )
    cluster = StandaloneCluster(base / "data", ["--config", str(base / "magnetar.toml")]).start()
    url = cluster.endpoints["service_url_tls"] if client_tls else cluster.service_url
    _grant_app(url, create_token("admin", secret_key=key), client)
    token = create_token("app", secret_key=key)
    return cluster, url, {"authentication": AuthenticationToken(token), **client}


def _secure(base: Path) -> tuple[StandaloneCluster, str, dict]:
    """``magnetar standalone --secure``; the client over TLS."""
    ports = ["--metastore-port-tls", "0", "--bookie-port-tls", "0", "--broker-port-tls", "0"]
    cluster = StandaloneCluster(base / "data", ["--secure", *ports]).start()
    security = base / "data" / "security"
    tls = {"tls_trust_certs_file_path": str(security / "ca.cert.pem")}
    url = cluster.endpoints["service_url_tls"]
    _grant_app(url, (security / "admin.token").read_text(), tls)
    token = create_token("app", secret_key=(security / "token-secret.key").read_bytes())
    return cluster, url, {"authentication": AuthenticationToken(token), **tls}


def _plain(base: Path) -> StandaloneCluster:
    cluster = StandaloneCluster(base / "data").start()
    with Admin(cluster.service_url) as admin:
        admin.tenants.create_tenant("bench")
        admin.namespaces.create_namespace("bench/ns", bundles=1)
    return cluster


def _servers(cluster: StandaloneCluster) -> list[psutil.Process]:
    pids = cluster.endpoints["pids"]
    return [psutil.Process(pids[role]) for role in ("broker", "bookie")]


def _cpu_s(processes: list[psutil.Process]) -> float:
    total = 0.0
    for p in processes:
        times = p.cpu_times()
        total += times.user + times.system
    return total


def _median(rows: list[dict], *path: str) -> float:
    values = []
    for row in rows:
        value = row
        for key in path:
            value = value[key]
        values.append(float(value))  # type: ignore[arg-type]
    return statistics.median(values)


def _in_process_costs(n: int = 20000) -> dict[str, float]:
    """Microseconds per call of each check, in this process."""
    key = create_secret_key()
    verifier = TokenVerifier(secret_key=key, max_cached=1000)
    token = create_token("app", secret_key=key)
    t0 = time.perf_counter()
    for _ in range(n):
        verifier.verify(token)
    cached = (time.perf_counter() - t0) / n * 1e6
    fresh = TokenVerifier(secret_key=key, max_cached=0)
    t0 = time.perf_counter()
    for _ in range(n // 10):
        fresh.verify(token)
    uncached = (time.perf_counter() - t0) / (n // 10) * 1e6

    authorizer = BrokerAuthorizer(None, frozenset({"admin"}), 100)  # type: ignore[arg-type]
    grants = AuthPolicies().granted("app", frozenset({AuthAction.PRODUCE, AuthAction.CONSUME}))
    authorizer._cache["bench/ns"] = NamespaceAccess(frozenset(), grants)
    gatekeeper = BrokerGatekeeper(authorizer)
    request = broker_pb2.LookupRequest(topic="persistent://bench/ns/t")

    async def decide() -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            await gatekeeper.admit("Broker/Lookup", "app", request)
        return (time.perf_counter() - t0) / n * 1e6

    return {
        "token_check_cached_us": round(cached, 2),
        "token_check_uncached_us": round(uncached, 2),
        "authorization_decision_us": round(asyncio.run(decide()), 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--n", type=int, default=100000)
    ap.add_argument("--rate", type=int, default=2000)
    ap.add_argument("--seconds", type=float, default=10.0)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        plain = _plain(Path(tmp) / "plain")
        auth, auth_url, auth_client = _auth(Path(tmp) / "auth")
        ctls, ctls_url, ctls_client = _auth(Path(tmp) / "client_tls", client_tls=True)
        secure, secure_url, secure_client = _secure(Path(tmp) / "secure")
        clusters = {"plain": plain, "auth": auth, "client_tls": ctls, "secure": secure}
        sides = {
            "plain": (plain.service_url, {}),
            "auth": (auth_url, auth_client),
            "client_tls": (ctls_url, ctls_client),
            "secure": (secure_url, secure_client),
        }
        rows: dict[str, dict[str, list[dict]]] = {s: {"pipe": [], "e2e": []} for s in sides}
        try:
            for pair in range(a.pairs):
                for side, (url, client) in sides.items():
                    topic = f"persistent://bench/ns/pipe-{pair}"
                    servers = _servers(clusters[side])
                    cpu0 = _cpu_s(servers)
                    pipe = run_pipelined(url, topic, 1024, a.n, 60.0, 10000, client)
                    pipe["server_cpu_us_per_msg"] = round(
                        (_cpu_s(servers) - cpu0) / max(1, pipe["msgs"]) * 1e6, 2
                    )
                    rows[side]["pipe"].append(pipe)
                    print(json.dumps({"side": side, "pair": pair, **pipe}), flush=True)
                for side, (url, client) in sides.items():
                    topic = f"persistent://bench/ns/e2e-{pair}"
                    e2e = run_e2e_rate(url, topic, 1024, a.rate, a.seconds, client)
                    rows[side]["e2e"].append(e2e)
                    print(json.dumps({"side": side, "pair": pair, **e2e}), flush=True)
        finally:
            for cluster in clusters.values():
                cluster.stop()
    summary: dict[str, float] = {}
    for side in sides:
        summary[f"{side}_pipelined_msgs_s"] = _median(rows[side]["pipe"], "msgs_s")
        summary[f"{side}_server_cpu_us_per_msg"] = _median(
            rows[side]["pipe"], "server_cpu_us_per_msg"
        )
        for p in ("p50", "p99", "p99.9"):
            summary[f"{side}_e2e_{p}_ms"] = _median(rows[side]["e2e"], "e2e_latency_ms", p)
    for side in ("auth", "client_tls", "secure"):
        summary[f"{side}_pipelined_ratio"] = round(
            summary[f"{side}_pipelined_msgs_s"] / summary["plain_pipelined_msgs_s"], 3
        )
        summary[f"{side}_server_cpu_ratio"] = round(
            summary[f"{side}_server_cpu_us_per_msg"] / summary["plain_server_cpu_us_per_msg"], 3
        )
        summary[f"{side}_e2e_p99_ratio"] = round(
            summary[f"{side}_e2e_p99_ms"] / summary["plain_e2e_p99_ms"], 3
        )
    print(json.dumps({"summary": summary, "in_process": _in_process_costs()}), flush=True)


if __name__ == "__main__":
    main()
