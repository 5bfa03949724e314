"""A versioned store's commits: a second writer, empty and all-dropped batches (issue 19)."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from lakehouse.errors import ConcurrentWriteError, InvalidInputError
from lakehouse.versioned import VersionedStore
from tests.versioned.helpers import batch_frame, create_store, store_history

RETENTION_MS = 10_000
INTERVAL_MS = 2_000


def test_a_second_writer_that_planned_before_the_first_committed_fails_and_writes_nothing(
    spark: SparkSession, table_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """19.1: B plans its batch, A commits, B commits: B fails in one line and nothing of B is written."""
    writer_a = create_store(spark, table_path, RETENTION_MS, INTERVAL_MS)
    writer_b = VersionedStore.open(spark, table_path)
    writer_a.put_all(batch_frame(spark, [("K1", "v0", 0, 0, 0)]), batch_id=0)
    checked = writer_b._log.require_unchanged

    def a_commits_first(read_version: int, step: str) -> None:
        writer_a.put_all(batch_frame(spark, [("K1", "a", 10_000, 0, 1)]), batch_id=1)
        checked(read_version, step)

    monkeypatch.setattr(writer_b._log, "require_unchanged", a_commits_first)
    with pytest.raises(ConcurrentWriteError, match=r"batch 1 of lakehouse\.versioned_store") as raised:
        writer_b.put_all(batch_frame(spark, [("K1", "b", 20_000, 0, 2)]), batch_id=2)
    assert "\n" not in str(raised.value)
    assert store_history(writer_a) == [("K1", 0, 10_000, "v0"), ("K1", 10_000, None, "a")]
    monkeypatch.undo()
    retried = writer_b.put_all(batch_frame(spark, [("K1", "b", 20_000, 0, 2)]), batch_id=2)
    assert not retried.replayed
    assert store_history(writer_a) == [
        ("K1", 0, 10_000, "v0"),
        ("K1", 10_000, 20_000, "a"),
        ("K1", 20_000, None, "b"),
    ]


def test_empty_and_all_dropped_batches_record_their_batch_id(spark: SparkSession, table_path: str) -> None:
    """19.9: a batch that writes no row is committed: a lower id is refused, a replay returns the same."""
    store = create_store(spark, table_path, RETENTION_MS, INTERVAL_MS)
    store.put_all(batch_frame(spark, [("K1", "a", 50_000, 0, 0)]), batch_id=0)
    empty = store.put_all(batch_frame(spark, []), batch_id=3)
    dropped = store.put_all(batch_frame(spark, [("K1", "late", 1_000, 0, 1)]), batch_id=5)
    assert (empty.records, empty.rows_written, dropped.records, dropped.dropped) == (0, 0, 1, 1)
    with pytest.raises(InvalidInputError, match="batch ids must increase"):
        store.put_all(batch_frame(spark, [("K2", "x", 50_000, 0, 2)]), batch_id=4)
    replays = [store.put_all(batch_frame(spark, []), batch_id=b) for b in (3, 5)]
    assert all(r.replayed for r in replays)
    assert [(r.records, r.dropped, r.rows_written) for r in replays] == [(0, 0, 0), (1, 1, 0)]
    assert store_history(store) == [("K1", 50_000, None, "a")]
