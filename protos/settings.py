"""Settings of every process: defaults < TOML file < environment < flags.

Each process declares a dataclass whose fields carry a ``doc`` in their
metadata. :func:`load_settings` fills it from the ``[section]`` table of a TOML
file, then from ``MAGNETAR_<SECTION>_<KEY>`` environment variables, then from
explicit overrides (command-line flags). Unknown keys and values of the wrong
type are refused with a message naming them, so a typo never passes silently.
``docs/configuration.md`` lists every setting; a test keeps it complete.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from pathlib import Path
from typing import Any, TypeVar, get_type_hints

T = TypeVar("T")


class SettingsError(ValueError):
    pass


def setting(default: Any, doc: str) -> Any:
    return dataclasses.field(default=default, metadata={"doc": doc})


# Memory settings of the server processes that take large gRPC messages
# (bookie, broker): protos.serving.tune_malloc applies them.
def malloc_trim_threshold_mb_setting() -> Any:
    return setting(
        128,
        "Free memory each glibc malloc arena keeps for reuse instead of returning it "
        "to the kernel (buffers up to 32 MiB come from the heap); fresh pages cost more "
        "CPU here than copying. 0 = glibc's defaults.",
    )


def malloc_arenas_setting() -> Any:
    return setting(
        1,
        "glibc malloc arenas shared by all threads (set before any thread starts). "
        "Per-thread arenas give their emptied heaps back to the kernel whatever the "
        "trim threshold, so every large gRPC message landed in fresh pages. "
        "0 = glibc's default (8 per core).",
    )


def _coerce(name: str, typ: Any, value: Any, origin: str) -> Any:
    try:
        if typ is bool:
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("1", "true", "yes", "on"):
                return True
            if isinstance(value, str) and value.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(value)
        if typ is int:
            if isinstance(value, bool):
                raise ValueError(value)
            return int(value)
        if typ is float:
            return float(value)
        if typ is str:
            return str(value)
    except (TypeError, ValueError):
        pass
    else:
        return value
    raise SettingsError(f"setting {name!r} from {origin}: {value!r} is not a valid {typ.__name__}")


def load_settings(
    cls: type[T],
    section: str,
    config_file: str | os.PathLike[str] | None = None,
    overrides: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
) -> T:
    hints = get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    values: dict[str, Any] = {}
    if config_file:
        path = Path(config_file)
        try:
            data = tomllib.loads(path.read_text())
        except OSError as exc:
            raise SettingsError(f"cannot read config file {path}: {exc}") from None
        except tomllib.TOMLDecodeError as exc:
            raise SettingsError(f"config file {path} is not valid TOML: {exc}") from None
        table = data.get(section, {})
        if not isinstance(table, dict):
            raise SettingsError(f"config file {path}: [{section}] must be a table")
        for key, value in table.items():
            if key not in fields:
                raise SettingsError(
                    f"config file {path}: unknown setting {key!r} in [{section}]; "
                    f"known: {', '.join(sorted(fields))}"
                )
            values[key] = _coerce(key, hints[key], value, str(path))
    env = os.environ if environ is None else environ
    prefix = f"MAGNETAR_{section.upper()}_"
    for var, value in env.items():
        if not var.startswith(prefix):
            continue
        key = var[len(prefix) :].lower()
        if key not in fields:
            raise SettingsError(
                f"environment variable {var}: unknown setting {key!r} for [{section}]"
            )
        values[key] = _coerce(key, hints[key], value, var)
    for key, value in (overrides or {}).items():
        if value is None:
            continue
        if key not in fields:
            raise SettingsError(f"unknown setting {key!r} for [{section}]")
        values[key] = _coerce(key, hints[key], value, "command line")
    return cls(**values)


def describe(cls: type) -> list[tuple[str, Any, str]]:
    """(name, default, doc) of every setting, for the docs."""
    return [
        (f.name, f.default, f.metadata.get("doc", ""))
        for f in dataclasses.fields(cls)  # type: ignore[arg-type]
    ]


def render_markdown(sections: list[tuple[str, type, str]]) -> str:
    """The settings reference (docs/configuration.md) for ``(section, class, intro)``."""
    out = [
        "# Configuration reference",
        "",
        "Every process reads its settings from, in increasing precedence: the defaults",
        "below, the `[section]` table of the TOML file given with `--config`, environment",
        "variables `MAGNETAR_<SECTION>_<KEY>` (for example `MAGNETAR_BROKER_MAX_MESSAGE_SIZE`),",
        "and command-line flags (`--port`, `--data-dir`, ... and `--set key=value` for any",
        "setting). Unknown keys and values of the wrong type stop the process with a",
        "message naming them. `magnetar standalone --config FILE` passes the file to all",
        "three children. Regenerate this page with `make docs`.",
        "",
    ]
    for section, cls, intro in sections:
        out += [
            f"## [{section}]",
            "",
            intro,
            "",
            "| setting | default | meaning |",
            "|---|---|---|",
        ]
        for name, default, doc in describe(cls):
            if isinstance(default, bool):
                shown = str(default).lower()
            elif isinstance(default, str):
                shown = repr(default)
            else:
                shown = str(default)
            out.append(f"| `{name}` | `{shown}` | {doc} |")
        out.append("")
    return "\n".join(out)


def main() -> None:
    from bookie.settings import BookieSettings
    from broker.settings import BrokerSettings
    from metastore.settings import MetastoreSettings

    print(
        render_markdown(
            [
                ("metastore", MetastoreSettings, "The metadata store (`magnetar metastore`)."),
                ("bookie", BookieSettings, "The entry storage server (`magnetar bookie`)."),
                ("broker", BrokerSettings, "The broker (`magnetar broker`)."),
            ]
        ),
        end="",
    )


if __name__ == "__main__":
    main()
