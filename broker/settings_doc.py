"""The settings reference, docs/configuration.md, rendered from the settings
classes of every server process (``make docs`` runs
``python -m broker.settings_doc``).

It lives with the broker, the top of the server layers, because it needs
the metastore's, the bookie's and the broker's settings at once; the loader
they all use is protos/settings.py.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from bookie.settings import BookieSettings
from broker.settings import BrokerSettings
from metastore.settings import MetastoreSettings


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
