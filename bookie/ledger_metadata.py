"""Ledger metadata, and the errors of the ledger client library.

Ledger metadata lives at ``/ledgers/{id}`` in the metastore
(:func:`protos.metadata_paths.ledger`; JSON, changed only by compare-and-set): quorums, state, and the ensembles as a list of
``(first entry id, bookie ids)`` segments.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from protos import common_pb2
from protos.errors import MagnetarServerError

OPEN, IN_RECOVERY, CLOSED = "OPEN", "IN_RECOVERY", "CLOSED"


class BKError(MagnetarServerError):
    code = common_pb2.PERSISTENCE_ERROR


class NotEnoughBookiesError(BKError):
    code = common_pb2.SERVICE_NOT_READY


def master_key(password: bytes) -> bytes:
    return hashlib.sha1(b"ledger" + password).digest()


@dataclass
class LedgerMetadata:
    ledger_id: int
    ensemble_size: int
    write_quorum: int
    ack_quorum: int
    ensembles: list[tuple[int, list[str]]]
    state: str = OPEN
    last_entry_id: int = -1
    length: int = 0
    password: bytes = b""
    ctime_ms: int = 0
    version: int = -1  # metastore version; not stored

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "ensemble_size": self.ensemble_size,
                "write_quorum": self.write_quorum,
                "ack_quorum": self.ack_quorum,
                "ensembles": [[first, list(bk)] for first, bk in self.ensembles],
                "state": self.state,
                "last_entry_id": self.last_entry_id,
                "length": self.length,
                "password": self.password.hex(),
                "ctime_ms": self.ctime_ms,
            }
        ).encode()

    @classmethod
    def from_json(cls, ledger_id: int, data: bytes, version: int) -> LedgerMetadata:
        d = json.loads(data)
        return cls(
            ledger_id=ledger_id,
            ensemble_size=d["ensemble_size"],
            write_quorum=d["write_quorum"],
            ack_quorum=d["ack_quorum"],
            ensembles=[(int(first), list(bk)) for first, bk in d["ensembles"]],
            state=d["state"],
            last_entry_id=d["last_entry_id"],
            length=d.get("length", 0),
            password=bytes.fromhex(d.get("password", "")),
            ctime_ms=d.get("ctime_ms", 0),
            version=version,
        )

    def start_segment(self, first: int, ensemble: list[str]) -> None:
        """Entries from ``first`` on go to ``ensemble`` (an ensemble change):
        segments starting at or after ``first`` give way to the new one."""
        kept = [(f, bookies) for f, bookies in self.ensembles if f < first]
        self.ensembles = [*kept, (first, ensemble)]

    def ensemble_for(self, entry_id: int) -> list[str]:
        chosen = self.ensembles[0][1]
        for first, bookies in self.ensembles:
            if first <= entry_id:
                chosen = bookies
        return chosen


class LedgerFencedError(BKError):
    code = common_pb2.LEDGER_FENCED
