"""How many messages the entries of a managed ledger hold, with no I/O
(backlogs count messages, not entries: a batch entry holds many).

Theory of operation. A topic's entries are batches of one or more
messages, and only the entry's metadata says how many. The broker learns
the count of every entry it stores (the publish path parsed it) and keeps,
per ledger, either one number (every entry so far held the same count, so
no memory grows with the ledger: the case of unbatched traffic and of
full batches) or a table of cumulative counts (``array('q')``, 8 bytes an
entry), which answers "messages in entries a..b" in O(1) for any range.

A ledger written by an earlier owner of the topic comes with no table: its
total, when that owner closed it and recorded it in the managed ledger's
list (``messages`` beside ``ledgers``), makes the full-ledger count exact
and a part of it an estimate (entries times the ledger's average); with no
recorded total each entry counts as one message. Which ledgers are exact is
visible to callers (:meth:`MessageCounts.exact`), and docs/metrics.md says
where estimates appear.
"""

from __future__ import annotations

from array import array


class LedgerCounts:
    """Message counts of the entries of one ledger (module docstring)."""

    __slots__ = ("_cumulative", "_per_entry", "entries", "recorded_total")

    def __init__(self, entries: int = 0, recorded_total: int | None = None) -> None:
        # Entries known; for an inherited ledger all of it, with its recorded total.
        self.entries = entries
        self.recorded_total = recorded_total
        self._per_entry: int | None = None  # every entry holds this many (exact mode)
        self._cumulative: array | None = None  # [0, c0, c0+c1, ...] once they differ
        if recorded_total is None and entries == 0:
            self._per_entry = 0  # a new, empty ledger: exact from the first entry on

    @property
    def exact(self) -> bool:
        return self.recorded_total is None and (
            self._per_entry is not None or self._cumulative is not None
        )

    @property
    def total(self) -> int:
        return self.messages(0, self.entries - 1)

    def added(self, entry_id: int, messages: int) -> None:
        """Entry ``entry_id`` (the next one) was stored with ``messages`` messages."""
        assert messages >= 1, messages
        if not self.exact or entry_id < self.entries:
            return  # an inherited ledger takes no new entries; a repeat changes nothing
        while self.entries < entry_id:  # a gap (entries stored but not counted): one each
            self._append(1)
        self._append(messages)

    def _append(self, messages: int) -> None:
        if self._cumulative is None:
            if self.entries == 0:
                self._per_entry = messages
            if self._per_entry == messages:
                self.entries += 1
                return
            per = self._per_entry or 0
            self._cumulative = array("q", (i * per for i in range(self.entries + 1)))
            self._per_entry = None
        self._cumulative.append(self._cumulative[-1] + messages)
        self.entries += 1

    def messages(self, first: int, last: int) -> int:
        """Messages in entries ``first..last`` (inclusive, clipped to what is known)."""
        first, last = max(first, 0), min(last, self.entries - 1)
        if last < first:
            return 0
        count = last - first + 1
        if self._cumulative is not None:
            return int(self._cumulative[last + 1] - self._cumulative[first])
        if self._per_entry is not None:
            return count * self._per_entry
        if self.recorded_total is None:
            return count  # no record: one message per entry
        if count == self.entries:
            return self.recorded_total
        return round(count * self.recorded_total / self.entries)


class MessageCounts:
    """Message counts of every ledger of one managed ledger."""

    def __init__(self) -> None:
        self._ledgers: dict[int, LedgerCounts] = {}

    def new_ledger(self, ledger_id: int) -> None:
        self._ledgers[ledger_id] = LedgerCounts()

    def inherited(self, ledger_id: int, entries: int, recorded_total: int | None) -> None:
        """A closed ledger of an earlier owner: ``entries`` entries and the
        total its writer recorded (None: not recorded)."""
        if recorded_total is not None and recorded_total < entries:
            recorded_total = None  # not a total of these entries: ignore it
        self._ledgers[ledger_id] = LedgerCounts(entries, recorded_total)

    def added(self, ledger_id: int, entry_id: int, messages: int) -> None:
        counts = self._ledgers.get(ledger_id)
        if counts is None:
            counts = self._ledgers[ledger_id] = LedgerCounts()
        counts.added(entry_id, messages)

    def drop(self, ledger_id: int) -> None:
        self._ledgers.pop(ledger_id, None)

    def exact(self, ledger_id: int) -> bool:
        counts = self._ledgers.get(ledger_id)
        return counts is not None and counts.exact

    def messages(self, ledger_id: int, first: int, last: int) -> int:
        """Messages in entries ``first..last`` of ``ledger_id`` (one per entry
        for a ledger it knows nothing of)."""
        counts = self._ledgers.get(ledger_id)
        if counts is None:
            return max(0, last - first + 1)
        return counts.messages(first, last)

    def totals(self) -> dict[int, int]:
        """The message total of every ledger whose total is known (exact or
        recorded): what the managed ledger's list records beside its ledgers."""
        out = {}
        for ledger_id, counts in self._ledgers.items():
            if counts.exact or counts.recorded_total is not None:
                out[ledger_id] = counts.total
        return out
