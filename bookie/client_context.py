"""What a ledger writer needs from the client that made it (BookKeeper's
``ClientContext``).

A :class:`~bookie.ledger_writer.LedgerWriter` sends adds over the client's
bookie connections, changes the ledger's metadata by compare-and-set, asks
for a replacement when a bookie fails, and closes the ledger. It sees the
client through :class:`ClientContext` only, so the writer does not import
the client that creates it (:class:`~bookie.ledger_client.LedgerClient`
satisfies the protocol; mypy checks that where it makes a writer), and what
a writer may ask of its client is written down in one place.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from bookie.bookie_connection import BookieConnection
from bookie.ledger_metadata import LedgerMetadata
from protos.credentials import TokenSupplier
from protos.tls import TlsClient


@dataclass
class LedgerClientSettings:
    timeout_s: float = 30.0
    max_connections: int = 1000
    # A writer holds new entries back while every bookie of its ensemble has
    # this many add requests unanswered (they then go as one larger request).
    max_add_requests_in_flight: int = 2
    # Adds are cut into requests of at most this many record bytes (a bigger
    # single entry goes alone); gRPC messages are bounded at 16 MiB.
    max_add_request_bytes: int = 4 << 20
    rng: random.Random = field(default_factory=random.Random)
    # New ledger ids reserved per metastore increment (bookie.ledger_ids).
    ledger_id_block: int = 1
    # How long the list of registered bookies serves new ledgers (bookie.bookie_list).
    bookie_list_max_age_s: float = 0.0
    # The token every call to a bookie carries (broker_client_auth_params).
    token: TokenSupplier | None = None
    # broker_client_tls_enabled: bookies are called at their TLS ports.
    tls: TlsClient | None = None


class ClientContext(Protocol):
    """The client as a ledger writer uses it."""

    @property
    def settings(self) -> LedgerClientSettings: ...

    def connection(self, bookie_id: str) -> BookieConnection:
        """The channel to a bookie whose address the client knows."""
        ...

    async def replace_bookies(
        self, ensemble: list[str], indexes: Iterable[int]
    ) -> list[str] | None:
        """``ensemble`` with the bookies at ``indexes`` swapped for writable
        bookies outside it; None when too few are writable."""
        ...

    async def update_metadata(
        self, ledger_id: int, change: Callable[[LedgerMetadata], bool]
    ) -> LedgerMetadata:
        """Read-modify-CAS the ledger's metadata until ``change`` says there
        is nothing to do (it may raise to give up)."""
        ...

    async def close_metadata(self, ledger_id: int, last_entry_id: int, length: int) -> None:
        """Mark the ledger CLOSED at ``last_entry_id``."""
        ...
