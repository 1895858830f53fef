"""The metric names a PromQL expression selects, for the tests that hold the
shipped dashboards and rules (deploy/grafana, deploy/prometheus) to the
names the processes export.

Not a PromQL parser: Prometheus itself (``promtool``, ``/api/v1/query``)
judges whether an expression is valid. This is a tokenizer and the few rules
that tell a metric name from the other identifiers:

* an identifier followed by ``(`` is a function or an aggregation;
* aggregation operators, set and comparison keywords (``sum``, ``and``,
  ``bool``, ``offset``, ...) are never names;
* ``by``/``without``/``on``/``ignoring``/``group_left``/``group_right``
  take a list of label names in parentheses;
* inside ``{...}`` come label matchers: only ``__name__="x"`` (a name) and
  ``__name__=~"re"`` (a pattern) select metrics;
* inside ``[...]`` come durations and a subquery step;
* strings, numbers and durations are skipped.

Grafana's additions are tolerated: ``$var``, ``${var}``, ``${var:format}``
and ``[[var]]`` are skipped wherever they stand, and the template-variable
query ``label_values([selector,] label)`` selects what its selector selects
(its last argument is a label name).

Brackets must balance, strings must close and label matchers must read
``label op "value"``; anything else raises ``PromQLSyntaxError``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Collection
from dataclasses import dataclass, field

_TOKEN = re.compile(
    r"""
      (?P<space>\s+|\#[^\n]*)
    | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`[^`]*`)
    | (?P<variable>\$\{[^}]*\}|\$\w+|\[\[\w+(?::\w+)?\]\])
    | (?P<duration>(?:\d+(?:ms|[smhdwy]))+)(?![\w.])
    | (?P<number>(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?))(?![\w.])
    | (?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
    | (?P<op>=~|!~|!=|==|>=|<=|[-+*/%^<>=,@:])
    | (?P<open>[({\[])
    | (?P<close>[)}\]])
    """,
    re.VERBOSE,
)
_CLOSING = {"(": ")", "{": "}", "[": "]"}

# Identifiers that are never metric names, in any letter case (PromQL's
# keywords are case-insensitive). Functions need no list: they are
# followed by "(".
AGGREGATIONS = frozenset(
    [
        "sum",
        "min",
        "max",
        "avg",
        "group",
        "stddev",
        "stdvar",
        "count",
        "count_values",
        "bottomk",
        "topk",
        "quantile",
        "limitk",
        "limit_ratio",
    ]
)
KEYWORDS = AGGREGATIONS | frozenset(
    ["and", "or", "unless", "atan2", "bool", "offset", "inf", "nan"]
)
# Keywords whose parenthesised argument is a list of label names.
LABEL_LIST_KEYWORDS = frozenset(["by", "without", "on", "ignoring", "group_left", "group_right"])
_MATCH_OPS = frozenset({"=", "!=", "=~", "!~"})


class PromQLSyntaxError(ValueError):
    """An expression this module cannot read: what is wrong and where."""


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    pos: int


@dataclass(frozen=True)
class Selection:
    """Exact metric names, and the regexes of ``{__name__=~"..."}``
    selectors (anchored at both ends, as Prometheus anchors them)."""

    names: frozenset[str] = field(default_factory=frozenset)
    patterns: frozenset[str] = field(default_factory=frozenset)

    def __or__(self, other: Selection) -> Selection:
        return Selection(self.names | other.names, self.patterns | other.patterns)

    def missing_from(self, exported: Collection[str]) -> list[str]:
        """The names not in ``exported`` and the patterns matching none of it."""
        missing = sorted(self.names - set(exported))
        for pattern in sorted(self.patterns):
            if not any(re.fullmatch(pattern, name) for name in exported):
                missing.append(f'{{__name__=~"{pattern}"}}')
        return missing


def tokenize(expr: str) -> list[Token]:
    tokens = []
    pos = 0
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if m is None:
            raise PromQLSyntaxError(f"unexpected {expr[pos : pos + 10]!r} at {pos} in {expr!r}")
        kind = m.lastgroup
        assert kind is not None
        if kind != "space":
            tokens.append(Token(kind, m.group(kind), pos))
        pos = m.end()
    return tokens


def _matching(tokens: list[Token]) -> dict[int, int]:
    """Index of each opening bracket -> index of its closing one."""
    stack: list[int] = []
    pairs: dict[int, int] = {}
    for i, tok in enumerate(tokens):
        if tok.kind == "open":
            stack.append(i)
        elif tok.kind == "close":
            if not stack or _CLOSING[tokens[stack[-1]].text] != tok.text:
                raise PromQLSyntaxError(f"unbalanced {tok.text!r} at {tok.pos}")
            pairs[stack.pop()] = i
    if stack:
        opened = tokens[stack[-1]]
        raise PromQLSyntaxError(f"{opened.text!r} at {opened.pos} is never closed")
    return pairs


def _unquote(tok: Token) -> str:
    if tok.text.startswith("`"):
        return tok.text[1:-1]
    return str(ast.literal_eval(tok.text))


