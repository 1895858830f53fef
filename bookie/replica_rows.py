"""Rows read from one replica, kept only when their digest holds."""

from __future__ import annotations

import logging

from protos.digest import entry_digest

log = logging.getLogger(__name__)


def keep_good_rows(
    ledger_id: int,
    bookie_id: str,
    rows: list[tuple[int, int, int, bytes]],
    wanted: dict[int, int],
    out: dict[int, bytes],
    problems: dict[int, list[str]],
) -> set[int]:
    """Put the payloads of ``rows`` of ``wanted`` entries whose digest holds
    in ``out``; their ids. A bad digest is logged and noted in ``problems``."""
    good = set()
    for eid, lac, digest, payload in rows:
        if eid not in wanted:
            continue
        if entry_digest(ledger_id, eid, lac, payload) == digest:
            out[eid] = payload
            good.add(eid)
        else:
            log.warning(
                "ledger %d entry %d from %s fails its digest; trying another replica",
                ledger_id,
                eid,
                bookie_id,
            )
            problems.setdefault(eid, []).append(f"{bookie_id}: digest mismatch")
    return good
