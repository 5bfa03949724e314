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

from lakehouse.commit_log import CommitLog
from lakehouse.dedup import Deduplicator
from lakehouse.errors import ConcurrentWriteError, InvalidInputError
from lakehouse.versioned import VersionedStore
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
    _run_two_batches_at_once_then_replay(dedups, batches, sink)
    rows = sorted(tuple(r) for r in spark.read.format("delta").load(sink).select("k", "offset").collect())
    assert rows == sorted((f"{p}{n}", n) for p in ("x", "y") for n in range(4))


@pytest.mark.slow
def test_two_pipelines_write_one_store_with_the_same_batch_ids_and_neither_skips_the_other(
    spark: SparkSession, table_path: str
) -> None:
    """Named writers count batch ids apart; stream time stays the store's (both advance it)."""
    create_store(spark, table_path, retention_ms=10_000_000)
    one, two = (VersionedStore.open(spark, table_path, writer=name) for name in ("one", "two"))
    batches = {
        one: [[("a", "a1", 100, 0, 0)], [("a", "a3", 300, 0, 1)]],
        two: [[("b", "b1", 200, 1, 0)], [("a", "a2", 250, 1, 1)]],
    }
    for batch_id in (0, 1):
        errors = _at_once(
            [
                lambda s=store, i=batch_id: s.put_all(batch_frame(spark, batches[s][i]), batch_id=i)
                for store in (one, two)
            ]
        )
        _one_line_naming_the_other_commit(errors)
    replays = [store.put_all(batch_frame(spark, batches[store][1]), batch_id=1) for store in (one, two)]
    assert [r.replayed for r in replays] == [True, True]
    model = VersionedStoreModel(history_retention=10_000_000)
    for key, value, ms, _, _ in sorted(
        (r for b in batches.values() for rs in b for r in rs), key=lambda r: r[2]
    ):
        model.put(key, value, ms)
    assert store_history(one) == sorted(model.history())
    assert one.stream_time == two.stream_time and one.stream_time is not None
    assert VersionedStore.open(spark, table_path).stream_time == one.stream_time
    with pytest.raises(InvalidInputError, match="writer must be a non-empty string"):
        VersionedStore.open(spark, table_path, writer="a/b")


