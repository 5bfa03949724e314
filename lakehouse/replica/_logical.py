"""The logical changelog of a versioned store, as a shard replica applies it (Kafka's standby replaying the
changelog topic into a store that compacts on its own schedule, seed 003).

A store's reads are a function of its **versions** (key, ``valid_from``, value, tombstone), its stream time
and retention: where a version is stored (pending or sealed, which segment) is the store's business, and
:mod:`lakehouse.versioned.pending` resolves pending rows against sealed ones for every read. So:

- a **batch** commit (``put_all``, a single ``put``) writes new versions and replaces pending ones: its
  Change Data Feed's inserts and the postimages that change a version's content (:func:`written_versions`;
  the only rows a batch deletes are versions already expired, which no read returns, and a postimage that
  leaves a version's content as it was changes no read) is the logical change. A replica writes those
  rows into **its own pending partition** (an append, or a MERGE confined to that partition when it holds
  rows), whatever partition the source wrote them to: a pending row replaces a sealed row of the same
  version in every read, and its ``valid_to`` is the source's bound, which resolution shortens to the
  next version the replica holds.
- a **seal**, ``OPTIMIZE`` or ``VACUUM`` changes no read: the replica skips it (its checkpoint moves on)
  and seals, compacts and vacuums itself on its own schedule (:meth:`Replica.maintain`).
- an **expiry** drops whole segments below a bound: the replica drops its own segments below the same
  bound (metadata only). Those hold only versions expired at the source's stream time, as the source's do.

Every version the replica writes was accepted by the source after the replica's last seal (at ``valid_from
>= stream time - R`` then), or rewrites a version the replica holds already (whose stored row is then in
the replica's resolution region, since its ``valid_to`` is above the new bound): the region the store
resolves from its last seal's stream time stays right.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from lakehouse.commit_log import FileStats
from lakehouse.replica._changes import (
    CDF_COLUMNS,
    CHANGE_TYPE,
    COMMIT_VERSION,
    DELETE,
    INSERT,
    POSTIMAGE,
    PREIMAGE,
)
from lakehouse.times import from_micros
from lakehouse.versioned._plan import VALID_FROM, VALID_TO
from lakehouse.versioned.pending import PENDING_SEGMENT
from lakehouse.versioned.segments import SEGMENT_COL

#: A working column: how many distinct contents a version's update pre- and postimage have.
_CONTENTS = "_lh_contents"


def runs(versions: Sequence[int]) -> list[tuple[int, int]]:
    """``versions`` (ascending) as runs of consecutive versions ``(first, last)``, both inclusive."""
    found: list[tuple[int, int]] = []
    for version in versions:
        if found and found[-1][1] == version - 1:
            found[-1] = (found[-1][0], version)
        else:
            found.append((version, version))
    return found


def written_versions(changes: DataFrame, identity: Sequence[str], inserts_only: bool) -> DataFrame:
    """The rows a range of batch commits wrote that a replica must write (Change Data Feed columns kept):
    inserts (new versions), and update postimages that change a version's content (a same-timestamp
    overwrite: its value or tombstone).

    A postimage that leaves a pending version's content as it was (a version written again with its
    value; or, from a store written before 2026-11-28, whose batches re-bounded pending versions, only its
    ``valid_to`` shortened because a later version of its key arrived) is left out: the replica holds
    that version already, and resolution bounds a pending row by the next version of its key
    (:mod:`lakehouse.versioned.pending`), so every read is the same without it. Pairing a postimage with
    its preimage is one window over the changes (``identity``: the keys and ``valid_from``), skipped when
    ``inserts_only`` (the range's commit infos say it inserted rows only).
    """
    if inserts_only:
        return changes.where(f"{CHANGE_TYPE} = '{INSERT}'")  # a SQL condition: one JVM call
    kind = F.col(CHANGE_TYPE)
    content = [c for c in changes.columns if c not in CDF_COLUMNS and c not in (VALID_TO, SEGMENT_COL)]
    same_row = Window.partitionBy(*[F.col(f"`{c}`") for c in identity], F.col(COMMIT_VERSION))
    updated = kind.isin(PREIMAGE, POSTIMAGE)
    contents = F.collect_set(F.when(updated, F.struct(*[F.col(f"`{c}`") for c in content]))).over(same_row)
    return (
        changes.where(kind != F.lit(DELETE))
        .withColumn(_CONTENTS, F.size(contents))
        .where((kind == F.lit(INSERT)) | ((kind == F.lit(POSTIMAGE)) & (F.col(_CONTENTS) > 1)))
        .drop(_CONTENTS)
    )


def as_pending(written: DataFrame, identity: Sequence[str], columns: Sequence[str], net: bool) -> DataFrame:
    """The replica's pending rows of ``written`` (:func:`written_versions`): the table's ``columns``, the
    segment set to the pending partition's.

    ``net``: keep per version (``identity``: the keys and ``valid_from``) only its row of the newest commit
    (one window over the changes, not the table); without it every row is kept (of a single commit's
    changes, :func:`written_versions` keeps each version at most once).
    """
    if net:
        newest_first = Window.partitionBy(*[F.col(f"`{c}`") for c in identity]).orderBy(
            F.col(COMMIT_VERSION).desc()
        )
        written = (
            written.withColumn("_lh_rank", F.row_number().over(newest_first))
            .where(F.col("_lh_rank") == 1)
            .drop("_lh_rank")
        )
    # One JVM call (a column or function a few): the table's columns, the segment the pending one's.
    pending = f"CAST({PENDING_SEGMENT} AS BIGINT) AS `{SEGMENT_COL}`"
    return written.selectExpr(*[pending if c == SEGMENT_COL else f"`{c}`" for c in columns])


def start_after(files: FileStats, stream_time_us: int | None) -> bool:
    """Whether every row of ``files`` (the statistics of the files written) starts after ``stream_time_us``:
    the least ``valid_from`` of each, truncated down to milliseconds as Delta writes it. False when not
    known (a file without that statistic, no stream time)."""
    if stream_time_us is None:
        return False
    for stats in files:
        low = (stats.get("minValues") or {}).get(VALID_FROM)
        if low is None or datetime.fromisoformat(low) <= from_micros(int(stream_time_us)):
            return False
    return True


class CountingCheck:
    """An :func:`lakehouse.commit_log.append_if` check that keeps what it accepted: ``rows``, the rows of
    the files it accepted by their statistics (None: not called, or a file without that statistic)."""

    def __init__(self, check: Callable[[FileStats], bool]) -> None:
        self._check = check
        self.rows: int | None = None

    def __call__(self, files: FileStats) -> bool:
        if not self._check(files):
            return False
        counts = [stats.get("numRecords") for stats in files]
        self.rows = None if None in counts else sum(int(count) for count in counts)
        return True


def pending_match(keys: Sequence[str], target: str = "t", source: str = "s") -> Column:
    """MERGE condition: a target row is the pending row of the source row's version."""
    condition = F.col(f"{target}.{SEGMENT_COL}") == F.lit(PENDING_SEGMENT)
    for column in (*keys, VALID_FROM):
        condition = condition & (F.col(f"{target}.`{column}`") == F.col(f"{source}.`{column}`"))
    return condition
