"""``magnetar tokens``: pulsar tokens' verbs and flags, end to end on files."""

from __future__ import annotations

import json
import stat

from click.testing import CliRunner

from broker.cli import main


def _run(*args: str) -> str:
    result = CliRunner().invoke(main, ["tokens", *args])
    assert result.exit_code == 0, result.output
    return result.output.strip()


def test_a_secret_key_makes_tokens_that_show_and_validate(tmp_path):
    key = tmp_path / "secret.key"
    _run("create-secret-key", "--output", str(key))
    assert len(key.read_bytes()) == 32 and stat.S_IMODE(key.stat().st_mode) == 0o600
    token = _run("create", "--secret-key", f"file://{key}", "--subject", "app", "-e", "1h")
    header, claims = (json.loads(line) for line in _run("show", "-i", token).splitlines())
    assert header["alg"] == "HS256" and claims["sub"] == "app" and "exp" in claims
    assert json.loads(_run("validate", "-i", token, "-sk", f"file://{key}"))["sub"] == "app"
    other = tmp_path / "other.key"
    _run("create-secret-key", "--output", str(other))
    refused = CliRunner().invoke(
        main, ["tokens", "validate", "-i", token, "-sk", f"file://{other}"]
    )
    assert refused.exit_code == 1 and "signature" in refused.output


def test_a_key_pair_signs_with_the_private_key_and_validates_with_the_public_one(tmp_path):
    private, public = tmp_path / "my.key", tmp_path / "my.pub"
    _run(
        "create-key-pair", "--output-private-key", str(private), "--output-public-key", str(public)
    )
    token = _run("create", "-pk", f"file://{private}", "-s", "svc")
    (tmp_path / "t").write_text(token)
    assert json.loads(_run("validate", "-f", str(tmp_path / "t"), "-pk", f"file://{public}")) == {
        "sub": "svc"
    }


def test_bad_flags_are_refused_by_name(tmp_path):
    runner = CliRunner()
    both = runner.invoke(main, ["tokens", "create", "-s", "x"])
    assert both.exit_code == 2 and "exactly one of --secret-key and --private-key" in both.output
    bad_time = runner.invoke(
        main, ["tokens", "create", "-sk", "data:;base64,AAAA", "-s", "x", "-e", "soon"]
    )
    assert bad_time.exit_code == 2 and "not a duration" in bad_time.output
    garbage = runner.invoke(main, ["tokens", "show", "-i", "garbage"])
    assert garbage.exit_code == 1 and "not a token" in garbage.output