@pytest.mark.slow
def test_two_pipelines_deduplicate_into_one_index_at_once_with_the_same_batch_ids(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Two writers of one seen-ID index (and one sink): every batch of each lands once, and an id both
    pipelines see is forwarded once, by whichever commits first."""
    index, sink = str(tmp_path / "index"), str(tmp_path / "sink")
    dedups = [
        Deduplicator.create(spark, index, by="k", interval=timedelta(hours=1), writer=name)
        for name in ("one", "two")
    ]
    batches = [
        _records(spark, prefix).unionByName(_shared(spark, offset))
        for prefix, offset in (("x", 9), ("y", 11))
    ]
    _run_two_batches_at_once_then_replay(dedups, batches, sink)
    rows = sorted(tuple(r) for r in spark.read.format("delta").load(sink).select("k", "offset").collect())
    assert [r for r in rows if r[0] != "s"] == sorted((f"{p}{n}", n) for p in ("x", "y") for n in range(4))
    assert [r for r in rows if r[0] == "s"] in ([("s", 9)], [("s", 11)])
    ids = [r["k"] for r in spark.read.format("delta").load(index).select("k").collect()]
    assert len(ids) == len(set(ids)) == 9


def _run_two_batches_at_once_then_replay(
    dedups: list[Deduplicator], batches: list[DataFrame], sink: str
) -> None:
    """Each deduplicator runs its batch's even offsets as batch 0 and odd ones as batch 1, both
    deduplicators at once; then replays its batch 1, which writes nothing."""
    for batch_id in (0, 1):
        errors = _at_once(
            [
                lambda d=dedup, b=batch, i=batch_id: d.run(b.where(f"offset % 2 = {i}"), i, sink=sink)
                for dedup, batch in zip(dedups, batches, strict=True)
            ]
        )
        _one_line_naming_the_other_commit(errors)
    for dedup, batch in zip(dedups, batches, strict=True):
        assert dedup.run(batch.where("offset % 2 = 1"), 1, sink=sink).replay


def _shared(spark: SparkSession, offset: int) -> DataFrame:
    """Id ``s`` at ``offset`` of partition 0: both pipelines see it; the index keeps the first only."""
    frame = spark.createDataFrame(
        [("s", 0, offset, 1_700_000_000_000)], "k string, partition int, offset long, ms long"
    )
    return frame.selectExpr("k", "'in' AS topic", "partition", "offset", "timestamp_millis(ms) AS timestamp")


@pytest.mark.slow
def test_a_store_commit_racing_another_writers_commit_fails_and_its_retry_sees_it(
    spark: SparkSession, table_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writer ``two`` closes key ``a``'s open version right after ``one`` checked the store version and
    before its MERGE: ``one`` writes nothing (ConcurrentWriteError) and its retry plans from ``two``'s
    commit, so ``a`` keeps one open version and a chain without overlaps."""
    create_store(spark, table_path, retention_ms=10_000_000)
    one, two = (VersionedStore.open(spark, table_path, writer=name) for name in ("one", "two"))
    one.put_all(batch_frame(spark, [("a", "a1", 100, 0, 0)]), batch_id=0)
    _lose_the_race(
        monkeypatch,
        one._log,
        1,
        lambda: two.put_all(batch_frame(spark, [("a", "a2", 200, 1, 0)]), batch_id=0),
    )
    with pytest.raises(ConcurrentWriteError, match="another writer committed version"):
        one.put_all(batch_frame(spark, [("a", "a3", 300, 0, 1)]), batch_id=1)
    monkeypatch.undo()
    one.put_all(batch_frame(spark, [("a", "a3", 300, 0, 1)]), batch_id=1)
    assert store_history(one) == [("a", 100, 200, "a1"), ("a", 200, 300, "a2"), ("a", 300, None, "a3")]


def _lose_the_race(
    monkeypatch: pytest.MonkeyPatch, log: CommitLog, nth: int, other: Callable[[], object]
) -> None:
    """Make ``other`` commit right after ``log``'s ``nth`` version check passes (before its commit)."""
    original = CommitLog.require_unchanged
    calls = {"n": 0}

    def check_then_lose_the_race(self: CommitLog, read_version: int, step: str) -> None:
        original(self, read_version, step)
        if self is log:
            calls["n"] += 1
            if calls["n"] == nth:
                other()

    monkeypatch.setattr(CommitLog, "require_unchanged", check_then_lose_the_race)


def _records(spark: SparkSession, prefix: str) -> DataFrame:
    """Four records ``<prefix>0..3`` at offsets 0..3 of partition 0, a millisecond apart."""
    rows = [(f"{prefix}{n}", 0, n, 1_700_000_000_000 + n) for n in range(4)]
    frame = spark.createDataFrame(rows, "k string, partition int, offset long, ms long")
    return frame.selectExpr("k", "'in' AS topic", "partition", "offset", "timestamp_millis(ms) AS timestamp")


@pytest.mark.slow
def test_an_index_commit_racing_another_writers_commit_fails_and_its_retry_sees_it(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race the version check cannot see: writer ``two`` commits right after ``one`` checked the index
    version and before its commit. Delta's conflict detection fails ``one`` (nothing written); its retry
    resolves against ``two``'s entry, so id ``s`` is saved and forwarded once."""
    index, sink = str(tmp_path / "index"), str(tmp_path / "sink")
    one, two = (
        Deduplicator.create(spark, index, by="k", interval=timedelta(hours=1), writer=name)
        for name in ("one", "two")
    )
    one.run(_records(spark, "x"), 0, sink=sink)  # the id columns exist: the race is the batch commit's
    _lose_the_race(monkeypatch, one._log, 2, lambda: two.run(_shared(spark, 11), 0, sink=sink))
    with pytest.raises(ConcurrentWriteError, match="another writer committed version"):
        one.run(_shared(spark, 9), 1, sink=sink)
    monkeypatch.undo()
    stats = one.run(_shared(spark, 9), 1, sink=sink)
    assert (stats.duplicates, stats.sink_rows) == (1, 0)
    rows = [
        tuple(r)
        for r in spark.read.format("delta").load(sink).where("k = 's'").select("k", "offset").collect()
    ]
    assert rows == [("s", 11)]
    ids = [r["k"] for r in spark.read.format("delta").load(index).where("k = 's'").select("k").collect()]
    assert ids == ["s"]
