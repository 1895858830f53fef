"""The Kubernetes manifests (deploy/k8s), checked offline: `kubectl
kustomize` renders the base and the dev overlay, `kubernetes-validate
--strict` accepts every document against a recent Kubernetes' schemas, and
the rendered objects keep the invariants the processes depend on (the
metastore peer list matches the replica count and the pods' DNS names, PDBs
keep a Raft majority and lose at most one bookie, probes ask ports the
process listens on, volumes are mounted where the process keeps its data).
No cluster is needed."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
K8S = ROOT / "deploy" / "k8s"
TARGETS = ["base", "overlays/dev"]
KUBERNETES_VERSION = "1.30"
# Each process's ports: the settings' defaults (docs/configuration.md).
GRPC_PORT = {"metastore": 2379, "bookie": 3181, "broker": 6650}
METRICS_PORT = {"metastore": 7000, "bookie": 8000, "broker": 8080}


def render(target: str) -> str:
    if shutil.which("kubectl") is None:
        if target == "base":
            return render_base_plainly()
        pytest.skip("kubectl is not installed: the dev overlay (patches) is not rendered")
    done = subprocess.run(
        ["kubectl", "kustomize", str(K8S / target)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def render_base_plainly() -> str:
    """What ``kubectl kustomize base`` makes of the base, for machines
    without kubectl: its resources, the ConfigMap its generator makes (name
    without kustomize's hash), the common labels and the image. The base
    uses nothing else of kustomize (a test with kubectl checks the two agree
    on every document's kind and name)."""
    base = K8S / "base"
    k = yaml.safe_load((base / "kustomization.yaml").read_text())
    docs = [d for f in k["resources"] for d in yaml.safe_load_all((base / f).read_text()) if d]
    for gen in k.get("configMapGenerator", []):
        data = {f: (base / f).read_text() for f in gen["files"]}
        docs.append({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": gen["name"]}, "data": data})  # fmt: skip
    labels = {key: v for entry in k.get("labels", []) for key, v in entry["pairs"].items()}
    images = {i["name"]: f"{i['newName']}:{i['newTag']}" for i in k.get("images", [])}
    for d in docs:
        d["metadata"].setdefault("labels", {}).update(labels)
        for c in d.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
            c["image"] = images.get(c["image"], c["image"])
    return str(yaml.safe_dump_all(docs))


def test_the_plain_rendering_of_the_base_matches_kustomize() -> None:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed: nothing to compare the plain rendering with")

    def names(text: str) -> list[tuple[str, str]]:
        docs = [d for d in yaml.safe_load_all(text) if d]
        return sorted((d["kind"], d["metadata"]["name"].split("-")[0]) for d in docs)

    assert names(render("base")) == names(render_base_plainly())


class Rendered:
    def __init__(self, text: str) -> None:
        self.docs: list[dict[str, Any]] = [d for d in yaml.safe_load_all(text) if d]

    def one(self, kind: str, name: str) -> dict[str, Any]:
        found = [d for d in self.docs if d["kind"] == kind and d["metadata"]["name"] == name]
        assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
        return found[0]

    def settings(self) -> dict[str, Any]:
        (cm,) = [d for d in self.docs if d["kind"] == "ConfigMap"]
        return tomllib.loads(cm["data"]["magnetar.toml"])

    def container(self, name: str) -> dict[str, Any]:
        pod = self.one("StatefulSet", name)["spec"]["template"]["spec"]
        (c,) = pod["containers"]
        return dict(c)


@pytest.fixture(params=TARGETS)
def rendered(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, Rendered]:
    text = render(request.param)
    return request.param, Rendered(text)


@pytest.mark.parametrize("target", TARGETS)
def test_every_document_is_valid_for_kubernetes(target: str, tmp_path: Path) -> None:
    manifests = tmp_path / "rendered.yaml"
    manifests.write_text(render(target))
    tool = Path(sys.executable).parent / "kubernetes-validate"
    done = subprocess.run(
        [str(tool), "--strict", "-k", KUBERNETES_VERSION, str(manifests)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    kinds = {d["kind"] for d in Rendered(manifests.read_text()).docs}
    assert {"StatefulSet", "Service", "PodDisruptionBudget", "ConfigMap"} <= kinds


def test_the_validator_rejects_an_unknown_field(tmp_path: Path) -> None:
    """The check above is only worth something if a typo fails it."""
    docs = list(yaml.safe_load_all(render("base")))
    sts = next(d for d in docs if d["kind"] == "StatefulSet")
    sts["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {"grpc": {"port": 1}}
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump_all(docs))
    tool = Path(sys.executable).parent / "kubernetes-validate"
    done = subprocess.run(
        [str(tool), "--strict", "-k", KUBERNETES_VERSION, str(bad)], capture_output=True, text=True
    )
    assert done.returncode != 0
    assert "readinesProbe" in done.stdout + done.stderr


def test_metastore_peers_match_the_pods(rendered: tuple[str, Rendered]) -> None:
    _, r = rendered
    sts = r.one("StatefulSet", "metastore")
    replicas, service = sts["spec"]["replicas"], sts["spec"]["serviceName"]
    settings = r.settings()
    peers = [p.strip() for p in settings["metastore"]["peers"].split(",")]
    expected = [f"{i + 1}=metastore-{i}.{service}:2379:2380" for i in range(replicas)]
    assert peers == expected
    # Each pod's command line, as its shell runs it, names the id whose
    # peers entry is that pod's own DNS name.
    for i in range(replicas):
        argv = _metastore_argv(r.container("metastore"), f"metastore-{i}")
        node_id = _flag(argv, "--id")
        assert f"{node_id}=metastore-{i}.{service}:2379:2380" in peers
    headless = r.one("Service", service)["spec"]
    assert headless["clusterIP"] == "None" and headless["publishNotReadyAddresses"] is True
    assert sts["spec"]["podManagementPolicy"] == "Parallel"
    # Bookies and brokers are given every node.
    clients = ",".join(f"metastore-{i}.{service}:2379" for i in range(replicas))
    assert settings["bookie"]["metastore"] == clients
    assert settings["broker"]["metastore"] == clients


def test_disruption_budgets(rendered: tuple[str, Rendered]) -> None:
    _, r = rendered
    replicas = r.one("StatefulSet", "metastore")["spec"]["replicas"]
    if replicas > 1:
        assert (
            r.one("PodDisruptionBudget", "metastore")["spec"]["minAvailable"] == replicas // 2 + 1
        )
    else:  # one node: keeping "a majority" would block every drain
        assert not [d for d in r.docs if d["kind"] == "PodDisruptionBudget"
                    and d["metadata"]["name"] == "metastore"]  # fmt: skip
    assert r.one("PodDisruptionBudget", "bookie")["spec"]["maxUnavailable"] == 1
    for role in ("metastore", "bookie", "broker")[replicas == 1 :]:
        selector = r.one("PodDisruptionBudget", role)["spec"]["selector"]["matchLabels"]
        labels = r.one("StatefulSet", role)["spec"]["template"]["metadata"]["labels"]
        assert selector.items() <= labels.items()


def _metastore_argv(container: dict[str, Any], pod_name: str) -> list[str]:
    """The metastore's argv in pod ``pod_name``: Kubernetes turns ``$$`` into
    ``$``, then ``sh -c`` runs the script (its ``exec magnetar`` echoed)."""
    assert container["command"] == ["sh", "-c"]
    (script,) = container["args"]
    script = script.replace("$$", "$").replace("exec magnetar", "echo", 1)
    done = subprocess.run(
        ["sh", "-c", script], env={"HOSTNAME": pod_name, "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.split()


def _flag(args: list[str], name: str) -> str | None:
    joined = " ".join(args)
    m = re.search(rf"{name}[= ](\S+)", joined)
    return m.group(1) if m else None


@pytest.mark.parametrize("role", ["metastore", "bookie", "broker"])
def test_probes_ports_volumes_and_config(rendered: tuple[str, Rendered], role: str) -> None:
    target, r = rendered
    sts = r.one("StatefulSet", role)
    pod = sts["spec"]["template"]
    c = r.container(role)
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports["grpc"] == GRPC_PORT[role] and ports["metrics"] == METRICS_PORT[role]
    for probe in ("readinessProbe", "livenessProbe"):
        assert c[probe]["grpc"]["port"] == ports["grpc"], probe
    annotations = pod["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert int(annotations["prometheus.io/port"]) == ports["metrics"]
    assert "requests" in c["resources"] and "limits" in c["resources"]
    if target == "base":  # replicas on different nodes; the dev overlay runs on one
        (term,) = pod["spec"]["affinity"]["podAntiAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]
        assert term["topologyKey"] == "kubernetes.io/hostname"
        assert term["labelSelector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    else:
        assert "affinity" not in pod["spec"]
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    config = _flag(c["args"], "--config")
    assert config is not None and Path(config).parent == Path(mounts["config"])
    if role != "broker":
        claims = [t["metadata"]["name"] for t in sts["spec"]["volumeClaimTemplates"]]
        assert claims == ["data"]
        assert _flag(c["args"], "--data-dir") == mounts["data"]
    else:
        assert "volumeClaimTemplates" not in sts["spec"]
    if role in ("bookie", "broker"):
        # Advertised: the pod's stable name under its headless Service, whole,
        # so that clients in other namespaces resolve it too.
        service = sts["spec"]["serviceName"]
        advertised = f"$(POD_NAME).{service}.$(POD_NAMESPACE).svc"
        assert _flag(c["args"], "--advertised-address") == advertised
        env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in c["env"]}
        assert env["POD_NAME"] == "metadata.name" and env["POD_NAMESPACE"] == "metadata.namespace"
        assert r.one("Service", service)["spec"]["clusterIP"] == "None"
    # Every Service selecting these pods targets a port they declare.
    labels = pod["metadata"]["labels"]
    for svc in (d for d in r.docs if d["kind"] == "Service"):
        if svc["spec"]["selector"].items() <= labels.items():
            for p in svc["spec"]["ports"]:
                assert p["targetPort"] in ports, (svc["metadata"]["name"], p)
