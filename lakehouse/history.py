"""A table's newest commits as small records (Delta's commit infos), and what they tell maintenance.

Reading them costs one read of the newest commit files of the log, however large the table: the
``maintain`` stage decides from them whether a task is due (see :mod:`lakehouse.pipeline.due`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pyspark.sql import SparkSession

from lakehouse.commit_log import commit_infos, parse_metadata
from lakehouse.times import from_micros

#: How many of the newest commits :func:`recent_commits` reads.
DEPTH = 100
#: Delta operations that add no file to a partition that did not hold files before.
_NO_NEW_PARTITION = frozenset(
    {"CREATE TABLE", "OPTIMIZE", "VACUUM START", "VACUUM END", "SET TBLPROPERTIES", "ADD COLUMNS"}
)


@dataclass(frozen=True)
class Commit:
    """One commit: its version, time (UTC), Delta operation and ``operationMetrics``, and the lakehouse
    part of its ``userMetadata`` ({} if none)."""

    version: int
    timestamp: datetime
    operation: str
    metrics: Mapping[str, str]
    meta: Mapping[str, Any]

    @property
    def files_added(self) -> int:
        """Data files the commit added (0 for commits that add none)."""
        m = self.metrics
        return int(m.get("numFiles") or m.get("numTargetFilesAdded") or m.get("numAddedFiles") or 0)

    @property
    def rows_added(self) -> int:
        """Rows the commit added (see :func:`rows_added`)."""
        return rows_added(self.metrics)


def rows_added(metrics: Mapping[str, str]) -> int:
    """Rows a commit with ``operationMetrics`` ``metrics`` added: an append's output rows, a MERGE's
    inserted ones (0 for commits that add none)."""
    return int(metrics.get("numOutputRows") or metrics.get("numTargetRowsInserted") or 0)


def recent_commits(spark: SparkSession, path: str, depth: int = DEPTH) -> list[Commit]:
    """The newest ``depth`` commits of the table at ``path``, newest first."""
    return [_commit(info) for info in commit_infos(spark, path, depth)]


class NewestCommits:
    """Tables' newest :data:`DEPTH` commits as one piece of work (a maintenance run) looks at them again and
    again: each table's are read once, then only the commits made since (by the work itself or anyone
    else; none made: one look at the log's newest version)."""

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark
        self._read: dict[str, list[Commit]] = {}

    def of(self, path: str) -> list[Commit]:
        """The newest commits of the table at ``path``, newest first."""
        known = self._read.get(path)
        if known:
            since = commit_infos(self._spark, path, after=known[0].version)
            self._read[path] = [*map(_commit, since), *known][:DEPTH]
        else:
            self._read[path] = recent_commits(self._spark, path)
        return self._read[path]


def _commit(info: Mapping[str, Any]) -> Commit:
    return Commit(
        int(info["version"]),
        from_micros(int(info["timestamp"]) * 1000),
        str(info["operation"]),
        dict(info.get("operationMetrics") or {}),
        parse_metadata(info.get("userMetadata")) or {},
    )


def reaches_creation(commits: Sequence[Commit]) -> bool:
    """Whether ``commits`` (newest first) go back to the table's first commit."""
    return bool(commits) and commits[-1].version == 0


def lowest_partition(commits: Sequence[Commit], app_id: str, field: str) -> float | None:
    """A lower bound of the partition values the table holds, from its newest commits (newest first).

    The writer ``app_id`` records ``field`` (the lowest partition it writes) on each MERGE, and its
    :func:`lakehouse.delta_ops.drop_partitions_below` commits their ``bound``: below the newest drop nothing
    is left. ``math.inf`` when no commit since the table's creation wrote data; None when that cannot be
    told: a commit that may have written data without recording ``field``, or neither a drop nor the
    creation among ``commits``.
    """
    lowest = math.inf
    for commit in commits:
        mine = commit.meta.get("app_id") == app_id
        if mine and commit.meta.get("operation") == "drop_partitions":
            return min(lowest, int(commit.meta["bound"]))
        if mine and commit.meta.get(field) is not None:
            lowest = min(lowest, int(commit.meta[field]))
        elif not _adds_no_partition(commit):
            return None
        if commit.version == 0:
            return lowest
    return None


def _adds_no_partition(commit: Commit) -> bool:
    """Whether the commit surely added no row to a partition that held none before."""
    if commit.operation in _NO_NEW_PARTITION or commit.metrics.get("numOutputRows") == "0":
        return True
    # RESTORE brings files back without counting them as added.
    return commit.operation != "RESTORE" and bool(commit.metrics) and commit.files_added == 0
