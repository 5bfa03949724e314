"""A source's Delta history as the replica reads it: offsets, recorded state, partition drops, coverage.

Only commit metadata reaches the driver (one row per commit), never table rows.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pyspark.sql import SparkSession

from lakehouse.commit_log import BATCH_IDS, commit_infos, parse_metadata
from lakehouse.times import from_micros
from lakehouse.versioned.store import READ_NEUTRAL_OPERATIONS
from lakehouse.versioned.store import STATE_FIELDS as STORE_STATE_FIELDS

#: The fields of a store's commit metadata that its readers need (its state, each writer's and the
#: unnamed writer's last batch id).
RECORDED_FIELDS = (*STORE_STATE_FIELDS, BATCH_IDS, "batch_id")
#: Commit metadata field of every batch commit of a store or index (``put_all``, ``put``, ``apply``, an
#: empty batch): the records it was given. A store's other commits (seal, expiry, VACUUM) have none.
BATCH_FIELD = "records"
#: A commit's files are written at most this long before the commit (VACUUM horizons are compared with
#: the first needed commit's time minus this).
WRITE_MARGIN = timedelta(hours=1)
_DROP_OPERATION = "drop_partitions"
#: Operations that change no rows (their commits add no data file, or only files with dataChange false).
_NO_ROW_CHANGES = frozenset(
    {"SET TBLPROPERTIES", "ADD COLUMNS", "OPTIMIZE", "VACUUM START", "VACUUM END", "CREATE TABLE"}
)
#: Operations that change no schema but by adding columns (schema evolution); appends too (:data:`_APPENDS`).
_SCHEMA_KEEPING = frozenset({"MERGE", "DELETE", "OPTIMIZE", "VACUUM START", "VACUUM END"})
_APPENDS = frozenset({"WRITE", "STREAMING UPDATE"})
#: MERGE metrics that are all 0 when the MERGE only inserted rows (its files are new ones only).
_MERGE_CHANGES = ("numTargetRowsUpdated", "numTargetRowsDeleted", "numTargetFilesRemoved")
#: Metrics counting the rows a commit wrote (an append's, a MERGE's inserted and updated ones).
_WRITTEN_ROWS = ("numOutputRows", "numTargetRowsInserted", "numTargetRowsUpdated")


@dataclass(frozen=True)
class Commit:
    """One commit of the source's history (``timestamp`` in UTC, ``metrics`` its ``operationMetrics``)."""

    version: int
    timestamp: datetime
    operation: str
    parameters: dict[str, str]
    meta: dict[str, Any]
    metrics: dict[str, str]

    def vacuum_horizon(self) -> datetime | None:
        """For a VACUUM START: files removed (or untracked and written) before this time may be gone."""
        if self.operation != "VACUUM START":
            return None
        millis = self.parameters.get("specifiedRetentionMillis") or self.parameters.get(
            "defaultRetentionMillis"
        )
        return None if millis is None else self.timestamp - timedelta(milliseconds=int(millis))


def source_commits(spark: SparkSession, path: str, after: int = -1) -> list[Commit]:
    """The commits of the table at ``path`` with version > ``after`` still in its log, oldest first.

    Read from the log's commit files on the driver (:func:`lakehouse.commit_log.commit_infos`): no Spark job.
    """
    return sorted(
        (
            Commit(
                int(info["version"]),
                from_micros(int(info["timestamp"]) * 1000),
                str(info["operation"]),
                {str(k): str(v) for k, v in (info.get("operationParameters") or {}).items()},
                _lakehouse_meta(info.get("userMetadata")),
                {str(k): str(v) for k, v in (info.get("operationMetrics") or {}).items()},
            )
            for info in commit_infos(spark, path, after=after)
        ),
        key=lambda c: c.version,
    )


def _lakehouse_meta(text: str | None) -> dict[str, Any]:
    return parse_metadata(text) or {}


def recorded_at(commits: Iterable[Commit], app_id: str, version: int) -> dict[str, Any]:
    """The newest value of each :data:`RECORDED_FIELDS` that ``app_id`` recorded at or below ``version``."""
    found: dict[str, Any] = {}
    for commit in sorted(commits, key=lambda c: -c.version):
        if commit.version > version or commit.meta.get("app_id") != app_id:
            continue
        for field in RECORDED_FIELDS:
            if field not in found and commit.meta.get(field) is not None:
                found[field] = commit.meta[field]
    return found


def drop_bound(commit: Commit, app_id: str) -> str | None:
    """The bound of a lakehouse partition drop (every partition ``< bound`` removed), else None."""
    meta = commit.meta
    if (
        commit.operation == "DELETE"
        and meta.get("app_id") == app_id
        and meta.get("operation") == _DROP_OPERATION
    ):
        return str(meta["bound"])
    return None


#: What a source commit is to a replica that follows the logical changelog (:func:`logical_role`).
WRITE, DROP, NEUTRAL = "write", "drop", "neutral"


