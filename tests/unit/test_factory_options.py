"""The official client's options of create_producer / subscribe /
create_reader / send (client/_factory_options.py): honoured, accepted at
their defaults, or refused by name; and the service URL schemes."""

from __future__ import annotations

import pytest

from client._connection import is_tls_url, parse_service_url
from client._factory_options import (
    CONSUMER_OPTIONS,
    NOT_SUPPORTED,
    PRODUCER_OPTIONS,
    check_options,
    pattern_topic,
)
from client.enums import ConsumerCryptoFailureAction
from client.exceptions import InvalidConfiguration, InvalidUrl

# (call, options, kept, error text or None)
CASES = [
    ("create_producer", {"producer_name": "p"}, {"producer_name": "p"}, None),
    ("create_producer", {"encryption_key": None}, {}, None),  # the default: changes nothing
    ("create_producer", {"encryption_key": "k"}, None, "encryption_key='k'"),
    ("create_producer", {"lazy_start_partitioned_producers": True}, None, "lazy_start"),
    ("create_producer", {"no_such_option": 1}, None, "unknown option 'no_such_option'"),
    ("subscribe", {"crypto_failure_action": ConsumerCryptoFailureAction.FAIL}, {}, None),
    (
        "subscribe",
        {"crypto_failure_action": ConsumerCryptoFailureAction.DISCARD},
        None,
        "encryption",
    ),
    ("subscribe", {"replicate_subscription_state_enabled": True}, None, "geo-replication"),
    ("subscribe", {"broker_consumer_stats_cache_time_ms": 30000}, {}, None),
    ("subscribe", {"broker_consumer_stats_cache_time_ms": 1}, None, "stats"),
    ("create_reader", {"reader_name": "r", "crypto_key_reader": None}, {"reader_name": "r"}, None),
    ("send", {"replication_clusters": None, "disable_replication": False}, {}, None),
    ("send", {"disable_replication": True}, None, "geo-replication"),
]


@pytest.mark.parametrize("call, options, kept, error", CASES)
def test_options_are_honoured_accepted_at_default_or_refused_by_name(call, options, kept, error):
    if error is None:
        assert check_options(call, options) == kept
    else:
        with pytest.raises(InvalidConfiguration, match=error):
            check_options(call, options)


def test_no_option_is_both_honoured_and_refused():
    assert not PRODUCER_OPTIONS & set(NOT_SUPPORTED["create_producer"])
    assert not CONSUMER_OPTIONS & set(NOT_SUPPORTED["subscribe"])


@pytest.mark.parametrize(
    "url, hosts, tls",
    [
        ("magnetar://a:6650", ["a:6650"], False),
        ("pulsar://a:6650,b:6651", ["a:6650", "b:6651"], False),
        ("magnetar+tls://a:6651", ["a:6651"], True),
        ("pulsar+ssl://a:6651", ["a:6651"], True),
        ("a:6650", ["a:6650"], False),
    ],
)
def test_pulsar_schemes_are_aliases(url, hosts, tls):
    assert parse_service_url(url) == hosts and is_tls_url(url) is tls


def test_other_schemes_are_refused():
    with pytest.raises(InvalidUrl, match="pulsar://"):
        parse_service_url("http://a:8080")


def test_a_pattern_given_as_a_string_is_compiled_only_when_flagged():
    assert pattern_topic("t-.*", False) == "t-.*"
    assert pattern_topic("t-.*", True).pattern == "t-.*"
    with pytest.raises(InvalidConfiguration, match="not a regex"):
        pattern_topic("t-(", True)
    with pytest.raises(InvalidConfiguration, match="as a str"):
        pattern_topic(["a"], True)
