"""tests/promql.py: which metric names an expression selects, as a table of
expression -> names (and ``__name__`` patterns), and what it refuses."""

from __future__ import annotations

import pytest

from tests.promql import PromQLSyntaxError, Selection, selected_metrics


def _names(*names: str, patterns: tuple[str, ...] = ()) -> Selection:
    return Selection(frozenset(names), frozenset(patterns))


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("up", _names("up")),
        ("up == 0", _names("up")),
        ('pulsar_rate_in{namespace="public/default"}', _names("pulsar_rate_in")),
        # Functions, aggregations, label lists, a range and a number.
        (
            "histogram_quantile(0.99, sum by (le) "
            "(rate(pulsar_metadata_store_ops_latency_ms_bucket[5m])))",
            _names("pulsar_metadata_store_ops_latency_ms_bucket"),
        ),
        # by after the aggregation, without, on(...) and group_left.
        ("sum(rate(x_total[1m])) by (le, instance)", _names("x_total")),
        ("sum without (instance) (x) / on(namespace) group_left y", _names("x", "y")),
        ("x / ignoring(instance) group_right(topic, subscription) y", _names("x", "y")),
        ("x * on (namespace) group_left z", _names("x", "z")),
        # Set operators and bool; keywords in capitals are keywords too.
        ("a > 1000 and deriv(a[10m]) > 0", _names("a")),
        ("a unless b or c", _names("a", "b", "c")),
        ("a > bool 5", _names("a")),
        ("SUM BY (le) (a) AND b", _names("a", "b")),
        # Durations, offset, @, a subquery.
        ("a offset 5m", _names("a")),
        ("a offset -1h30m", _names("a")),
        ("a @ 1609746000", _names("a")),
        ("a @ end()", _names("a")),
        ("max_over_time(rate(a[1m])[1h:5m])", _names("a")),
        ("increase(a[15m]) >= 4", _names("a")),
        # Numbers of every form, Inf and NaN.
        ("a * 1e3 + 0x1F - .5 + 2.5E-3", _names("a")),
        ("clamp_max(a, +Inf) > NaN", _names("a")),
        # Strings, also ones that look like names or variables.
        ('label_replace(a, "dst", "$1", "src", "(.*)")', _names("a")),
        ("count_values('value', a)", _names("a")),
        ("a{job=`b`}", _names("a")),
        # Selecting by __name__: exact and regex; a negative one selects nothing.
        ('{__name__="bookie_SERVER_STATUS"}', _names("bookie_SERVER_STATUS")),
        (
            '{__name__=~"bookie_ledger_dir_.*_usage"}',
            _names(patterns=("bookie_ledger_dir_.*_usage",)),
        ),
        (
            '{__name__=~"bookie_ledger_dir_.+_usage", instance=~"$instance"} > 90',
            _names(patterns=("bookie_ledger_dir_.+_usage",)),
        ),
        ('{job="bookie", __name__!~"python_.*"}', _names()),
        # Recording-rule names hold colons.
        ("namespace:pulsar_rate_in:sum", _names("namespace:pulsar_rate_in:sum")),
        # Grafana's variables, wherever they stand.
        (
            'sum by (topic) (pulsar_rate_in{namespace=~"$namespace", topic=~"${topic}"})',
            _names("pulsar_rate_in"),
        ),
        ("rate(a_total[$__rate_interval])", _names("a_total")),
        ("rate(a_total[${__interval}]) offset $offset", _names("a_total")),
        ("topk($limit, a)", _names("a")),
        ('a{topic=~"${topic:regex}"}[[interval]]', _names("a")),
        # Grafana's template-variable queries.
        ("label_values(pulsar_rate_in, namespace)", _names("pulsar_rate_in")),
        (
            'label_values(pulsar_subscription_back_log{topic=~"$topic"}, subscription)',
            _names("pulsar_subscription_back_log"),
        ),
        ("label_values(instance)", _names()),
        ("query_result(topk(5, pulsar_msg_backlog))", _names("pulsar_msg_backlog")),
        # A comment.
        ("a # and not_a_name", _names("a")),
    ],
)
def test_selected_metric_names(expr: str, expected: Selection) -> None:
    assert selected_metrics(expr) == expected


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("", "empty expression"),
        ("sum(rate(a[5m])", "never closed"),
        ("a[5m]]", "unbalanced"),
        ("sum(a]", "unbalanced"),
        ('a{job="x}', "unexpected"),
        ("a{job}", "expected label op"),
        ('a{job="x" instance="y"}', "expected ','"),
        ("a{job=x}", "expected label op"),
        ("rate(a[5m]) ; b", "unexpected"),
        ("1x", "unexpected"),
    ],
)
def test_refuses_what_it_cannot_read(expr: str, message: str) -> None:
    with pytest.raises(PromQLSyntaxError, match=message):
        selected_metrics(expr)


def test_missing_names_and_patterns_that_match_nothing() -> None:
    exported = {"pulsar_rate_in", "bookie_ledger_dir__data_usage", "up"}
    found = selected_metrics(
        'pulsar_rate_in + pulsar_rate_typo + {__name__=~"bookie_ledger_dir_.+_usage"}'
        ' + {__name__=~"bookie_journal_.+"}'
    )
    assert found.missing_from(exported) == [
        "pulsar_rate_typo",
        '{__name__=~"bookie_journal_.+"}',
    ]
