"""``magnetar-admin`` (client/admin_cli.py) is the administration command;
the server command ``magnetar`` (broker/cli.py) has none.

The verbs against a running broker are tested by the integration tests that
call the CLI (test_stats, test_partitioned, test_dedup, test_ownership,
test_key_shared, test_load_manager)."""

from __future__ import annotations

import subprocess
import sys
import tomllib

import pytest
from click.testing import CliRunner

from client import _cli_common
from client.admin_cli import main as admin_main
from client.exceptions import InvalidConfiguration
from tests.harness import ROOT

# pulsar-admin's policy verb stems (broker/policies.py, POLICY_FIELDS): a
# topic may override the first ones, the last six are namespace-only.
TOPIC_POLICIES = (
    "retention",
    "message-ttl",
    "backlog-quota",
    "dispatch-rate",
    "subscription-dispatch-rate",
    "publish-rate",
    "subscribe-rate",
    "deduplication",
    "persistence",
    "max-producers-per-topic",
    "max-consumers-per-topic",
    "max-consumers-per-subscription",
    "max-subscriptions-per-topic",
    "max-unacked-messages-per-consumer",
    "max-unacked-messages-per-subscription",
    "inactive-topic-policies",
    "schema-compatibility-strategy",
    "compaction-threshold",
)
NAMESPACE_POLICIES = (
    *TOPIC_POLICIES,
    "max-topics-per-namespace",
    "auto-topic-creation",
    "auto-subscription-creation",
    "subscription-expiration-time",
    "is-allow-auto-update-schema",
    "schema-validation-enforce",
)


def _policy_verbs(stems: tuple[str, ...]) -> set[str]:
    """set-X, get-X, remove-X; pulsar-admin reads the quotas with get-backlog-quotas."""
    verbs = {f"{verb}-{stem}" for stem in stems for verb in ("set", "get", "remove")}
    return verbs - {"get-backlog-quota"} | {"get-backlog-quotas"}


# pulsar-admin's groups and the verbs of each that Magnetar has.
ADMIN_VERBS = {
    "bookies": {"decommission", "list", "list-bookies", "recover", "under-replicated"},
    "schemas": {"delete", "get", "upload"},
    "brokers": {"list", "leader-broker"},
    "namespaces": {
        "bundles",
        "clear-backlog",
        "create",
        "delete",
        "grant-permission",
        "grant-subscription-permission",
        "list",
        "permissions",
        "policies",
        "revoke-permission",
        "revoke-subscription-permission",
        "split-bundle",
        "topics",
        "unload",
        "unsubscribe",
        *_policy_verbs(NAMESPACE_POLICIES),
    },
    "stats": {"export"},  # the stats history (docs/stats-schema.md), beyond pulsar-admin
    "tenants": {"create", "delete", "get", "list", "update"},
    "topics": {
        "clear-backlog",
        "create-partitioned-topic",
        "create-subscription",
        "delete",
        "expire-messages",
        "expire-messages-all-subscriptions",
        "get-partitioned-topic-metadata",
        "grant-permission",
        "key-shared-lookup",
        "last-message-id",
        "list",
        "lookup",
        "partitioned-stats",
        "peek-messages",
        "permissions",
        "reset-cursor",
        "revoke-permission",
        "skip",
        "stats",
        "stats-internal",
        "terminate",
        "compact",
        "compaction-status",
        "unsubscribe",
        *_policy_verbs(TOPIC_POLICIES),
    },
}
# The servers, `magnetar health` for probes (issue 19) and `magnetar tokens` (issue 23).
SERVER_COMMANDS = {
    "bookie",
    "broker",
    "health",
    "local-cluster",
    "metastore",
    "standalone",
    "tokens",
    "verify",  # the fault-injection verifier (an SDK program, exec'd)
}


