"""Concurrent writers (issue 17): two writers on one table at the same moment, in threads of one session.

Whatever commits first wins; the other either commits after it (Delta found no conflict) or fails with one
line naming the other's commit, writing nothing, and its retry commits. The table ends as if the batches
ran one after the other: nothing lost, nothing doubled, no two open versions of a key.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from lakehouse.dedup import Deduplicator
from lakehouse.errors import ConcurrentWriteError
from tests.reference.versioned import VersionedStoreModel
from tests.versioned.helpers import batch_frame, create_store, store_history

RETRIES = 5


def _at_once(writes: list[Callable[[], object]]) -> list[str]:
    """Start ``writes`` together (a barrier), retrying each on ConcurrentWriteError; returns the errors."""
    barrier = threading.Barrier(len(writes))
    errors: list[str] = []
    failures: list[BaseException] = []

    def attempt(write: Callable[[], object]) -> None:
        barrier.wait()
        for _ in range(RETRIES):
            try:
                write()
                return
            except ConcurrentWriteError as error:
                errors.append(str(error))
            except BaseException as error:  # reported in the main thread
                failures.append(error)
                return
        failures.append(AssertionError(f"still conflicting after {RETRIES} attempts"))

    threads = [threading.Thread(target=attempt, args=(w,)) for w in writes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    if failures:
        raise failures[0]
    return errors


def _one_line_naming_the_other_commit(errors: list[str]) -> None:
    for error in errors:
        assert "\n" not in error and "another writer committed version" in error, error


@pytest.mark.slow
def test_two_writers_of_one_store_end_as_their_batches_one_after_the_other(
    spark: SparkSession, table_path: str
) -> None:
    store = create_store(spark, table_path, retention_ms=10_000_000)
    first = [("a", "a1", 100, 0, 0), ("b", "b1", 200, 0, 1), ("a", "a3", 300, 0, 2)]
    second = [("a", "a2", 250, 1, 0), ("b", "b2", 150, 1, 1), ("c", "c1", 120, 1, 2)]
    errors = _at_once(
        [
            lambda: store.put_all(batch_frame(spark, first)),
            lambda: store.put_all(batch_frame(spark, second)),
        ]
    )
    _one_line_naming_the_other_commit(errors)
    # Nothing is dropped (a long retention), so either commit order gives these versions.
    model = VersionedStoreModel(history_retention=10_000_000)
    for key, value, ms, _, _ in sorted(first + second, key=lambda r: r[2]):
        model.put(key, value, ms)
    assert store_history(store) == sorted(model.history())
    open_versions = [key for key, _, to_ms, _ in store_history(store) if to_ms is None]
    assert sorted(open_versions) == ["a", "b", "c"]


@pytest.mark.slow
def test_two_pipelines_append_to_one_sink_at_once_and_neither_skips_the_others_batches(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Two indexes (two pipelines) with the same batch ids write one sink: every batch lands once."""
    sink = str(tmp_path / "sink")
    dedups = [
        Deduplicator.create(spark, str(tmp_path / name), by="k", interval=timedelta(hours=1))
        for name in ("one", "two")
    ]
    batches = [_records(spark, prefix) for prefix in ("x", "y")]
    for batch_id in (0, 1):
        errors = _at_once(
            [
                lambda d=dedup, b=batch, i=batch_id: d.run(b.where(f"offset % 2 = {i}"), i, sink=sink)
                for dedup, batch in zip(dedups, batches, strict=True)
            ]
        )
        _one_line_naming_the_other_commit(errors)
    # A replay of each pipeline's batch 1 writes nothing more.
    for dedup, batch in zip(dedups, batches, strict=True):
        dedup.run(batch.where("offset % 2 = 1"), 1, sink=sink)
    rows = sorted(tuple(r) for r in spark.read.format("delta").load(sink).select("k", "offset").collect())
    assert rows == sorted((f"{p}{n}", n) for p in ("x", "y") for n in range(4))


def _records(spark: SparkSession, prefix: str) -> DataFrame:
    """Four records ``<prefix>0..3`` at offsets 0..3 of partition 0, a millisecond apart."""
    rows = [(f"{prefix}{n}", 0, n, 1_700_000_000_000 + n) for n in range(4)]
    frame = spark.createDataFrame(rows, "k string, partition int, offset long, ms long")
    return frame.selectExpr("k", "partition", "offset", "timestamp_millis(ms) AS timestamp")