def logical_role(commit: Commit, app_id: str) -> str | None:
    """What ``commit`` of a source whose commits ``app_id`` writes changes in its reads.

    - :data:`WRITE`: a batch (``put_all``, ``put``, an empty batch): its non-removed change rows are new or
      rewritten versions, the logical changelog.
    - :data:`DROP`: a partition drop (expiry, purge), applied as a metadata-only drop.
    - :data:`NEUTRAL`: a commit that changes no read: one whose Delta operation changes no rows
      (``OPTIMIZE``, ``VACUUM``, table properties), or a commit of ``app_id`` whose metadata names an
      operation of :data:`lakehouse.versioned.store.READ_NEUTRAL_OPERATIONS` (a seal: the store's own
      MERGE of its pending rows into their segments).
    - None: any other commit that changed rows: someone else's, or one of the store's that says neither
      (a replica cannot tell what it means for reads, so it re-initializes rather than skip it).
    """
    if commit.operation in _NO_ROW_CHANGES:
        return NEUTRAL
    if drop_bound(commit, app_id) is not None:
        return DROP
    if commit.meta.get("app_id") != app_id:
        return None
    if BATCH_FIELD in commit.meta:
        return WRITE
    return NEUTRAL if commit.meta.get("operation") in READ_NEUTRAL_OPERATIONS else None


def coverage_problem(commits: list[Commit], checkpoint: int, target: int) -> str | None:
    """Why the source can no longer give the changes ``checkpoint + 1 .. target`` (None if it can).

    ``commits`` are the source's commits after ``checkpoint`` still in its log. The log must still hold
    ``checkpoint + 1`` (Delta cleans up old log entries), and no VACUUM after the checkpoint may have had
    a horizon past the first needed commit (minus :data:`WRITE_MARGIN`). Files missing for any other
    reason still fail the read itself, loudly.
    """
    if checkpoint >= target:
        return None
    if not commits or commits[0].version > checkpoint + 1:
        first = commits[0].version if commits else "none"
        return f"the log no longer holds version {checkpoint + 1} (oldest after the checkpoint: {first})"
    needed_since = commits[0].timestamp - WRITE_MARGIN
    for commit in commits:
        horizon = commit.vacuum_horizon()
        if horizon is not None and horizon > needed_since:
            return (
                f"VACUUM at version {commit.version} removed files older than {horizon:%Y-%m-%d %H:%M:%S}, "
                f"which the changes after version {checkpoint} need"
            )
    return None


def wrote_rows(commit: Commit) -> bool:
    """Whether ``commit`` wrote any row, by its metrics (True when they do not say)."""
    counts = [commit.metrics.get(name) for name in _WRITTEN_ROWS if commit.metrics.get(name) is not None]
    return not counts or any(int(count) > 0 for count in counts)


def inserts_only(commits: list[Commit], first: int, last: int) -> bool:
    """Whether the commits ``first .. last`` (both inclusive) only inserted rows, by their commit infos.

    True when every version of the range is in ``commits`` and each is an append (``WRITE`` or
    ``STREAMING UPDATE`` in mode ``Append``), a MERGE that updated, deleted and removed nothing, or an
    operation that changes no rows: then the range's Change Data Feed holds ``insert`` rows only (Delta
    reads a commit without change files as its added files' inserts and removed files' deletes, and these
    remove none). False means "not known from the metadata", not "has updates".
    """
    in_range = [c for c in commits if first <= c.version <= last]
    return len(in_range) == last - first + 1 and all(_inserts_only(c) for c in in_range)


def each_inserts_only(commits: list[Commit], versions: list[int]) -> bool:
    """Whether each of the commits ``versions`` only inserted rows (:func:`inserts_only` of each)."""
    return all(inserts_only(commits, version, version) for version in versions)


def keeps_schema(commits: list[Commit], first: int, last: int) -> bool:
    """Whether the table's schema at ``last`` is the one at ``first - 1`` or that one with columns added,
    by the commit infos of ``first .. last`` (both inclusive; True for an empty range).

    True when each of them is in ``commits`` and is an append, a MERGE, a DELETE, ``OPTIMIZE`` or
    ``VACUUM``: those change a schema only by adding columns (schema evolution), if at all. False means
    "not known from the metadata" (a table property, a column change, an overwrite).
    """
    in_range = [c for c in commits if first <= c.version <= last]
    return len(in_range) == max(0, last - first + 1) and all(_keeps_schema(c) for c in in_range)


def _keeps_schema(commit: Commit) -> bool:
    if commit.operation in _SCHEMA_KEEPING:
        return True
    return commit.operation in _APPENDS and _inserts_only(commit)


def _inserts_only(commit: Commit) -> bool:
    if commit.operation in _NO_ROW_CHANGES:
        return True
    if commit.operation == "WRITE":
        return commit.parameters.get("mode") == "Append"
    if commit.operation == "STREAMING UPDATE":
        return commit.parameters.get("outputMode") == "Append"
    if commit.operation == "MERGE":
        metrics = commit.metrics
        no_changes = all(metrics.get(name) == "0" for name in _MERGE_CHANGES)
        return no_changes and metrics.get("numTargetDeletionVectorsAdded", "0") == "0"
    return False
