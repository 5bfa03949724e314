"""Whether each task of the ``maintain`` stage is due, decided from small metadata only.

Each decision reads the table's newest commits (:func:`lakehouse.history.recent_commits`), its stream
times and properties: never its data. A task that is not due would find nothing to do (or, for VACUUM,
ran within ``vacuum_interval``); when the commits cannot tell, the task is due.

- **seal** (versioned store): due when the commits since its newest seal wrote ``seal_min_rows`` rows or
  more into its pending partition (an upper bound of the pending versions: a batch may replace some). A
  seal reads and rewrites the sealed versions of the pending keys, a cost that shrinks little with fewer
  pending rows; until then every read resolves the pending rows itself (the same answers).
- **expire** (versioned store): due when the first live segment (``floor((stream_time - R) /
  interval)``) is above the lowest segment the store may hold: the bound of its newest expiry, or the
  lowest segment a MERGE since then wrote (each records it), so only when stream time crossed a segment
  boundary past stored data.
- **purge** (seen-ID index): likewise with the first live bucket and the buckets the index's MERGEs wrote.
- **vacuum** (versioned store): due unless a VACUUM ended less than ``vacuum_interval`` ago, or the table
  is younger than its file retention (no file can be old enough to delete).
- **optimize** (any table): due when the commits since its last OPTIMIZE added ``optimize_min_files``
  files or more (the files compaction would merge).
- **checkpoint** (a replica, whose syncs leave checkpoints to its maintenance): due when its log holds
  :data:`CHECKPOINT_EVERY` commits or more after its newest checkpoint (Delta's own default interval).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from lakehouse.dedup.deduplicator import APP_ID as DEDUP_APP_ID
from lakehouse.dedup.deduplicator import LOWEST_BUCKET, Deduplicator
from lakehouse.history import Commit, lowest_partition, reaches_creation
from lakehouse.times import micros
from lakehouse.versioned.pending import PENDING_SEGMENT
from lakehouse.versioned.segments import first_live_segment
from lakehouse.versioned.store import APP_ID as STORE_APP_ID
from lakehouse.versioned.store import LOWEST_SEGMENT, VersionedStore


@dataclass(frozen=True)
class Due:
    """Whether a maintenance task is due, and why (or why not).

    Attributes:
        due: Whether the task should run.
        reason: Why, with the numbers compared (the machine form, in the stage's JSON metrics).
        said: Why, as a short phrase for people (``44 of 50 000 pending rows``); default ``reason``.
    """

    due: bool
    reason: str
    said: str = ""

    def __bool__(self) -> bool:
        return self.due

    def __post_init__(self) -> None:
        if not self.said:
            object.__setattr__(self, "said", self.reason)


def _span(duration: timedelta) -> str:
    """``duration`` in the largest whole unit people use for it (``7 days``, ``36 hours``, ``90 s``)."""
    seconds = int(duration.total_seconds())
    for unit, size in (("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def _count(n: int) -> str:
    """``n`` with thin groups of thousands, as people read it (``50 000``)."""
    return f"{n:,}".replace(",", " ")


def seal_due(pending_commits: int, commits: Sequence[Commit], min_rows: int) -> Due:
    """Whether :meth:`VersionedStore.seal` is due on a store whose newest ``pending_commits`` pending writes
    (:meth:`VersionedStore.pending_commits`) are among ``commits`` (newest first): ``min_rows`` or more
    rows written by them. Due when they are not all among ``commits`` (their rows cannot be counted)."""
    if not pending_commits:
        return Due(False, "nothing pending")
    writes = [c for c in commits if c.meta.get("app_id") == STORE_APP_ID and _wrote_pending(c)]
    if len(writes) < pending_commits:
        return Due(True, f"{pending_commits} pending writes, not all in the newest {len(commits)} commits")
    rows = sum(c.rows_added for c in writes[:pending_commits])
    reason = f"{rows} rows written to the pending partition since the last seal (seal_min_rows {min_rows})"
    return Due(rows >= min_rows, reason, f"{_count(rows)} of {_count(min_rows)} pending rows")


def _wrote_pending(commit: Commit) -> bool:
    lowest = commit.meta.get(LOWEST_SEGMENT)
    return lowest is not None and int(lowest) == PENDING_SEGMENT


def expire_due(store: VersionedStore, commits: Sequence[Commit]) -> Due:
    """Whether :meth:`VersionedStore.expire` would drop a segment (``commits``: the store's, newest first)."""
    _, stream_time_us = store.state_version()
    if stream_time_us is None:
        return Due(False, "no stream time yet")
    settings = store.settings
    first_live = first_live_segment(stream_time_us, settings.retention_us, settings.interval_us)
    return _below(first_live, lowest_partition(commits, STORE_APP_ID, LOWEST_SEGMENT), "segment")


def purge_due(dedup: Deduplicator, commits: Sequence[Commit]) -> Due:
    """Whether :meth:`Deduplicator.purge` would drop a bucket (``commits``: the index's, newest first)."""
    stream_times = dedup.stream_times()
    if not stream_times:
        return Due(False, "no stream time yet")
    oldest = min(micros(t) for t in stream_times.values())
    first_live = (oldest - dedup.settings.interval_us) // dedup.settings.bucket_us
    return _below(first_live, lowest_partition(commits, DEDUP_APP_ID, LOWEST_BUCKET), "bucket")


def _below(first_live: int, lowest: float | None, what: str) -> Due:
    if lowest is None:
        return Due(True, f"the recent commits do not bound the lowest {what}")
    if lowest == math.inf:
        return Due(False, f"no {what} holds data")
    if first_live <= lowest:
        oldest = (
            "every version is pending, none sealed yet"
            if what == "segment" and lowest == PENDING_SEGMENT
            else f"oldest {what} {int(lowest)}, first live {first_live}"
        )
        said = f"nothing stored is past retention yet ({oldest})"
        return Due(False, f"first live {what} {first_live} <= lowest stored {what} {int(lowest)}", said)
    return Due(True, f"first live {what} {first_live} > lowest stored {what} {int(lowest)}")


def vacuum_due(
    commits: Sequence[Commit], file_retention: timedelta, interval: timedelta, now: datetime
) -> Due:
    """Whether VACUUM is due on a table whose commits (newest first) are ``commits``."""
    last = next((c for c in commits if c.operation == "VACUUM END"), None)
    if last is not None and now - last.timestamp < interval:
        reason = f"vacuumed at {last.timestamp:%Y-%m-%d %H:%M:%S} UTC, within vacuum_interval"
        return Due(False, reason, f"{reason} ({_span(interval)})")
    if reaches_creation(commits) and commits[-1].timestamp > now - file_retention:
        said = f"the table is younger than its file retention ({_span(file_retention)})"
        return Due(False, f"created less than its file retention ({file_retention}) ago", said)
    return Due(True, "no VACUUM within vacuum_interval")


#: Commits after a table's newest checkpoint that make :func:`checkpoint_due` due (Delta's default
#: ``delta.checkpointInterval``).
CHECKPOINT_EVERY = 10


def checkpoint_due(version: int, checkpoint_version: int, every: int = CHECKPOINT_EVERY) -> Due:
    """Whether a Delta checkpoint is due on a table at ``version`` whose newest checkpoint is at
    ``checkpoint_version`` (-1: none): ``every`` commits or more after it, each replayed one by one by
    whoever reads the table's newest snapshot without it."""
    after = version - checkpoint_version if checkpoint_version >= 0 else version + 1
    where = f"checkpoint at version {checkpoint_version}" if checkpoint_version >= 0 else "checkpoint"
    reason = f"{after} commits after the newest {where} (every {every})"
    return Due(after >= every, reason, f"{after} of {every} commits since the last checkpoint")


def optimize_due(commits: Sequence[Commit], min_files: int, batch_partitions: bool = False) -> Due:
    """Whether OPTIMIZE is due: ``min_files`` or more files added since the last OPTIMIZE (0: never).

    ``batch_partitions``: the table is partitioned by batch id (a quarantine), so each commit's files are a
    partition of their own. OPTIMIZE bins files within a partition only, so only the files a commit added
    past its first count: a table of one file per batch is never due, as OPTIMIZE would commit nothing
    (and, finding no commit of it, would be due again at every run)."""
    if not min_files:
        return Due(False, "optimize_min_files is 0")
    added, window = 0, f"in the newest {len(commits)} commits"
    for commit in commits:
        if commit.operation == "OPTIMIZE":
            window = "since the last OPTIMIZE"
            break
        added += max(0, commit.files_added - 1) if batch_partitions else commit.files_added
    else:
        if reaches_creation(commits):
            window = "since the table was created"
    files = "files sharing a batch's partition" if batch_partitions else "files"
    reason = f"{added} {files} added {window} (optimize_min_files {min_files})"
    return Due(added >= min_files, reason, f"{added} of {min_files} new {files} {window}")
