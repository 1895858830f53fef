"""Who a bookie is, and how brokers find it (BookKeeper's cookie and
registration manager).

A bookie's id lives in a cookie in its data dir, created once. The same
cookie is registered in the metastore (``/bookies/cookies/{id}``) on the
first start; a later start whose data dir holds a different cookie is
refused, because a bookie that lost its disk must not answer "no such
entry" for entries it acknowledged. A serving bookie keeps
``/bookies/available/{id}`` (its address, disk and read-only flag) as an
ephemeral key on a live session; brokers list those keys to find bookies.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from metastore.client import MetastoreClient, MetastoreError, Session
from protos import metadata_paths

log = logging.getLogger(__name__)


def load_cookie(data_dir: Path, wanted_id: str) -> str:
    """The bookie id stored in the data dir's cookie, creating it if new."""
    cookie = data_dir / "cookie.json"
    if cookie.exists():
        found = json.loads(cookie.read_text())["bookie_id"]
        if wanted_id and wanted_id != found:
            raise SystemExit(
                f"data dir {data_dir} belongs to bookie {found!r}, not {wanted_id!r}; "
                "use that id or another data dir"
            )
        return str(found)
    bookie_id = wanted_id or f"bookie-{uuid.uuid4().hex[:12]}"
    data_dir.mkdir(parents=True, exist_ok=True)
    tmp = cookie.with_suffix(".tmp")
    tmp.write_text(json.dumps({"bookie_id": bookie_id, "created_ms": int(time.time() * 1000)}))
    os.replace(tmp, cookie)
    return bookie_id


async def check_cookie(metastore: MetastoreClient, data_dir: Path, bookie_id: str) -> None:
    """Match the local cookie with the one registered in the metastore.

    A bookie id whose cookie is registered but whose data dir is new lost its
    disk: it would answer "no such entry" for entries it acknowledged, which
    recovery could take for proof that they never existed. Refuse to start.
    """
    key = metadata_paths.bookie_cookie(bookie_id)
    local = json.loads((data_dir / "cookie.json").read_text())
    stat = await metastore.get(key)
    if stat is None:
        await metastore.put(key, json.dumps(local).encode(), expected_version=-1)
        return
    registered = json.loads(stat.value)
    if registered.get("created_ms") != local.get("created_ms"):
        raise SystemExit(
            f"bookie {bookie_id} is registered with a cookie created at "
            f"{registered.get('created_ms')}, but data dir {data_dir} holds one created at "
            f"{local.get('created_ms')}: this data dir is not that bookie's (a lost or replaced "
            f"disk?). Start it with its own data dir, or decommission the id (delete {key})."
        )


async def register_forever(
    metastore: MetastoreClient,
    bookie_id: str,
    info: dict,
    ttl_ms: int,
    stop: asyncio.Event,
    changed: asyncio.Event | None = None,
) -> None:
    """Keep ``/bookies/available/{id}`` registered on a live session; put it
    again (same session) whenever ``changed`` is set."""
    changed = changed or asyncio.Event()
    key = metadata_paths.bookie_available(bookie_id)
    session: Session | None = None
    while not stop.is_set():
        lost = asyncio.Event()
        try:
            session = await metastore.create_session(ttl_ms, on_lost=lost.set)
            info["disk_free_bytes"] = shutil.disk_usage(info["data_dir"]).free
            # A previous run's key may still exist until its session expires:
            # this bookie owns its id, so it takes the key over.
            await metastore.put(key, json.dumps(info).encode(), session_id=session.id)
            log.info("registered %s in the metastore (session %d)", key, session.id)
            while not stop.is_set() and not lost.is_set():
                waiter = asyncio.create_task(stop.wait())
                loser = asyncio.create_task(lost.wait())
                change = asyncio.create_task(changed.wait())
                await asyncio.wait({waiter, loser, change}, return_when=asyncio.FIRST_COMPLETED)
                for t in (waiter, loser, change):
                    t.cancel()
                if changed.is_set() and not stop.is_set() and not lost.is_set():
                    changed.clear()
                    await metastore.put(key, json.dumps(info).encode(), session_id=session.id)
                    log.info("registration of %s updated: %s", key, info)
        except MetastoreError as exc:
            log.warning("registration failed, retrying: %s", exc)
            await asyncio.sleep(0.5)
    if session is not None and not session.lost:
        await session.close()


async def wait_registered(
    metastore: MetastoreClient, bookie_id: str, stop: asyncio.Event, timeout_s: float = 60
) -> None:
    """Until the bookie's registration shows in the metastore (brokers can
    only find a registered bookie), ``stop`` is set, or ``timeout_s`` passed."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not stop.is_set():
        if await metastore.get(metadata_paths.bookie_available(bookie_id)) is not None:
            return
        await asyncio.sleep(0.05)


async def watch_disk(
    disk_read_only: Callable[[], bool],
    interval_s: float,
    bookie_id: str,
    info: dict,
    changed: asyncio.Event,
    metastore: MetastoreClient,
) -> None:
    """Every ``interval_s``, check the disk (``disk_read_only``) and whether
    an operator retires this bookie (``bookies decommission``/``recover``);
    a full or failed disk or a retiring mark registers it read-only, so no
    new ledger is placed on it. On a change, update ``info`` and set
    ``changed`` (register_forever then puts the registration again)."""
    retiring = False
    while True:
        await asyncio.sleep(interval_s)
        disk = disk_read_only()
        try:
            retiring = await metastore.get(metadata_paths.bookie_retiring(bookie_id)) is not None
        except MetastoreError as exc:
            log.info("could not read this bookie's retiring mark: %s", exc)
        if info["read_only"] != (disk or retiring):
            info["read_only"] = disk or retiring
            changed.set()
