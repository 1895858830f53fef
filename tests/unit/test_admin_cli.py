"""``magnetar-admin`` (client/admin_cli.py) is the administration command;
the server command ``magnetar`` (broker/cli.py) has none.

The verbs against a running broker are tested by the integration tests that
call the CLI (test_stats, test_partitioned, test_dedup, test_ownership,
test_key_shared, test_load_manager)."""

from __future__ import annotations

import subprocess
import sys
import tomllib

from click.testing import CliRunner

from client.admin_cli import main as admin_main
from tests.harness import ROOT

# pulsar-admin's groups and the verbs of each that Magnetar has.
ADMIN_VERBS = {
    "brokers": {"list", "leader-broker"},
    "namespaces": {"bundles", "set-deduplication", "split-bundle", "unload"},
    "topics": {
        "create-partitioned-topic",
        "create-subscription",
        "get-partitioned-topic-metadata",
        "key-shared-lookup",
        "list",
        "lookup",
        "stats",
    },
    "stats": {"export"},  # the stats history (docs/stats-schema.md), beyond pulsar-admin
}
# The servers, and `magnetar health` for probes (issue 19).
SERVER_COMMANDS = {"bookie", "broker", "health", "local-cluster", "metastore", "standalone"}


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
    """The command names click lists under 'Commands:'."""
    listing = help_text.split("Commands:", 1)[1]
    return {line.split()[0] for line in listing.splitlines() if line.strip()}


def test_magnetar_admin_help_lists_the_groups():
    text = _help("client.admin_cli")
    assert text.startswith("Usage: magnetar-admin [OPTIONS] COMMAND")
    assert "--service-url" in text and "MAGNETAR_SERVICE_URL" in text
    assert _commands(text) == set(ADMIN_VERBS)


def test_magnetar_help_has_only_the_server_commands():
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
