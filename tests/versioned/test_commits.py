"""A versioned store's commits: durable state under log cleanup, a second writer, empty batches (issue 19)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from lakehouse.errors import ConcurrentWriteError, InvalidInputError, ReplayMismatchWarning
from lakehouse.versioned import PutStatus, VersionedStore
from tests.durability import age_log, deleted_since, enable_fast_cleanup
from tests.versioned.helpers import at, batch_frame, create_store, ms_of, store_history

RETENTION_MS = 10_000
INTERVAL_MS = 2_000
FIRST = [("K1", "a", 0, 0, 0), ("K2", "b", 5_000, 0, 1)]
SECOND = [("K1", "c", 30_000, 0, 2)]
NEXT = [("K1", "d", 25_000, 0, 3), ("K2", "e", 19_000, 0, 4), ("K3", "f", 31_000, 0, 5)]


def _state(store: VersionedStore) -> tuple[Any, ...]:
    late = store.get("K1", at(1_000))
    return ms_of(store.stream_time), late, store_history(store)


def test_state_survives_checkpoints_log_cleanup_and_maintenance(spark: SparkSession, tmp_path: Path) -> None:
    """19.3: stream time and batch ids outlive 10+ vacuum/expire calls and Delta's log cleanup."""
    plain = create_store(spark, str(tmp_path / "plain"), RETENTION_MS, INTERVAL_MS)
    cleaned = create_store(spark, str(tmp_path / "cleaned"), RETENTION_MS, INTERVAL_MS)
    enable_fast_cleanup(spark, cleaned.path)
    for store in (plain, cleaned):
        store.put_all(batch_frame(spark, FIRST), batch_id=0)
        store.put_all(batch_frame(spark, SECOND), batch_id=1)
    cleaned.expire()
    before = age_log(cleaned.path)
    for _ in range(2):  # 10 VACUUMs; the second aging lets the cleanup reach the batches' commits
        for _ in range(5):
            cleaned.vacuum()
        age_log(cleaned.path)
    cleaned.vacuum()
    assert "00000000000000000002.json" in deleted_since(cleaned.path, before)  # batch 0's commit is gone
    assert _state(cleaned) == _state(plain)
    assert ms_of(cleaned.stream_time) == 30_000
    assert cleaned.get("K1", at(1_000)) is None  # expired: not answered from the history still stored
    with pytest.raises(InvalidInputError, match="older than the table's log retention"):
        cleaned.put_all(batch_frame(spark, FIRST), batch_id=0)  # refused, not re-applied
    replay = cleaned.put_all(batch_frame(spark, SECOND), batch_id=1)  # the last batch: Delta's txn
    assert replay.replayed and replay.rows_written == 0
    assert cleaned.put("K9", "late", at(19_999)).status is PutStatus.NOT_PUT
    results = [store.put_all(batch_frame(spark, NEXT), batch_id=2) for store in (plain, cleaned)]
    assert results[0] == results[1]
    assert store_history(cleaned) == store_history(plain)
    assert ms_of(cleaned.stream_time) == ms_of(plain.stream_time) == 31_000


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


def test_a_replayed_batch_id_with_other_input_is_reported_and_writes_nothing(
    spark: SparkSession, table_path: str
) -> None:
    """17: the same batch id again with the same records is silent; with changed records it warns."""
    store = create_store(spark, table_path, RETENTION_MS, INTERVAL_MS)
    store.put_all(batch_frame(spark, FIRST), batch_id=0)
    version = store.state_version()[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReplayMismatchWarning)
        assert store.put_all(batch_frame(spark, list(reversed(FIRST))), batch_id=0).replayed
    changed = [FIRST[0], ("K2", "other", 5_000, 0, 1)]
    with pytest.warns(
        ReplayMismatchWarning, match=r"batch 0 .* committed with 2 record\(s\) and is replayed with 2"
    ):
        result = store.put_all(batch_frame(spark, changed), batch_id=0)
    assert result.replayed and store.state_version()[0] == version
    assert store.get("K2").value == {"v": "b"}
