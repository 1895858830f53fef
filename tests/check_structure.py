"""The code's shape, checked from its syntax alone (``make lint`` runs it).

* **Layers go one way.** Each package may import only the packages below it
  (``ALLOWED``): ``client -> protos``; ``broker -> bookie, metastore,
  protos``; ``bookie -> metastore, protos``; ``metastore -> protos``;
  ``spark -> client, protos``. ``protos`` imports none of them.
* **No import circles**, between packages or between modules. Every import
  counts, wherever it stands: at module level, inside a function, or under
  ``if TYPE_CHECKING:`` (a type-only cycle is still two modules that must
  change together). A package's ``__init__`` re-exporting its submodules is
  the one exception: importing ``pkg.mod`` is an edge to ``pkg.mod`` only.
* **The SDK never loads server runtime**: nothing ``client`` reaches imports
  ``prometheus_client`` or ``grpc_health``.
* **The broker's core is protocol-independent**: only its client-protocol
  front-ends (``FRONT_ENDS``) and the process wiring import the gRPC
  client protocol (``protos.broker_pb2``, ``protos.broker_pb2_grpc``), so a
  second protocol could sit beside them without the core changing.
* **Sizes**: a module of a package is at most ``MODULE_LINES_MAX`` lines and
  a function anywhere at most ``FUNCTION_LINES_MAX`` (CONVENTIONS: one
  concept per module; TigerBeetle's short functions).

Generated protobuf modules are left out. Exit status 1 and one line per
finding when anything is off.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("protos", "metastore", "bookie", "broker", "client", "spark")
OTHER_CODE = ("tests", "benchmarks")
ALLOWED: dict[str, set[str]] = {
    "protos": set(),
    "metastore": {"protos"},
    "bookie": {"metastore", "protos"},
    "broker": {"bookie", "metastore", "protos"},
    "client": {"protos"},
    "spark": {"client", "protos"},
}
SERVER_RUNTIME = ("prometheus_client", "grpc_health")
CLIENT_PROTOCOL = ("protos.broker_pb2", "protos.broker_pb2_grpc")
FRONT_ENDS = {
    "broker.service",
    "broker.producer_stream",
    "broker.producer_mux",  # many producer streams on one gRPC stream
    "broker.consumer_stream",
    "broker.admin_service",
    "broker.access_rules",  # what each RPC needs: the gatekeeper of the access guard
    "broker.peer_brokers",  # calls another broker's admin service
    "broker.system_producer",  # the broker's own producer on its system topics
    "broker.server",  # the process wiring: registers the front-ends
}
MODULE_LINES_MAX = 600
FUNCTION_LINES_MAX = 70


def _is_generated(path: Path) -> bool:
    return path.name.endswith(("_pb2.py", "_pb2_grpc.py"))


def _python_files(top: str, generated: bool = False) -> Iterator[Path]:
    for path in sorted((ROOT / top).rglob("*.py")):
        if generated or not _is_generated(path):
            yield path


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_names(tree: ast.AST) -> Iterator[str]:
    """Every dotted name an import statement anywhere in ``tree`` names;
    ``from a import b`` gives ``a.b`` (a submodule or a name in ``a``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                yield f"{node.module}.{alias.name}"


def _resolve(name: str, modules: set[str]) -> str | None:
    """The project module an imported name lands in (the longest prefix)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


def import_graph(files: list[Path]) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(module -> project modules it imports, module -> third-party top names)."""
    trees = {module_name(p): ast.parse(p.read_text(), str(p)) for p in files}
    modules = set(trees)
    edges: dict[str, set[str]] = {m: set() for m in modules}
    external: dict[str, set[str]] = {m: set() for m in modules}
    for module, tree in trees.items():
        for name in imported_names(tree):
            target = _resolve(name, modules)
            if target is None:
                external[module].add(name.split(".")[0])
            elif target != module:
                edges[module].add(target)
    return edges, external


class _Tarjan:
    """Strongly connected components (Tarjan's algorithm)."""

    def __init__(self, edges: dict[str, set[str]]) -> None:
        self.edges = edges
        self.index: dict[str, int] = {}
        self.low: dict[str, int] = {}
        self.stack: list[str] = []
        self.on_stack: set[str] = set()
        self.components: list[list[str]] = []

    def visit(self, node: str) -> None:
        self.index[node] = self.low[node] = len(self.index)
        self.stack.append(node)
        self.on_stack.add(node)
        for nxt in sorted(self.edges.get(node, ())):
            if nxt not in self.index:
                self.visit(nxt)
                self.low[node] = min(self.low[node], self.low[nxt])
            elif nxt in self.on_stack:
                self.low[node] = min(self.low[node], self.index[nxt])
        if self.low[node] == self.index[node]:
            self._pop_component(node)

    def _pop_component(self, root: str) -> None:
        component = []
        while True:
            member = self.stack.pop()
            self.on_stack.discard(member)
            component.append(member)
            if member == root:
                break
        self.components.append(sorted(component))


def find_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node."""
    tarjan = _Tarjan(edges)
    for node in sorted(edges):
        if node not in tarjan.index:
            tarjan.visit(node)
    return [c for c in tarjan.components if len(c) > 1]


def _package(module: str) -> str:
    return module.split(".")[0]


def layer_findings(edges: dict[str, set[str]]) -> list[str]:
    out = []
    for module, targets in sorted(edges.items()):
        pkg = _package(module)
        if pkg not in ALLOWED:
            continue
        for target in sorted(targets):
            other = _package(target)
            if other != pkg and other not in ALLOWED[pkg]:
                out.append(
                    f"layer: {module} imports {target} ({pkg} may import {sorted(ALLOWED[pkg])})"
                )
    return out


def cycle_findings(edges: dict[str, set[str]]) -> list[str]:
    package_edges: dict[str, set[str]] = {}
    for module, targets in edges.items():
        package_edges.setdefault(_package(module), set()).update(
            _package(t) for t in targets if _package(t) != _package(module)
        )
    out = [f"package circle: {' <-> '.join(c)}" for c in find_cycles(package_edges)]
    out += [f"module circle: {' <-> '.join(c)}" for c in find_cycles(edges)]
    return out


def reachable(edges: dict[str, set[str]], start: set[str]) -> set[str]:
    seen = set(start)
    todo = list(start)
    while todo:
        for nxt in edges.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def sdk_findings(edges: dict[str, set[str]], external: dict[str, set[str]]) -> list[str]:
    sdk = {m for m in edges if _package(m) == "client"}
    return [
        f"sdk: {module} (reached from client) imports {name}"
        for module in sorted(reachable(edges, sdk))
        for name in sorted(external.get(module, set()) & set(SERVER_RUNTIME))
    ]


def core_findings(edges: dict[str, set[str]]) -> list[str]:
    return [
        f"core: {module} imports {target} (only the front-ends speak the client protocol)"
        for module, targets in sorted(edges.items())
        if _package(module) == "broker" and module not in FRONT_ENDS
        for target in sorted(targets & set(CLIENT_PROTOCOL))
    ]


def size_findings(files: list[Path]) -> list[str]:
    out = []
    for path in files:
        text = path.read_text()
        rel = path.relative_to(ROOT)
        lines = text.count("\n")
        if rel.parts[0] in PACKAGES and lines > MODULE_LINES_MAX:
            out.append(f"size: {rel} has {lines} lines (at most {MODULE_LINES_MAX})")
        for node in ast.walk(ast.parse(text, str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > FUNCTION_LINES_MAX:
                    out.append(
                        f"size: {rel}:{node.lineno} {node.name}() has {length} lines "
                        f"(at most {FUNCTION_LINES_MAX})"
                    )
    return out


def findings() -> list[str]:
    files = [p for top in (*PACKAGES, *OTHER_CODE) for p in _python_files(top)]
    # Generated modules are nodes of the graph (so ``from protos import
    # common_pb2`` lands on them, not on ``protos/__init__``), not sized.
    edges, external = import_graph([p for top in PACKAGES for p in _python_files(top, True)])
    return (
        layer_findings(edges)
        + cycle_findings(edges)
        + sdk_findings(edges, external)
        + core_findings(edges)
        + size_findings(files)
    )


def main() -> int:
    found = findings()
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
