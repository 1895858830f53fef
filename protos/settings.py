"""Settings of every process: defaults < TOML file < environment < flags.

Each process declares a dataclass whose fields carry a ``doc`` in their
metadata. :func:`load_settings` fills it from the ``[section]`` table of a TOML
file, then from ``MAGNETAR_<SECTION>_<KEY>`` environment variables, then from
explicit overrides (command-line flags). Unknown keys and values of the wrong
type are refused with a message naming them, so a typo never passes silently.
``docs/configuration.md`` lists every setting (``make docs`` renders it with
broker/settings_doc.py, which sees every process's settings); a test keeps
it complete.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Callable, Mapping
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


# Listeners and shutdown: every process kind has these three.
def bind_address_setting() -> Any:
    return setting(
        "127.0.0.1",
        "Address every port of this process listens on (gRPC, Raft, metrics); 0.0.0.0 "
        "in a container or pod.",
    )


def advertised_address_setting() -> Any:
    return setting(
        "",
        "Host name or address other processes and clients are given for this one "
        "(lookups, the bookie registry, the metastore's leader hint). Empty = "
        "bind_address, or this machine's host name when bind_address is 0.0.0.0.",
    )


def metrics_port_setting(default: int) -> Any:
    return setting(
        default,
        "HTTP port: Prometheus text at /metrics (and /metrics/), readiness at /status.html "
        "(200 when the gRPC health service says SERVING, else 503), 404 elsewhere "
        "(0 = free port, -1 = off).",
    )


def http_max_connections_setting() -> Any:
    return setting(
        64,
        "Open connections the HTTP port (metrics_port) serves at once; one more is answered "
        "503 and closed.",
    )


def http_min_render_interval_ms_setting() -> Any:
    return setting(
        1000,
        "Shortest time between two renders of /metrics: scrapes arriving together share one, "
        "a later one waits for the next (bounds what any number of scrapers costs; 0 = no "
        "bound).",
    )


def shutdown_timeout_setting() -> Any:
    return setting(
        10.0,
        "Longest time from SIGTERM to exit. Steps that wait on an unreachable metastore "
        "or bookie are given up when it runs out; what the process held in the metastore "
        "expires with its session. Under `magnetar standalone` / `local-cluster` a child "
        "gets its role's share of their --shutdown-timeout-s, or this if it is lower.",
    )


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in _TRUE:
        return True
    if isinstance(value, str) and value.lower() in _FALSE:
        return False
    raise ValueError(value)


def _to_int(value: Any) -> int:
    if isinstance(value, bool):  # TOML true is not 1
        raise ValueError(value)
    return int(value)


# How a value from a file, the environment or a flag becomes a setting's
# type; other types take the value as it is.
_CONVERTERS: dict[Any, Callable[[Any], Any]] = {
    bool: _to_bool,
    int: _to_int,
    float: float,
    str: str,
}


def _coerce(name: str, typ: Any, value: Any, origin: str) -> Any:
    convert = _CONVERTERS.get(typ)
    if convert is None:
        return value
    try:
        return convert(value)
    except (TypeError, ValueError):
        raise SettingsError(
            f"setting {name!r} from {origin}: {value!r} is not a valid {typ.__name__}"
        ) from None


def load_settings(
    cls: type[T],
    section: str,
    config_file: str | os.PathLike[str] | None = None,
    overrides: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
) -> T:
    """``cls`` filled from its defaults, then the ``[section]`` table of
    ``config_file``, then ``MAGNETAR_<SECTION>_<KEY>`` variables of
    ``environ`` (the process environment by default), then ``overrides``
    (None values are left out)."""
    hints = get_type_hints(cls)
    types = {f.name: hints[f.name] for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    values: dict[str, Any] = {}
    if config_file:
        values.update(_from_file(Path(config_file), section, types))
    values.update(_from_environment(os.environ if environ is None else environ, section, types))
    values.update(_from_overrides(overrides or {}, section, types))
    return cls(**values)


def _from_file(path: Path, section: str, types: dict[str, Any]) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise SettingsError(f"cannot read config file {path}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"config file {path} is not valid TOML: {exc}") from None
    table = data.get(section, {})
    if not isinstance(table, dict):
        raise SettingsError(f"config file {path}: [{section}] must be a table")
    values = {}
    for key, value in table.items():
        if key not in types:
            raise SettingsError(
                f"config file {path}: unknown setting {key!r} in [{section}]; "
                f"known: {', '.join(sorted(types))}"
            )
        values[key] = _coerce(key, types[key], value, str(path))
    return values


def _from_environment(
    env: Mapping[str, str], section: str, types: dict[str, Any]
) -> dict[str, Any]:
    prefix = f"MAGNETAR_{section.upper()}_"
    values = {}
    for var, value in env.items():
        if not var.startswith(prefix):
            continue
        key = var[len(prefix) :].lower()
        if key not in types:
            raise SettingsError(
                f"environment variable {var}: unknown setting {key!r} for [{section}]"
            )
        values[key] = _coerce(key, types[key], value, var)
    return values


def _from_overrides(
    overrides: dict[str, Any], section: str, types: dict[str, Any]
) -> dict[str, Any]:
    values = {}
    for key, value in overrides.items():
        if value is None:
            continue
        if key not in types:
            raise SettingsError(f"unknown setting {key!r} for [{section}]")
        values[key] = _coerce(key, types[key], value, "command line")
    return values
