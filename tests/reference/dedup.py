"""Reference model of KIP-655 deduplication as refined by issue 4 (pure Python, for tests only).

One record at a time, exactly as the issue states the contract:

- the id of a record is a tuple of its ``by`` values; a record with any null part is forwarded, never stored;
- a task is a source partition when ``key`` is part of ``by``, otherwise one task for everything; stream
  time is the largest timestamp the task has seen, the current record included;
- the index keeps per (task, id) the last *saved* record (timestamp, partition, offset); an entry with
  ``entry.t < stream_time - interval`` is expired (as if purged);
- same partition and non-null offset as the live entry: forwarded (replay); else a live entry with
  ``|t - entry.t| <= interval``: duplicate, dropped, index untouched; else forwarded, and saved unless late
  (``t < stream_time - interval``).

Batches are processed in Kafka Streams' task order (``tests.reference.ordering``).
"""

from __future__ import annotations

import enum
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

from tests.reference.ordering import Record as OrderRecord
from tests.reference.ordering import processing_order

NULL_OFFSET_ORDER = -1


class Decision(enum.Enum):
    FORWARDED = "forwarded"
    DUPLICATE = "duplicate"
    LATE = "late"
    REPLAYED = "replayed"
    NULL_ID = "null_id"

    @property
    def forwarded(self) -> bool:
        return self is not Decision.DUPLICATE


@dataclass(frozen=True)
class Rec:
    """A record: ``id`` is the tuple of its ``by`` values (a None inside means a null id part)."""

    id: tuple[Hashable | None, ...]
    ts: int
    partition: int = 0
    offset: int | None = 0
    label: str = ""


@dataclass(frozen=True)
class Entry:
    ts: int
    partition: int
    offset: int | None


@dataclass
class DedupModel:
    """The seen-ID index and the stream time of every task."""

    interval: int
    per_partition: bool
    index: dict[tuple[int, tuple[Hashable, ...]], Entry] = field(default_factory=dict)
    stream_time: dict[int, int] = field(default_factory=dict)

    def task_of(self, rec: Rec) -> int:
        return rec.partition if self.per_partition else 0

    def process(self, rec: Rec) -> Decision:
        task = self.task_of(rec)
        st = max(self.stream_time.get(task, rec.ts), rec.ts)
        self.stream_time[task] = st
        if any(part is None for part in rec.id):
            return Decision.NULL_ID
        entry = self.index.get((task, rec.id))
        live = entry is not None and entry.ts >= st - self.interval
        if live and rec.offset is not None and (entry.partition, entry.offset) == (rec.partition, rec.offset):
            return Decision.REPLAYED
        if live and abs(rec.ts - entry.ts) <= self.interval:
            return Decision.DUPLICATE
        if rec.ts < st - self.interval:
            return Decision.LATE
        self.index[(task, rec.id)] = Entry(rec.ts, rec.partition, rec.offset)
        return Decision.FORWARDED

    def process_batch(self, records: Sequence[Rec]) -> list[tuple[Rec, Decision]]:
        """Process a batch in task order; returns each record with its decision, in processing order."""
        return [(rec, self.process(rec)) for rec in in_processing_order(records)]

    def live_entries(self) -> dict[tuple[int, tuple[Hashable, ...]], Entry]:
        """The entries not expired at their task's stream time."""
        return {k: e for k, e in self.index.items() if e.ts >= self.stream_time[k[0]] - self.interval}


def in_processing_order(records: Sequence[Rec]) -> list[Rec]:
    """The records in Kafka Streams' task order (a null offset sorts first in its partition)."""
    by_position: dict[OrderRecord, list[Rec]] = {}
    for rec in records:
        offset = NULL_OFFSET_ORDER if rec.offset is None else rec.offset
        by_position.setdefault(OrderRecord(rec.partition, offset, rec.ts), []).append(rec)
    ordered = processing_order(
        [OrderRecord(r.partition, NULL_OFFSET_ORDER if r.offset is None else r.offset, r.ts) for r in records]
    )
    return [by_position[o].pop(0) for o in ordered]
