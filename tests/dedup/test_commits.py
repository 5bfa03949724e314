"""A seen-ID index's commits: a second writer, shared tables, empty batches."""

from __future__ import annotations

import warnings
from collections import Counter
from datetime import timedelta
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse.dedup import Deduplicator
from lakehouse.errors import ConcurrentWriteError, InvalidInputError, ReplayMismatchWarning
from tests.dedup.helpers import frame, labels
from tests.reference.dedup import Rec

INTERVAL = timedelta(seconds=10)


def _recs(*events: tuple[str, int], first_offset: int = 0) -> list[Rec]:
    return [Rec((i,), ts, 0, first_offset + n, f"{i}@{ts}") for n, (i, ts) in enumerate(events)]


def _values(spark: SparkSession, path: str) -> Counter[str]:
    return Counter(r["value"] for r in spark.read.format("delta").load(path).collect())


def test_a_second_writer_that_read_before_the_first_committed_fails_and_writes_nothing(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """19.1: B resolves its batch, A runs a batch, B commits: B fails in one line, no id is doubled."""
    index, sink = str(tmp_path / "index"), str(tmp_path / "sink")
    writer_a = Deduplicator.create(spark, index, by="id", interval=INTERVAL)
    writer_b = Deduplicator.open(spark, index)
    writer_a.run(frame(spark, _recs(("x", 0)), ("id",)), 0, sink=sink)
    batch = frame(spark, _recs(("a", 5), ("b", 6), first_offset=1), ("id",))
    checked = writer_b._log.require_unchanged

    def a_commits_first(read_version: int, step: str) -> None:
        writer_a.run(batch, 1, sink=sink)
        checked(read_version, step)

    monkeypatch.setattr(writer_b._log, "require_unchanged", a_commits_first)
    with pytest.raises(ConcurrentWriteError, match=r"batch 1 of lakehouse\.dedup") as raised:
        writer_b.run(batch, 2, sink=sink)
    assert "\n" not in str(raised.value)
    assert _values(spark, sink) == Counter({"x@0": 1, "a@5": 1, "b@6": 1})
    assert Counter(r["id"] for r in writer_a.index().collect()) == Counter({"x": 1, "a": 1, "b": 1})


def test_deduplicators_sharing_a_quarantine_and_a_sink_never_skip_each_others_batches(
    spark: SparkSession, tmp_path: Path
) -> None:
    """19.5: the batch ids in shared tables are per deduplicator."""
    quarantine, sink = str(tmp_path / "quarantine"), str(tmp_path / "sink")
    one, two = (
        Deduplicator.create(spark, str(tmp_path / n), by="id", interval=INTERVAL, quarantine_path=quarantine)
        for n in ("one", "two")
    )
    # Two sources in one sink tell their records apart by a topic column (else the second is refused).
    one.run(frame(spark, _recs(("a", 0), ("a", 1)), ("id",)).withColumn("topic", F.lit("one")), 0, sink=sink)
    two.run(frame(spark, _recs(("b", 0), ("b", 2)), ("id",)).withColumn("topic", F.lit("two")), 0, sink=sink)
    assert _values(spark, sink) == Counter({"a@0": 1, "b@0": 1})
    assert sorted(r["id"] for r in spark.read.format("delta").load(quarantine).collect()) == ["a", "b"]


def test_a_batch_never_opens_the_index_files_of_ids_outside_its_own_range(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The entries a batch can match have ids within its own range: the index files whose id statistics lie
    outside it are skipped, never opened (ids that grow with time read the newest files only)."""
    index = str(tmp_path / "index")
    dedup = Deduplicator.create(spark, index, by="id", interval=INTERVAL)
    dedup.apply(frame(spark, _recs(("a1", 0), ("a2", 1)), ("id",)), 0).count()
    dedup.apply(frame(spark, _recs(("b1", 2), ("b2", 3), first_offset=2), ("id",)), 1).count()
    entries = spark.read.format("delta").load(index).select("id", F.input_file_name().alias("file"))
    files = {r["id"][0]: r["file"] for r in entries.collect()}
    assert files["a"] != files["b"]
    Path(unquote(urlparse(files["a"]).path)).unlink()  # opening it would now fail the batch
    forwarded = dedup.apply(frame(spark, _recs(("b2", 4), ("b3", 5), first_offset=4), ("id",)), 2)
    assert labels(forwarded) == ["b3@5"]
    assert dedup.stats is not None and dedup.stats.duplicates == 1


def test_run_leaves_no_cache_of_its_batches_behind(spark: SparkSession, tmp_path: Path) -> None:
    """A scheduled pipeline makes a deduplicator per run: what ``run`` cached of a batch is released by its
    end, not by a next batch that never comes (one cache per run would pile up in a long-lived driver)."""

    def cached() -> set[str]:
        infos = spark.sparkContext._jsc.sc().getRDDStorageInfo()  # type: ignore[union-attr]
        return {i.name() for i in infos if not i.name().startswith("Delta Table State")}

    before = cached()
    dedup = Deduplicator.create(spark, str(tmp_path / "index"), by="id", interval=INTERVAL)
    sink = str(tmp_path / "sink")
    dedup.run(frame(spark, _recs(("a", 0), ("b", 1)), ("id",)), 0, sink=sink)
    dedup.run(frame(spark, _recs(("b", 2), ("c", 3), first_offset=2), ("id",)), 1, sink=sink)
    assert _values(spark, sink) == Counter({"a@0": 1, "b@1": 1, "c@3": 1})
    assert cached() - before == set()


def test_empty_and_all_duplicate_batches_record_their_batch_id(spark: SparkSession, table_path: str) -> None:
    """19.9: a batch that saves nothing commits its id: a lower id is refused, a replay answers the same."""
    dedup = Deduplicator.create(spark, table_path, by="id", interval=INTERVAL)
    dedup.apply(frame(spark, _recs(("a", 0)), ("id",)), 0).count()
    assert labels(dedup.apply(frame(spark, [], ("id",)), 3)) == []
    duplicate = frame(spark, _recs(("a", 2), first_offset=1), ("id",))
    assert labels(dedup.apply(duplicate, 5)) == []
    with pytest.raises(InvalidInputError, match="batch ids must increase"):
        dedup.apply(frame(spark, _recs(("b", 3), first_offset=2), ("id",)), 4)
    assert labels(dedup.apply(frame(spark, [], ("id",)), 3)) == []
    assert labels(dedup.apply(duplicate, 5)) == []
    assert dedup.stats is not None and dedup.stats.replay and dedup.stats.duplicates == 1


def test_a_replayed_batch_id_with_other_input_is_reported_and_writes_nothing(
    spark: SparkSession, tmp_path: Path
) -> None:
    """17: the same batch id again with the same records is silent; with other records it warns."""
    index, sink = str(tmp_path / "index"), str(tmp_path / "sink")
    dedup = Deduplicator.create(spark, index, by="id", interval=INTERVAL)
    records = _recs(("a", 1), ("b", 2), ("a", 3))
    dedup.run(frame(spark, records, ("id",)), 0, sink=sink)
    versions = [_version(spark, path) for path in (index, sink)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReplayMismatchWarning)
        assert dedup.run(frame(spark, records, ("id",)), 0, sink=sink).replay
    with pytest.warns(ReplayMismatchWarning, match=r"committed with 3 record\(s\) and is replayed with 2"):
        stats = dedup.run(frame(spark, _recs(("c", 1), ("d", 2)), ("id",)), 0, sink=sink)
    assert stats.replay and [_version(spark, path) for path in (index, sink)] == versions
    assert _values(spark, sink) == Counter(["a@1", "b@2"])


def _version(spark: SparkSession, path: str) -> int:
    return DeltaTable.forPath(spark, path).history(1).first()["version"]
