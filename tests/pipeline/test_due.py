"""When maintenance tasks are due, decided from commit records alone (no Spark)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

from lakehouse.history import Commit, lowest_partition
from lakehouse.pipeline.due import checkpoint_due, optimize_due, seal_due, vacuum_due

NOW = datetime(2024, 3, 1, tzinfo=UTC)
APP = "lakehouse.versioned_store"


def commit(version: int, delta_op: str, ago: timedelta = timedelta(0), **fields: Any) -> Commit:
    metrics = {k: str(v) for k, v in fields.pop("metrics", {}).items()}
    meta = {"app_id": APP, **fields} if fields else {}
    return Commit(version, NOW - ago, delta_op, metrics, meta)


def newest_first(*commits: Commit) -> list[Commit]:
    return sorted(commits, key=lambda c: -c.version)


def test_lowest_partition_is_the_newest_drop_or_the_lowest_merge_after_it() -> None:
    created = commit(0, "CREATE TABLE")
    merge = commit(1, "MERGE", lowest_segment=7, metrics={"numTargetFilesAdded": 3})
    empty = commit(2, "WRITE", batch_id=2, metrics={"numFiles": 0, "numOutputRows": 0})
    assert lowest_partition(newest_first(created), APP, "lowest_segment") == math.inf
    assert lowest_partition(newest_first(created, merge, empty), APP, "lowest_segment") == 7
    dropped = commit(3, "DELETE", operation="drop_partitions", bound="9", metrics={"numRemovedFiles": 2})
    later = commit(4, "MERGE", lowest_segment=12, metrics={"numTargetFilesAdded": 1})
    assert lowest_partition(newest_first(created, merge, empty, dropped, later), APP, "lowest_segment") == 9
    optimized = commit(5, "OPTIMIZE", metrics={"numAddedFiles": 1, "numRemovedFiles": 4})
    assert lowest_partition([optimized, later, dropped], APP, "lowest_segment") == 9


def test_lowest_partition_is_unknown_when_a_commit_may_have_written_data_unrecorded() -> None:
    created = commit(0, "CREATE TABLE")
    old_merge = commit(1, "MERGE", batch_id=1, metrics={"numTargetFilesAdded": 3})  # before the field
    foreign = Commit(2, NOW, "WRITE", {"numFiles": "1", "numOutputRows": "5"}, {})
    restored = Commit(2, NOW, "RESTORE", {"numRestoredFiles": "4"}, {})
    assert lowest_partition([old_merge, created], APP, "lowest_segment") is None
    assert lowest_partition([foreign, created], APP, "lowest_segment") is None
    assert lowest_partition([restored, created], APP, "lowest_segment") is None
    merge = commit(5, "MERGE", lowest_segment=3, metrics={"numTargetFilesAdded": 1})
    assert lowest_partition([merge], APP, "lowest_segment") is None  # neither a drop nor the creation


def test_vacuum_is_due_once_per_interval_and_only_on_tables_older_than_their_file_retention() -> None:
    week, day = timedelta(days=7), timedelta(days=1)
    young = [commit(1, "MERGE", timedelta(hours=1)), commit(0, "CREATE TABLE", timedelta(days=2))]
    assert not vacuum_due(young, week, day, NOW)
    assert vacuum_due(young, timedelta(hours=12), day, NOW)
    vacuumed = [commit(3, "VACUUM END", timedelta(hours=3)), commit(2, "VACUUM START", timedelta(hours=3))]
    old = [*vacuumed, commit(1, "MERGE", timedelta(days=9)), commit(0, "CREATE TABLE", timedelta(days=10))]
    skipped = vacuum_due(old, week, day, NOW)
    assert not skipped and "within vacuum_interval" in skipped.reason
    assert vacuum_due(old, week, timedelta(hours=2), NOW)
    assert vacuum_due(old[:2], week, timedelta(0), NOW)  # log cleaned up: the creation is unknown


def test_optimize_is_due_when_enough_files_were_added_since_the_last_optimize() -> None:
    def append(version: int, files: int) -> Commit:
        return commit(version, "WRITE", metrics={"numFiles": files, "numOutputRows": 10 * files})

    history = [append(4, 6), append(3, 6), commit(2, "OPTIMIZE", metrics={"numAddedFiles": 1}), append(1, 20)]
    assert not optimize_due(history, 16)
    assert optimize_due(history, 12)
    assert optimize_due([append(5, 5), *history], 16)
    assert optimize_due(history[-1:], 16) and not optimize_due(history, 0)


def test_a_table_of_one_file_per_batch_partition_is_never_due_for_optimize() -> None:
    """A quarantine is partitioned by batch id: OPTIMIZE bins files within a partition only, so one file
    per batch leaves it nothing to do, and it would commit nothing and be due again at every run."""
    batches = [commit(v, "WRITE", metrics={"numFiles": 1, "numOutputRows": 10}) for v in range(40, 0, -1)]
    assert optimize_due(batches, 16)  # as files, 40 of them
    skipped = optimize_due(batches, 16, batch_partitions=True)
    assert not skipped and "0 of 16 new files sharing a batch's partition" in skipped.said
    wide = [commit(v, "WRITE", metrics={"numFiles": 5, "numOutputRows": 50}) for v in range(4, 0, -1)]
    assert optimize_due(wide, 16, batch_partitions=True)  # 4 batches of 5 files: 16 can be binned


def test_a_seal_is_due_once_the_pending_writes_since_the_last_seal_added_seal_min_rows() -> None:
    pending = 2**63 - 1
    created = commit(0, "CREATE TABLE")
    first = commit(1, "WRITE", batch_id=0, lowest_segment=pending, metrics={"numOutputRows": 600})
    sealed = commit(2, "MERGE", lowest_segment=7, metrics={"numTargetRowsInserted": 900})
    second = commit(3, "WRITE", batch_id=1, lowest_segment=pending, metrics={"numOutputRows": 300})
    third = commit(4, "MERGE", batch_id=2, lowest_segment=pending, metrics={"numTargetRowsInserted": 200})
    commits = newest_first(created, first, sealed, second, third)
    assert seal_due(2, commits, 500) and not seal_due(2, commits, 501)  # 300 + 200 since the seal
    skipped = seal_due(2, commits, 1000)
    assert "500 rows written to the pending partition since the last seal" in skipped.reason
    assert seal_due(0, commits, 1).reason == "nothing pending" and not seal_due(0, commits, 1)
    assert seal_due(3, [third, second], 10**9)  # older pending writes are not among the commits: due


def test_a_checkpoint_is_due_once_the_log_holds_every_commits_after_the_newest_one() -> None:
    assert not checkpoint_due(8, -1, every=10)  # versions 0..8: 9 commits, none checkpointed
    assert checkpoint_due(9, -1, every=10)
    assert not checkpoint_due(29, 20, every=10)  # 21..29 after the checkpoint at 20
    due = checkpoint_due(30, 20, every=10)
    assert due and due.said == "10 of 10 commits since the last checkpoint"
