import dataclasses
from pathlib import Path

import pytest

from bookie.settings import BookieSettings
from broker.settings import BrokerSettings
from broker.settings_doc import render_markdown
from metastore.settings import MetastoreSettings
from protos.settings import SettingsError, _coerce, load_settings, setting

ROOT = Path(__file__).resolve().parents[2]


def test_precedence_defaults_file_env_flags(tmp_path):
    conf = tmp_path / "m.toml"
    conf.write_text('[broker]\nmax_message_size = 100\nport = 1\ncluster_name = "file"\n')
    env = {"MAGNETAR_BROKER_PORT": "2", "MAGNETAR_BROKER_CLUSTER_NAME": "env"}
    s = load_settings(BrokerSettings, "broker", conf, {"cluster_name": "flag"}, env)
    assert (s.max_message_size, s.port, s.cluster_name) == (100, 2, "flag")
    assert s.dispatcher_max_read_batch_size == 100  # default


def test_unknown_and_mistyped_settings_are_refused(tmp_path):
    conf = tmp_path / "m.toml"
    conf.write_text("[bookie]\njournal_synk = true\n")
    with pytest.raises(SettingsError, match="unknown setting 'journal_synk'"):
        load_settings(BookieSettings, "bookie", conf, environ={})
    with pytest.raises(SettingsError, match="MAGNETAR_BOOKIE_PORTT"):
        load_settings(BookieSettings, "bookie", environ={"MAGNETAR_BOOKIE_PORTT": "1"})
    with pytest.raises(SettingsError, match="not a valid int"):
        load_settings(BookieSettings, "bookie", environ={"MAGNETAR_BOOKIE_PORT": "many"})
    with pytest.raises(SettingsError, match="not a valid bool"):
        load_settings(BookieSettings, "bookie", overrides={"journal_sync": "perhaps"}, environ={})
    bad = tmp_path / "bad.toml"
    bad.write_text("[broker\n")
    with pytest.raises(SettingsError, match="not valid TOML"):
        load_settings(BrokerSettings, "broker", bad, environ={})


# Reads and deliveries must fit one gRPC message (16 MiB).
READ_BOUNDS = [
    (BookieSettings, "bookie", {"max_bytes_per_read_response": 8 << 20}, None),
    (BookieSettings, "bookie", {"max_bytes_per_read_response": (8 << 20) + 1}, "8388608"),
    (BookieSettings, "bookie", {"max_bytes_per_read_response": 0}, "is not in"),
    (BrokerSettings, "broker", {"dispatcher_max_read_size_bytes": 10 << 20}, None),
    (BrokerSettings, "broker", {"dispatcher_max_read_size_bytes": 11 << 20}, "one gRPC message"),
    (BrokerSettings, "broker", {"max_message_size": 11 << 20}, "one gRPC message"),
]


@pytest.mark.parametrize(("cls", "section", "values", "refused"), READ_BOUNDS)
def test_read_sizes_past_a_grpc_message_are_refused(cls, section, values, refused):
    if refused is None:
        load_settings(cls, section, overrides=values, environ={})
        return
    with pytest.raises(SettingsError, match=refused):
        load_settings(cls, section, overrides=values, environ={})


@pytest.mark.parametrize(
    ("value", "refused"), [(1, None), (64, None), (0, "at least 1"), (-3, "at least 1")]
)
def test_concurrent_topic_closes_take_at_least_one(value, refused):
    overrides = {"max_concurrent_topic_closes": value}
    if refused is None:
        load_settings(BrokerSettings, "broker", overrides=overrides, environ={})
        return
    with pytest.raises(SettingsError, match=refused):
        load_settings(BrokerSettings, "broker", overrides=overrides, environ={})


@pytest.mark.parametrize(
    ("cls", "section"),
    [(MetastoreSettings, "metastore"), (BookieSettings, "bookie"), (BrokerSettings, "broker")],
)
def test_every_setting_is_documented_with_its_default(cls, section):
    doc = (ROOT / "docs" / "configuration.md").read_text()
    table = doc.split(f"## [{section}]", 1)[1].split("\n## ", 1)[0]
    for field in dataclasses.fields(cls):
        assert field.metadata.get("doc"), f"{section}.{field.name} has no doc"
        default = field.default
        shown = (
            str(default).lower()
            if isinstance(default, bool)
            else repr(default)
            if isinstance(default, str)
            else str(default)
        )
        assert f"| `{field.name}` | `{shown}` |" in table, f"{section}.{field.name} not in docs"


@pytest.mark.parametrize(
    ("typ", "raw", "value"),
    [
        (bool, "yes", True),
        (bool, "ON", True),
        (bool, "0", False),
        (bool, "off", False),
        (bool, False, False),
        (int, "42", 42),
        (int, 7, 7),
        (float, "1.5", 1.5),
        (str, 12, "12"),
        (list[str], ["a"], ["a"]),  # a type without a converter takes the value as is
    ],
)
def test_values_become_the_type_of_their_setting(typ, raw, value):
    assert _coerce("x", typ, raw, "test") == value


@pytest.mark.parametrize(("typ", "raw"), [(bool, "perhaps"), (bool, 1), (int, True), (int, "1.5")])
def test_values_that_are_not_of_the_settings_type_are_refused(typ, raw):
    with pytest.raises(SettingsError, match=f"'x' from test: {raw!r} is not a valid"):
        _coerce("x", typ, raw, "test")


def test_the_settings_reference_shows_each_default_as_toml_would():
    @dataclasses.dataclass
    class Example:
        flag: bool = setting(True, "A flag.")
        name: str = setting("n", "A name.")
        size: int = setting(3, "A size.")

    page = render_markdown([("example", Example, "Intro.")])
    assert "## [example]\n\nIntro.\n\n| setting | default | meaning |\n|---|---|---|\n" in page
    assert "| `flag` | `true` | A flag. |\n| `name` | `'n'` | A name. |\n" in page
    assert page.endswith("| `size` | `3` | A size. |\n")