def _matchers(tokens: list[Token]) -> Selection:
    """``label op "value"`` triples separated by commas (a trailing one allowed)."""
    names: set[str] = set()
    patterns: set[str] = set()
    i = 0
    while i < len(tokens):
        triple = tokens[i : i + 3]
        if (
            len(triple) < 3
            or triple[0].kind != "ident"
            or triple[1].text not in _MATCH_OPS
            or triple[2].kind != "string"
        ):
            where = tokens[i]
            raise PromQLSyntaxError(f'expected label op "value" at {where.pos}, got {where.text!r}')
        label, op, value = triple
        if label.text == "__name__" and op.text == "=":
            names.add(_unquote(value))
        elif label.text == "__name__" and op.text == "=~":
            patterns.add(_unquote(value))
        i += 3
        if i < len(tokens):
            if tokens[i].text != ",":
                raise PromQLSyntaxError(f"expected ',' at {tokens[i].pos}, got {tokens[i].text!r}")
            i += 1
    return Selection(frozenset(names), frozenset(patterns))


def _split_arguments(tokens: list[Token]) -> list[list[Token]]:
    """Top-level comma-separated arguments of a call's parenthesised tokens."""
    args: list[list[Token]] = [[]]
    depth = 0
    for tok in tokens:
        depth += tok.kind == "open"
        depth -= tok.kind == "close"
        if depth == 0 and tok.text == ",":
            args.append([])
        else:
            args[-1].append(tok)
    return args


def _select(tokens: list[Token]) -> Selection:
    pairs = _matching(tokens)
    found = Selection()
    names: set[str] = set()
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        called = i + 1 < len(tokens) and tokens[i + 1].text == "("
        if tok.text in ("{", "["):
            if tok.text == "{":
                found |= _matchers(tokens[i + 1 : pairs[i]])
            i = pairs[i] + 1
        elif tok.kind != "ident":
            i += 1
        elif tok.text.lower() in LABEL_LIST_KEYWORDS:
            i = pairs[i + 1] + 1 if called else i + 1
        elif tok.text == "label_values" and called:
            # Grafana: label_values(label) or label_values(selector, label).
            end = pairs[i + 1]
            args = _split_arguments(tokens[i + 2 : end])
            for arg in args[:-1]:
                found |= _select(arg)
            i = end + 1
        else:
            if not called and tok.text.lower() not in KEYWORDS:
                names.add(tok.text)
            i += 1
    return found | Selection(frozenset(names))


def selected_metrics(expr: str) -> Selection:
    """The metric names and ``__name__`` patterns ``expr`` selects."""
    tokens = tokenize(expr)
    if not tokens:
        raise PromQLSyntaxError("empty expression")
    return _select(tokens)
