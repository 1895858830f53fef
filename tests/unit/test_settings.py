import dataclasses
from pathlib import Path

import pytest

from bookie.settings import BookieSettings
from broker.settings import BrokerSettings
from metastore.settings import MetastoreSettings
from protos.settings import SettingsError, load_settings

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
