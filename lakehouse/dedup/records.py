"""Value types returned by the deduplicator."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class DedupStats:
    """What one batch did. ``forwarded = input - duplicates``; late, replayed and null ids are forwarded.

    Attributes:
        batch_id: The batch (None when applied without a batch id).
        replay: True when the batch id had been committed already and nothing was written.
        input: Records in the batch.
        forwarded: Records returned (and appended to the sink by ``run``).
        duplicates: Records dropped as duplicates of a live index entry.
        late: Forwarded records older than ``stream_time - interval`` (not saved in the index).
        replayed: Forwarded records whose live entry is the record itself (same partition and offset).
        null_ids: Forwarded records with a null id (or id part); never stored.
        saved: Index entries written by the batch (one per id at most).
        sink_rows: Rows :meth:`Deduplicator.run` appended to the sink (None after ``apply``): the
            forwarded records less re-deliveries of a record the sink holds already.
        sink_version: The sink's version whose commit appended the batch (None after ``apply``), also
            when this run's append was a skipped replay.
    """

    batch_id: int | None
    replay: bool
    input: int
    forwarded: int
    duplicates: int
    late: int
    replayed: int
    null_ids: int
    saved: int
    sink_rows: int | None = None
    sink_version: int | None = None


@dataclass(frozen=True)
class PurgeResult:
    """What :meth:`Deduplicator.purge` removed: whole buckets below ``below_bucket`` (metadata only)."""

    below_bucket: int | None
    files_removed: int
    rows_removed: int
    stream_time: datetime | None
