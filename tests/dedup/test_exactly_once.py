"""Exactly-once: replays by batch id, crashes between commits, purge and quarantine."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from lakehouse.dedup import Deduplicator
from lakehouse.delta_ops import latest_version
from lakehouse.errors import InvalidInputError
from tests.dedup.helpers import at, frame, labelled, labels, spark_forwarded
from tests.reference.dedup import Decision, DedupModel, Rec

INTERVAL = timedelta(seconds=10)
# Four batches of one partition; b0..b3 re-send ids within and beyond the interval.
BATCHES = [
    [("a", 0), ("b", 1), ("a", 5)],
    [("a", 9), ("b", 12), ("c", 13), ("a", 11)],
    [("c", 20), ("a", 30), ("b", 2)],
    [("a", 35), ("c", 40), ("d", 41)],
]


def _batches() -> list[list[Rec]]:
    out, offset = [], 0
    for events in BATCHES:
        recs = labelled(events)
        out.append([Rec(r.id, r.ts, 0, offset + i, f"o{offset + i}") for i, r in enumerate(recs)])
        offset += len(recs)
    return out


class CrashError(Exception):
    """Injected between two commits."""


def _crash_after(step: str):
    def hook(done: str) -> None:
        if done == step:
            raise CrashError(step)

    return hook


@pytest.mark.slow
def test_crash_between_any_two_commits_then_rerun_is_exactly_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    index, sink, quarantine = (str(tmp_path / n) for n in ("index", "sink", "quarantine"))
    model = DedupModel(10, per_partition=False)
    expected_sink: Counter[str] = Counter()
    expected_dropped: Counter[str] = Counter()
    crash_at = ["index", "quarantine", "sink", None]
    for batch_id, (batch, step) in enumerate(zip(_batches(), crash_at, strict=True)):
        for rec, decision in model.process_batch(batch):
            (expected_sink if decision.forwarded else expected_dropped)[rec.label] += 1
        dedup = Deduplicator.create(spark, index, by="id", interval=INTERVAL, quarantine_path=quarantine)
        df = frame(spark, batch, ("id",))
        if step is not None:
            dedup._after_commit = _crash_after(step)
            with pytest.raises(CrashError):
                dedup.run(df, batch_id, sink=sink)
            # the job dies; a new process opens the index and runs the same batch again
            dedup = Deduplicator.open(spark, index)
        dedup.run(df, batch_id, sink=sink)
    assert Counter(r["value"] for r in spark.read.format("delta").load(sink).collect()) == expected_sink
    dropped = spark.read.format("delta").load(quarantine)
    assert Counter(f"o{r['offset']}" for r in dropped.collect()) == expected_dropped


def test_replay_of_committed_batch_returns_same_records_and_writes_nothing(
    spark: SparkSession, table_path: str
) -> None:
    b0, b1, *_ = _batches()
    dedup = Deduplicator.create(spark, table_path, by="id", interval=INTERVAL)
    first = spark_forwarded(dedup, spark, b0, 0)
    second = spark_forwarded(dedup, spark, b1, 1)
    table = DeltaTable.forPath(spark, table_path)
    version = latest_version(table)
    assert spark_forwarded(dedup, spark, b0, 0) == first
    assert spark_forwarded(dedup, spark, b1, 1) == second
    assert latest_version(table) == version
    assert dedup.stats is not None and dedup.stats.replay and dedup.stats.saved == 0
    with pytest.raises(InvalidInputError, match=">= 0"):
        dedup.apply(frame(spark, b1, ("id",)), batch_id=-1)


def test_batch_ids_must_not_skip_back(spark: SparkSession, table_path: str) -> None:
    b0, b1, *_ = _batches()
    dedup = Deduplicator.create(spark, table_path, by="id", interval=INTERVAL)
    dedup.apply(frame(spark, b0, ("id",)), batch_id=5).count()
    with pytest.raises(InvalidInputError, match="batch ids must increase"):
        dedup.apply(frame(spark, b1, ("id",)), batch_id=3)


def test_redelivered_records_forwarded_and_stats_count_them(spark: SparkSession, table_path: str) -> None:
    b0 = _batches()[0]
    dedup = Deduplicator.create(spark, table_path, by="id", interval=INTERVAL)
    dedup.apply(frame(spark, b0, ("id",)), batch_id=0).count()
    # the same records again under a new batch id: saved ones are replays, the dropped one stays dropped
    again = labels(dedup.apply(frame(spark, b0, ("id",)), batch_id=1))
    model = DedupModel(10, per_partition=False)
    model.process_batch(b0)
    assert again == sorted(r.label for r, d in model.process_batch(b0) if d.forwarded)
    assert dedup.stats is not None
    assert (dedup.stats.replayed, dedup.stats.duplicates, dedup.stats.saved) == (2, 1, 0)


def test_purge_drops_expired_buckets_without_reading_data(spark: SparkSession, table_path: str) -> None:
    dedup = Deduplicator.create(
        spark, table_path, by="id", interval=INTERVAL, bucket_width=timedelta(seconds=10)
    )
    old = [Rec(("a",), 1, 0, 0, "old"), Rec(("b",), 3, 0, 1, "old2")]
    dedup.apply(frame(spark, old, ("id",)), 0).count()
    new = [Rec(("c",), 45, 0, 2, "new"), Rec(("a",), 44, 0, 3, "again")]
    assert spark_forwarded(dedup, spark, new, 1) == ["again", "new"]
    append = DeltaTable.forPath(spark, table_path).history(1).first()
    # insert-only: each batch appends files and never rewrites or removes one
    assert append["operation"] == "WRITE" and "numRemovedFiles" not in append["operationMetrics"]
    result = dedup.purge()
    assert result.below_bucket == int(at(45 - 10).timestamp()) // 10
    assert result.files_removed >= 1
    operation = DeltaTable.forPath(spark, table_path).history(1).first()
    assert operation["operation"] == "DELETE"
    metrics = operation["operationMetrics"]
    assert metrics.get("numDeletionVectorsAdded", "0") == "0" and metrics.get("numAddedFiles", "0") == "0"
    assert sorted(r["id"] for r in dedup.index().collect()) == ["a", "c"]
    assert dedup.stream_times() == {0: at(45)}


def test_null_ids_forwarded_never_stored(spark: SparkSession, table_path: str) -> None:
    dedup = Deduplicator.create(spark, table_path, by=["key", "id"], interval=INTERVAL)
    records = [
        Rec(("k", None), 1, 0, 0, "n1"),
        Rec(("k", None), 1, 0, 1, "n2"),
        Rec((None, "x"), 1, 0, 2, "n3"),
    ]
    records.append(Rec(("k", "x"), 1, 0, 3, "kept"))
    assert spark_forwarded(dedup, spark, records, 0) == ["kept", "n1", "n2", "n3"]
    assert dedup.stats is not None and dedup.stats.null_ids == 3
    assert dedup.index().count() == 1


def test_null_offset_is_always_deduplicated(spark: SparkSession, table_path: str) -> None:
    dedup = Deduplicator.create(spark, table_path, by="id", interval=INTERVAL)
    first = [Rec(("a",), 5, 0, None, "x")]
    assert spark_forwarded(dedup, spark, first, 0) == ["x"]
    assert spark_forwarded(dedup, spark, first, 1) == []
    model = DedupModel(10, per_partition=False)
    assert [model.process(first[0]), model.process(first[0])] == [Decision.FORWARDED, Decision.DUPLICATE]
