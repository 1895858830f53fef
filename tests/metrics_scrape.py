"""Scraping a process's ``/metrics`` in tests, parsed by prometheus-client's
own parser (so what the tests read is what any Prometheus client reads)."""

from __future__ import annotations

import urllib.error
import urllib.request
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

Key = tuple[str, frozenset[tuple[str, str]]]


@dataclass
class Scrape:
    text: str
    types: dict[str, str] = field(default_factory=dict)  # family -> type
    samples: dict[Key, float] = field(default_factory=dict)

    def names(self) -> set[str]:
        return {name for name, _ in self.samples}

    def value(self, name: str, **labels: str) -> float:
        """The one sample of ``name`` whose labels include ``labels``."""
        found = self.matching(name, **labels)
        assert len(found) == 1, (name, labels, found)
        return next(iter(found.values()))

    def matching(self, name: str, **labels: str) -> dict[frozenset[tuple[str, str]], float]:
        want = set(labels.items())
        return {lab: v for (n, lab), v in self.samples.items() if n == name and want <= set(lab)}

    def get(self, name: str, **labels: str) -> float | None:
        """The one sample of ``name`` with ``labels``, None if not exactly one."""
        found = self.matching(name, **labels)
        return next(iter(found.values())) if len(found) == 1 else None


def parse(text: str) -> Scrape:
    """Samples under the names they are written with (prometheus-client's
    parser renames a counter's samples to ``*_total``, which would hide
    BookKeeper's names); the text must also satisfy that parser."""
    list(text_string_to_metric_families(text))  # raises on malformed text
    scrape = Scrape(text)
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            scrape.types[name] = kind
        elif line and not line.startswith("#"):
            name, labels, value = _sample(line)
            key = (name, frozenset(labels.items()))
            assert key not in scrape.samples, f"two samples of {key}"
            scrape.samples[key] = value
    return scrape


def _sample(line: str) -> tuple[str, dict[str, str], float]:
    brace = line.find("{")
    if brace < 0:
        name, _, value = line.partition(" ")
        return name, {}, float(value)
    name, rest = line[:brace], line[brace + 1 :]
    labels: dict[str, str] = {}
    i = 0
    while rest[i] != "}":
        eq = rest.index("=", i)
        key, i = rest[i:eq].lstrip(","), eq + 2  # past ="
        chars = []
        while rest[i] != '"':
            if rest[i] == "\\":
                i += 1
                chars.append({"n": "\n", "\\": "\\", '"': '"'}[rest[i]])
            else:
                chars.append(rest[i])
            i += 1
        labels[key] = "".join(chars)
        i += 1
        if rest[i] == ",":
            i += 1
    return name, labels, float(rest[i + 1 :].strip())


def get(port: int, path: str = "/metrics", timeout_s: float = 10) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout_s) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def scrape(port: int) -> Scrape:
    status, text = get(port)
    assert status == 200, (status, text[:200])
    return parse(text)
