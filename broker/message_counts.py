"""How many messages the entries of a managed ledger hold, with no I/O
(backlogs count messages, not entries: a batch entry holds many).

Theory of operation. A topic's entries are batches of one or more
messages, and only the entry's metadata says how many. The broker learns
the count of every entry it stores (the publish path parsed it) and keeps,
per ledger, either one number (every entry so far held the same count, so
no memory grows with the ledger: unbatched traffic and full batches) or a
table of cumulative counts (``array('q')``, 8 bytes an entry), which
answers "messages in entries a..b" in O(1) for any range.

Tables are bounded per broker (:class:`TableBudget`,
``managed_ledger_message_counts_max_entries``): past the bound a topic
that grows a table folds its own oldest tables into their totals, and a
ledger every durable cursor has moved past is folded anyway (its
backlog is asked of no one). A folded ledger, like one written by an
earlier owner of the topic whose total that owner recorded in the ledger
list (``messages`` beside ``ledgers``, :mod:`broker.ledger_list`), counts
its whole exactly and a part of it as entries times its average; a ledger
with no recorded total counts one message per entry, as does any entry
past what is known (entries a failed writer stored that were read back
count their real number, see the managed ledger). docs/metrics.md says
where estimates appear.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable

from protos.entry import CorruptedEntryError, num_messages, parse_metadata


class TableBudget:
    """The broker-wide bound on table entries (8 bytes each)."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self.used = 0

    @property
    def over(self) -> bool:
        return self.used > self.max_entries


class LedgerCounts:
    """Message counts of the entries of one ledger (module docstring)."""

    __slots__ = ("_cumulative", "_per_entry", "_total", "entries", "written_here")

    def __init__(self, entries: int = 0, total: int | None = None, written_here: bool = True):
        self.entries = entries  # entries known
        self.written_here = written_here  # it counts its own entries as they are stored
        self._total = total  # when neither a number per entry nor a table is kept
        self._per_entry: int | None = 0 if written_here else None
        self._cumulative: array | None = None

    @property
    def exact(self) -> bool:
        """Every entry's own count is known."""
        return self._per_entry is not None or self._cumulative is not None

    @property
    def total(self) -> int | None:
        if self._cumulative is not None:
            return int(self._cumulative[-1])
        if self._per_entry is not None:
            return self._per_entry * self.entries
        return self._total

    @property
    def table_entries(self) -> int:
        return len(self._cumulative) if self._cumulative is not None else 0

    def added(self, entry_id: int, messages: int) -> int:
        """Entry ``entry_id`` (the next one) was stored with ``messages``
        messages (at least one is counted); returns how many table entries
        that took."""
        if not self.written_here or entry_id < self.entries:
            return 0  # an inherited ledger takes no new entries; a repeat changes nothing
        grown = 0
        while self.entries < entry_id:  # a gap (entries stored but not counted): one each
            grown += self._append(1)
        return grown + self._append(max(1, messages))

    def _append(self, messages: int) -> int:
        if self._cumulative is None and self._per_entry is None:  # folded: totals only
            self._total = (self._total or 0) + messages
            self.entries += 1
            return 0
        grown = 0
        if self._cumulative is None:
            if self.entries == 0:
                self._per_entry = messages
            if self._per_entry == messages:
                self.entries += 1
                return 0
            per = self._per_entry or 0
            self._cumulative = array("q", (i * per for i in range(self.entries + 1)))
            self._per_entry = None
            grown = len(self._cumulative)
        self._cumulative.append(self._cumulative[-1] + messages)
        self.entries += 1
        return grown + 1

    def fold(self) -> int:
        """Keep only the total (partial counts become estimates); returns
        the table entries freed."""
        freed = self.table_entries
        if self._cumulative is not None:
            self._total = int(self._cumulative[-1])
            self._cumulative = None
        return freed

    def messages(self, first: int, last: int) -> int:
        """Messages in entries ``first..last`` (inclusive); entries past the
        known ones count one each."""
        first = max(first, 0)
        if last < first:
            return 0
        beyond = last - max(first, self.entries) + 1 if last >= self.entries else 0
        known_last = min(last, self.entries - 1)
        if known_last < first:
            return beyond
        count = known_last - first + 1
        if self._cumulative is not None:
            part = int(self._cumulative[known_last + 1] - self._cumulative[first])
        elif self._per_entry is not None:
            part = count * self._per_entry
        elif self._total is None:
            part = count  # no record: one message per entry
        elif count == self.entries:
            part = self._total
        else:
            part = round(count * self._total / self.entries)
        return part + beyond


class MessageCounts:
    """Message counts of every ledger of one managed ledger."""

    def __init__(self, budget: TableBudget | None = None) -> None:
        self._ledgers: dict[int, LedgerCounts] = {}
        self.budget = budget if budget is not None else TableBudget(10_000_000)

    def new_ledger(self, ledger_id: int) -> None:
        self.drop(ledger_id)
        self._ledgers[ledger_id] = LedgerCounts()

    def inherited(self, ledger_id: int, entries: int, recorded_total: int | None) -> None:
        """A closed ledger of an earlier owner: ``entries`` entries and the
        total its writer recorded (None: not recorded)."""
        if recorded_total is not None and recorded_total < entries:
            recorded_total = None  # not a total of these entries: ignore it
        self.drop(ledger_id)
        self._ledgers[ledger_id] = LedgerCounts(entries, recorded_total, written_here=False)

    def added(self, ledger_id: int, entry_id: int, messages: int) -> None:
        counts = self._ledgers.get(ledger_id)
        if counts is None:
            counts = self._ledgers[ledger_id] = LedgerCounts()
        grown = counts.added(entry_id, messages)
        if grown:
            self.budget.used += grown
            if self.budget.over:
                self._shed()

    def recovered(self, entries: list[tuple[tuple[int, int], bytes]]) -> None:
        """Entries a failed writer's bookies stored though their adds failed
        (read back): their messages count like any other."""
        for (ledger_id, entry_id), data in entries:
            try:
                messages = num_messages(parse_metadata(data))
            except CorruptedEntryError:
                messages = 1
            self.added(ledger_id, entry_id, messages)

    def _shed(self) -> None:
        """Over the broker's bound: fold this topic's tables, oldest first."""
        for ledger_id in sorted(self._ledgers):
            self.budget.used -= self._ledgers[ledger_id].fold()
            if not self.budget.over:
                return

    def fold_before(self, ledger_id: int) -> None:
        """Ledgers before ``ledger_id`` are behind every durable cursor."""
        for lid, counts in self._ledgers.items():
            if lid < ledger_id:
                self.budget.used -= counts.fold()

    def drop(self, ledger_id: int) -> None:
        counts = self._ledgers.pop(ledger_id, None)
        if counts is not None:
            self.budget.used -= counts.table_entries

    def release(self) -> None:
        """The managed ledger closed: give its tables back to the budget."""
        for ledger_id in list(self._ledgers):
            self.drop(ledger_id)

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

    def totals(self, closed: Iterable[int]) -> dict[int, int]:
        """The known message totals of the ``closed`` ledgers: what the
        ledger list records beside them (never a ledger still written, whose
        total is not final)."""
        out = {}
        for ledger_id in closed:
            counts = self._ledgers.get(ledger_id)
            total = counts.total if counts is not None else None
            if total is not None:
                out[ledger_id] = total
        return out