def _help(module: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", module, "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def _commands(help_text: str) -> set[str]:
    """The command names click lists under 'Commands:' (two spaces in; a
    wrapped help text goes on deeper)."""
    listing = help_text.split("Commands:", 1)[1]
    return {
        line.split()[0] for line in listing.splitlines() if line[:2] == "  " and line[2:3].strip()
    }


def test_magnetar_admin_help_lists_the_groups():
    text = _help("client.admin_cli")
    assert text.startswith("Usage: magnetar-admin [OPTIONS] COMMAND")
    assert "--service-url" in text and "MAGNETAR_SERVICE_URL" in text
    assert _commands(text) == set(ADMIN_VERBS)


def test_magnetar_help_has_only_the_server_commands_tokens_and_verify():
    assert _commands(_help("broker.cli")) == SERVER_COMMANDS


def test_every_group_has_pulsar_admins_verbs():
    runner = CliRunner()
    for group, verbs in ADMIN_VERBS.items():
        result = runner.invoke(admin_main, [group, "--help"])
        assert result.exit_code == 0, result.output
        assert _commands(result.output) == verbs, group


def test_the_console_script_is_declared():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["magnetar-admin"] == "client.admin_cli:main"
    assert scripts["magnetar"] == "broker.cli:main"


def test_an_sdk_error_prints_its_pulsar_name_and_exits_1():
    result = CliRunner().invoke(admin_main, ["--service-url", "http://h:1", "brokers", "list"])
    assert result.exit_code == 1
    assert result.output.startswith("Error: InvalidUrl: service URL 'http://h:1'")


def test_the_service_url_comes_from_the_environment():
    result = CliRunner().invoke(
        admin_main, ["topics", "stats", "t"], env={"MAGNETAR_SERVICE_URL": "ftp://h:1"}
    )
    assert result.exit_code == 1 and "service URL 'ftp://h:1'" in result.output


def test_key_shared_lookup_needs_exactly_one_of_key_and_hash():
    result = CliRunner().invoke(admin_main, ["topics", "key-shared-lookup", "t", "-s", "ks"])
    assert result.exit_code == 2 and "exactly one of --key and --hash" in result.output


class _FakeAdmin:
    """Stands for client.admin.Admin: records each call (``namespaces.set_retention``
    with its arguments) and answers None, so the CLI prints null."""

    def __init__(self, calls: list, path: str = "") -> None:
        self._calls = calls
        self._path = path

    def __getattr__(self, name: str) -> _FakeAdmin:
        return type(self)(self._calls, f"{self._path}.{name}".lstrip("."))

    def __call__(self, *args, **kwargs) -> None:
        self._calls.append((self._path, args, kwargs))

    def __enter__(self) -> _FakeAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


@pytest.fixture
def admin_calls(monkeypatch) -> list:
    calls: list = []
    monkeypatch.setattr(_cli_common, "Admin", lambda url, authentication=None: _FakeAdmin(calls))
    return calls


G, M, K = 1024**3, 1024**2, 1024
# (command line, the Admin call it makes): units converted, defaults filled in.
CALLS = [
    (
        "namespaces set-retention t/ns -s 10G -t 3h",
        "namespaces.set_retention",
        ("t/ns", 180, 10240),
    ),
    (
        "namespaces set-retention t/ns --size -1 --time -1",
        "namespaces.set_retention",
        ("t/ns", -1, -1),
    ),
    ("topics set-retention T -s 0 -t 0", "topics.set_retention", ("T", 0, 0)),
    ("topics set-message-ttl T -ttl 1h", "topics.set_message_ttl", ("T", 3600)),
    (
        "namespaces set-message-ttl t/ns --messageTTL 3600",
        "namespaces.set_message_ttl",
        ("t/ns", 3600),
    ),
    (
        "namespaces set-backlog-quota t/ns -l 2G -p producer_exception",
        "namespaces.set_backlog_quota",
        ("t/ns", 2 * G, -1, "producer_exception", "destination_storage"),
    ),
    (
        "topics set-backlog-quota T -lt 10h -p consumer_backlog_eviction -t message_age",
        "topics.set_backlog_quota",
        ("T", -1, 36000, "consumer_backlog_eviction", "message_age"),
    ),
    (
        "namespaces remove-backlog-quota t/ns -t message_age",
        "namespaces.remove_backlog_quota",
        ("t/ns", "message_age"),
    ),
    ("topics remove-backlog-quota T", "topics.remove_backlog_quota", ("T", "destination_storage")),
    (
        "namespaces get-backlog-quotas t/ns --applied",
        "namespaces.get_policy",
        ("t/ns", "backlog-quota", True),
    ),
    ("topics get-retention T", "topics.get_policy", ("T", "retention", False)),
    (
        "topics get-max-producers-per-topic T -ap",
        "topics.get_policy",
        ("T", "max-producers-per-topic", True),
    ),
    ("topics remove-message-ttl T", "topics.remove_policy", ("T", "message-ttl")),
    (
        "namespaces remove-auto-topic-creation t/ns",
        "namespaces.remove_policy",
        ("t/ns", "auto-topic-creation"),
    ),
    (
        "namespaces set-dispatch-rate t/ns -md 100 -bd 1M",
        "namespaces.set_dispatch_rate",
        ("t/ns", 100, M, 1, False),
    ),
    (
        "topics set-subscription-dispatch-rate T -md 5 -dt 2 -rp",
        "topics.set_dispatch_rate",
        ("T", 5, -1, 2, True),
    ),
    (
        "namespaces set-publish-rate t/ns -m 10 -b 1K",
        "namespaces.set_publish_rate",
        ("t/ns", 10, K),
    ),
    ("topics set-subscribe-rate T -sr 3", "topics.set_subscribe_rate", ("T", 3, 30)),
    (
        "namespaces set-persistence t/ns -e 3 -w 2 -a 2",
        "namespaces.set_persistence",
        ("t/ns", 3, 2, 2, 0.0),
    ),
    ("namespaces set-deduplication t/ns --enable", "namespaces.set_deduplication", ("t/ns", True)),
    ("namespaces set-deduplication t/ns -e", "namespaces.set_deduplication", ("t/ns", True)),
    ("topics set-deduplication T --disable", "topics.set_deduplication", ("T", False)),
    ("topics set-deduplication T -d", "topics.set_deduplication", ("T", False)),
    (
        "namespaces set-inactive-topic-policies t/ns -e -t 1h -m delete_when_subscriptions_caught_up",
        "namespaces.set_inactive_topic_policies",
        ("t/ns", True, 3600, "delete_when_subscriptions_caught_up"),
    ),
    (
        "topics set-max-producers-per-topic T -p 5",
        "topics.set_policy",
        ("T", "max-producers-per-topic", 5),
    ),
    (
        "namespaces set-max-topics-per-namespace t/ns -t 0",
        "namespaces.set_policy",
        ("t/ns", "max-topics-per-namespace", 0),
    ),
    (
        "namespaces set-max-unacked-messages-per-subscription t/ns --max-unacked-messages-per-subscription 9",
        "namespaces.set_policy",
        ("t/ns", "max-unacked-messages-per-subscription", 9),
    ),
    (
        "namespaces set-auto-topic-creation t/ns -e -t partitioned -n 4",
        "namespaces.set_auto_topic_creation",
        ("t/ns", True, "partitioned", 4),
    ),
    (
        "namespaces set-auto-topic-creation t/ns --disable",
        "namespaces.set_auto_topic_creation",
        ("t/ns", False, "non-partitioned", 1),
    ),
    (
        "namespaces set-auto-subscription-creation t/ns -d",
        "namespaces.set_auto_subscription_creation",
        ("t/ns", False),
    ),
    (
        "namespaces set-subscription-expiration-time t/ns -t 1d",
        "namespaces.set_subscription_expiration_time",
        ("t/ns", 1440),
    ),
    (
        "namespaces set-subscription-expiration-time t/ns -t 90",
        "namespaces.set_subscription_expiration_time",
        ("t/ns", 90),
    ),
    ("tenants list", "tenants.get_tenants", ()),
    ("tenants get acme", "tenants.get_tenant_info", ("acme",)),
    ("tenants create acme -r r1,r2 -c c1", "tenants.create_tenant", ("acme", ["r1", "r2"], ["c1"])),
    ("tenants create acme", "tenants.create_tenant", ("acme", None, None)),
    (
        "tenants update acme --allowed-clusters c1,c2",
        "tenants.update_tenant",
        ("acme", None, ["c1", "c2"]),
    ),
    ("tenants delete acme -f", "tenants.delete_tenant", ("acme", True)),
    ("namespaces list acme", "namespaces.get_namespaces", ("acme",)),
    ("namespaces create acme/ns -b 8 -c c1", "namespaces.create_namespace", ("acme/ns", 8, ["c1"])),
    ("namespaces create acme/ns", "namespaces.create_namespace", ("acme/ns", None, None)),
    ("namespaces policies acme/ns", "namespaces.get_policies", ("acme/ns",)),
    ("namespaces topics acme/ns", "namespaces.get_topics", ("acme/ns",)),
    ("namespaces delete acme/ns --force", "namespaces.delete_namespace", ("acme/ns", True)),
    ("namespaces clear-backlog acme/ns -force", "namespaces.clear_backlog", ("acme/ns", "")),
    ("namespaces clear-backlog acme/ns -s sub", "namespaces.clear_backlog", ("acme/ns", "sub")),
    ("namespaces unsubscribe acme/ns --sub sub", "namespaces.unsubscribe", ("acme/ns", "sub")),
    ("topics delete T", "topics.delete", ("T", False)),
    ("topics unsubscribe T -s sub -f", "topics.unsubscribe", ("T", "sub", True)),
    ("topics clear-backlog T -s sub", "topics.clear_backlog", ("T", "sub")),
    # permissions (issue 23)
    ("namespaces permissions acme/ns", "namespaces.get_permissions", ("acme/ns",)),
    (
        "namespaces grant-permission acme/ns --role r --actions produce,consume",
        "namespaces.grant_permission_on_namespace",
        ("acme/ns", "r", ["produce", "consume"]),
    ),
    (
        "namespaces revoke-permission acme/ns --role r",
        "namespaces.revoke_permissions_on_namespace",
        ("acme/ns", "r"),
    ),
    (
        "namespaces grant-subscription-permission acme/ns --subscription s --roles r1,r2",
        "namespaces.grant_permission_on_subscription",
        ("acme/ns", "s", ["r1", "r2"]),
    ),
    (
        "namespaces revoke-subscription-permission acme/ns -s s --role r1",
        "namespaces.revoke_permission_on_subscription",
        ("acme/ns", "s", "r1"),
    ),
    ("topics permissions T", "topics.get_permissions", ("T",)),
    (
        "topics grant-permission T --role r --actions produce",
        "topics.grant_permission",
        ("T", "r", ["produce"]),
    ),
    ("topics revoke-permission T --role r", "topics.revoke_permissions", ("T", "r")),
]


@pytest.mark.parametrize(
    "flags, refused",
    [
        (["--auth-params", "basic:user"], "token:<jwt> or file:///"),
        (["--auth-params", "token:"], "carries no token"),
        (["--auth-plugin", "org.apache.pulsar.client.impl.auth.AuthenticationTls"], "only token"),
        (["--auth-plugin", "token"], "needs --auth-params"),
        (["--auth-params", "file:///no/such/token"], "cannot read the token file"),
    ],
)
def test_auth_flags_that_cannot_work_are_refused_before_anything_is_sent(
    admin_calls, flags, refused
):
    result = CliRunner().invoke(admin_main, [*flags, "tenants", "list"])
    assert result.exit_code == 2 and refused in result.output, result.output
    assert admin_calls == []


def test_auth_params_reach_the_admin_client(monkeypatch):
    seen: list = []

    def admin(url: str, authentication=None) -> _FakeAdmin:
        seen.append(authentication.supplier()())
        return _FakeAdmin([])

    monkeypatch.setattr(_cli_common, "Admin", admin)
    result = CliRunner().invoke(
        admin_main, ["tenants", "list"], env={"MAGNETAR_AUTH_PARAMS": "token:abc.def.ghi"}
    )
    assert result.exit_code == 0, result.output
    assert seen == ["abc.def.ghi"]


@pytest.mark.parametrize("line, method, args", CALLS)
def test_each_verb_makes_its_admin_call(admin_calls, line, method, args):
    result = CliRunner().invoke(admin_main, line.split())
    assert result.exit_code == 0, result.output
    assert result.output == "null\n"  # an answer of None
    assert [(path, a) for path, a, _ in admin_calls] == [(method, args)]


def test_the_subscription_dispatch_rate_is_asked_for_by_keyword(admin_calls):
    for verb, subscription in (
        ("set-dispatch-rate", False),
        ("set-subscription-dispatch-rate", True),
    ):
        admin_calls.clear()
        assert CliRunner().invoke(admin_main, ["topics", verb, "T"]).exit_code == 0
        assert admin_calls == [
            ("topics.set_dispatch_rate", ("T", -1, -1, 1, False), {"subscription": subscription})
        ]


# (command line, words of the usage error): exit 2, no call made.
USAGE_ERRORS = [
    ("namespaces set-retention t/ns -s 10X -t 3h", "'10X' is not a size"),
    ("namespaces set-retention t/ns -s 10G -t 3y", "'3y' is not a time"),
    (
        "namespaces set-retention t/ns -s 10G -t 90",
        "'90' (a bare number is seconds) is not a whole number of minutes",
    ),
    ("namespaces set-retention t/ns -s 1000 -t 1h", "is not a whole number of MB"),
    ("namespaces set-retention t/ns -t 1h", "Missing option '--size'"),
    ("topics set-message-ttl T -ttl 1hour", "'1hour' is not a time"),
    ("topics set-backlog-quota T -l 2Q -p producer_exception", "'2Q' is not a size"),
    ("topics set-backlog-quota T -p producer_exception", "needs --limit"),
    ("topics set-backlog-quota T -l 1G -p producer_exception -t message_age", "needs --limitTime"),
    ("topics set-backlog-quota T -l 1G -p drop_everything", "'drop_everything' is not one of"),
    ("namespaces set-deduplication t/ns", "give --enable/-e or --disable/-d"),
    ("namespaces set-auto-topic-creation t/ns", "give --enable/-e or --disable/-d"),
    ("namespaces set-auto-topic-creation t/ns -e -t partitioned", "needs --num-partitions"),
    (
        "namespaces set-inactive-topic-policies t/ns -t 1h -m delete_when_no_subscriptions",
        "give --enable-delete-while-inactive/-e",
    ),
    (
        "namespaces set-inactive-topic-policies t/ns -e -t 5x -m delete_when_no_subscriptions",
        "'5x' is not a time",
    ),
    ("topics set-max-consumers-per-topic T -c -1", "-1 is not in the range x>=0"),
    ("namespaces set-persistence t/ns -e 0 -w 1 -a 1", "0 is not in the range x>=1"),
    ("topics set-auto-topic-creation T -e", "No such command 'set-auto-topic-creation'"),
    ("topics unsubscribe T", "Missing option '--subscription'"),
]


@pytest.mark.parametrize("line, words", USAGE_ERRORS)
def test_bad_values_are_usage_errors(admin_calls, line, words):
    result = CliRunner().invoke(admin_main, line.split())
    assert result.exit_code == 2, result.output
    assert words in result.output
    assert admin_calls == []


def test_every_get_verb_takes_applied():
    runner = CliRunner()
    for group in ("namespaces", "topics"):
        for verb in sorted(v for v in ADMIN_VERBS[group] if v.startswith("get-")):
            if verb == "get-partitioned-topic-metadata":
                continue
            result = runner.invoke(admin_main, [group, verb, "--help"])
            assert result.exit_code == 0 and "--applied" in result.output, (group, verb)


def test_a_broker_error_prints_its_name_and_exits_1(monkeypatch):
    class Refusing(_FakeAdmin):
        def __call__(self, *args, **kwargs) -> None:
            raise InvalidConfiguration("retention of 60 minutes and 0 MB: both 0 or both non-zero")

    monkeypatch.setattr(_cli_common, "Admin", lambda url, authentication=None: Refusing([]))
    result = CliRunner().invoke(
        admin_main, ["namespaces", "set-retention", "a/b", "-s", "0", "-t", "1h"]
    )
    assert result.exit_code == 1
    assert result.output.startswith("Error: InvalidConfiguration: retention of 60 minutes")
