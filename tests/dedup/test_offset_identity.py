"""No record is dropped for its offset alone: offsets reset, a landing folder re-used, sources sharing a
sink. A re-delivery is the same record again (same offset and content); anything else at a held offset is
new."""

from __future__ import annotations

import os
import shutil
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse.commit_log import CommitLog
from lakehouse.dedup import Deduplicator, deduplicator
from lakehouse.dedup.incarnation import rows_since, start_version
from lakehouse.errors import InvalidInputError, LakehouseError
from lakehouse.pipeline import run_pipeline
from tests.dedup.helpers import frame, labels
from tests.pipeline.helpers import RECORDS_DDL, land, spec, txn
from tests.reference.dedup import Rec

INTERVAL = timedelta(seconds=10)


def _sink_labels(spark: SparkSession, sink: str) -> list[str]:
    return labels(spark.read.format("delta").load(sink))


def test_after_an_offset_reset_null_id_late_and_reused_id_records_at_held_offsets_are_kept(
    spark: SparkSession, tmp_path: Path
) -> None:
    index, sink = str(tmp_path / "index"), str(tmp_path / "sink")
    dedup = Deduplicator.create(spark, index, by="id", interval=INTERVAL)
    before = [
        Rec((None,), 100, 0, 0, "old-0"),
        Rec((None,), 100, 0, 1, "old-1"),
        Rec(("a",), 100, 0, 2, "a-old"),
        Rec(("b",), 100, 0, 3, "b-old"),
    ]
    dedup.run(frame(spark, before, ("id",)), 0, sink)
    # The source restarts numbering at 0: NULL ids, an id seen before (a replay by KIP-655's offset check,
    # with another payload) and a late record, all at offsets the sink holds.
    after = [
        Rec((None,), 101, 0, 0, "new-0"),
        Rec((None,), 101, 0, 1, "new-1"),
        Rec(("a",), 100, 0, 2, "a-new"),
        Rec(("c",), 50, 0, 3, "late-c"),
    ]
    stats = dedup.run(frame(spark, after, ("id",)), 1, sink)
    assert _sink_labels(spark, sink) == sorted(
        ["old-0", "old-1", "a-old", "b-old", "new-0", "new-1", "a-new", "late-c"]
    )
    assert stats.sink_rows == 4
    # A true re-delivery (the same records again, same content) is still written once.
    again = dedup.run(frame(spark, after, ("id",)), 2, sink)
    assert again.sink_rows == 0 and len(_sink_labels(spark, sink)) == 8


def _with_topic(df: DataFrame, topic: str) -> DataFrame:
    return df.withColumn("topic", F.lit(topic))


def test_a_second_source_without_a_topic_column_is_refused_at_its_first_batch(
    spark: SparkSession, tmp_path: Path
) -> None:
    sink = str(tmp_path / "sink")
    one, two = (
        Deduplicator.create(spark, str(tmp_path / name), by="id", interval=INTERVAL) for name in ("a", "b")
    )
    one.run(frame(spark, [Rec((None,), 100, 0, 0, "a-0")], ("id",)), 0, sink)
    version = spark.sql(f"DESCRIBE HISTORY delta.`{sink}`").count()
    with pytest.raises(InvalidInputError, match="no `topic` column") as refused:
        two.run(frame(spark, [Rec((None,), 100, 0, 0, "b-0")], ("id",)), 0, sink)
    assert "\n" not in str(refused.value)
    assert spark.sql(f"DESCRIBE HISTORY delta.`{sink}`").count() == version
    one.run(frame(spark, [Rec((None,), 101, 0, 1, "a-1")], ("id",)), 1, sink)  # the first goes on

    # With a topic column each source's NULL-id and late records at the other's offsets are kept.
    shared = str(tmp_path / "shared")
    three, four = (
        Deduplicator.create(spark, str(tmp_path / name), by="id", interval=INTERVAL) for name in ("c", "d")
    )
    three.run(_with_topic(frame(spark, [Rec((None,), 100, 0, 0, "c-0")], ("id",)), "c"), 0, shared)
    four.run(_with_topic(frame(spark, [Rec((None,), 100, 0, 0, "d-0")], ("id",)), "d"), 0, shared)
    assert _sink_labels(spark, shared) == ["c-0", "d-0"]


@pytest.mark.slow
def test_a_pipeline_without_a_topic_column_into_a_sink_another_source_writes_stops_at_its_first_batch(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Another source's deduplicator wrote the pipeline's sink first; records without a `topic` column:
    ingest stops in one line and the sink keeps the other source's rows."""
    without_topic = RECORDS_DDL.replace("topic string, ", "")
    pipeline = spec(tmp_path, records_schema=without_topic, max_files_per_trigger=0)
    landed = spark.sparkContext.parallelize([_json(txn(1, "EUR", 30, 0))])
    rows = spark.read.schema(without_topic).json(landed)
    other = Deduplicator.create(spark, str(tmp_path / "other_index"), by="txn_id", interval=INTERVAL)
    other.run(rows, 0, pipeline.tables.deduped)
    land(tmp_path / "landing" / "transactions", "f0", [txn(0, "EUR", 30, 0)])
    with pytest.raises(LakehouseError, match="no `topic` column") as stopped:
        run_pipeline(spark, pipeline, "ingest", emit=lambda m: None)
    assert "\n" not in str(stopped.value)
    deduped = spark.read.format("delta").load(pipeline.tables.deduped)
    assert [(r["key"], r["offset"]) for r in deduped.collect()] == [("t1", 0)]


def test_two_sources_without_a_topic_column_starting_at_once_on_one_sink_the_second_is_refused(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both pass the first-batch check (no sink yet); source A's whole first batch lands between source B's
    check and B's sink commit: B's sink commit is refused in one line and the sink holds A's rows only."""
    sink = str(tmp_path / "sink")
    one, two = (
        Deduplicator.create(spark, str(tmp_path / name), by="id", interval=INTERVAL) for name in ("a", "b")
    )
    real = deduplicator.prepare_concurrently

    def b_prepared_then_a_runs(spark: SparkSession, prepares: list) -> list:
        commits = real(spark, prepares)
        monkeypatch.setattr(deduplicator, "prepare_concurrently", real)
        one.run(frame(spark, [Rec((None,), 100, 0, 0, "a-0")], ("id",)), 0, sink)
        return commits

    monkeypatch.setattr(deduplicator, "prepare_concurrently", b_prepared_then_a_runs)
    with pytest.raises(InvalidInputError, match="no `topic` column") as refused:
        two.run(frame(spark, [Rec((None,), 100, 0, 0, "b-0")], ("id",)), 0, sink)
    assert "\n" not in str(refused.value) and "lakehouse.dedup:" in str(refused.value)
    assert _sink_labels(spark, sink) == ["a-0"]


def test_two_first_commits_prepared_at_once_on_one_sink_the_second_is_refused(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Two sole writers' first appends planned on the same (existing) sink version: the second commit
    meets the first's fence and, appended again, is refused; a writer that committed before goes on."""
    sink = str(tmp_path / "sink")
    spark.createDataFrame([], "v int").write.format("delta").save(sink)
    rows = spark.createDataFrame([(1,)], "v int")

    def refusal(other: str) -> InvalidInputError:
        return InvalidInputError(f"shared with {other}")

    one, two = (CommitLog(spark, sink, name) for name in ("one", "two"))
    first = one.planned_append(rows, 0, {}, sole=refusal)()
    second = two.planned_append(rows, 0, {}, sole=refusal)()
    first()
    with pytest.raises(InvalidInputError, match="shared with one"):
        second()
    one.append(rows, 1, {})
    assert spark.read.format("delta").load(sink).count() == 2


def test_an_unfenced_append_meeting_an_incarnations_first_metadata_commit_is_appended_again(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A sink append planned before another writer's first batch of a new incarnation (row tracking turned
    on, its start recorded: metadata commits) lands after them, once, instead of a raw conflict error."""
    sink = str(tmp_path / "sink")
    tracked = "TBLPROPERTIES ('delta.enableRowTracking' = true)"
    spark.sql(f"CREATE TABLE delta.`{sink}` (v int) USING delta {tracked}")
    planned = CommitLog(spark, sink, "other").planned_append(spark.createDataFrame([(1,)], "v int"), 0, {})()
    assert start_version(spark, sink, "writer", 1, None) == 0  # a metadata commit: version 1
    planned()
    sink_rows = spark.read.format("delta").load(sink)
    assert sink_rows.count() == 1 and sink_rows.where(rows_since(0)).count() == 1
    assert start_version(spark, sink, "writer", 1, None) == 0


@pytest.mark.slow
def test_a_reused_landing_folder_and_a_delta_source_restarting_offsets_lose_nothing_in_the_pipeline(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Files: a second file re-uses the first file's offsets with new records (a NULL id, an id seen
    before, a late one). Delta: the same rows appended to a Delta source."""
    landing = tmp_path / "landing" / "transactions"
    first = [txn(0, "EUR", 30, 0), txn(1, "EUR", 31, 1), {**txn(2, "EUR", 32, 2), "txn_id": None}]
    second = [txn(3, "EUR", 120, 0), {**txn(0, "EUR", 120, 1), "amount": 99.0}]
    second += [{**txn(4, "EUR", 33, 2), "txn_id": None}, txn(5, "EUR", 1, 3)]  # NULL id, late
    land(landing, "f0", first)
    files = spec(tmp_path, max_files_per_trigger=0)
    run_pipeline(spark, files, "ingest", emit=lambda m: None)
    land(landing, "f1", second)
    run_pipeline(spark, files, "ingest", emit=lambda m: None)
    deduped = spark.read.format("delta").load(files.tables.deduped)
    kept = sorted((r["key"], r["offset"]) for r in deduped.collect())
    assert kept == [("t0", 0), ("t0", 1), ("t1", 1), ("t2", 2), ("t3", 0), ("t4", 2), ("t5", 3)]

    source = str(tmp_path / "records_delta")
    schema = spark.read.format("delta").load(files.tables.deduped).schema
    delta = spec(tmp_path / "d", records=source, records_format="delta", max_files_per_trigger=0)
    for rows in (first, second):
        batch = spark.read.schema(schema).json(spark.sparkContext.parallelize([_json(r) for r in rows]))
        batch.write.format("delta").mode("append").save(source)
        run_pipeline(spark, delta, "ingest", emit=lambda m: None)
    again = spark.read.format("delta").load(delta.tables.deduped)
    assert sorted((r["key"], r["offset"]) for r in again.collect()) == kept


def _json(row: dict[str, object]) -> str:
    import json

    return json.dumps(row)


def test_after_an_acknowledged_reset_identical_records_at_held_offsets_are_new(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Incarnation 1 of the source re-uses incarnation 0's offsets with records equal in every column (a
    NULL id, an id seen before, a late one): all are written. Re-deliveries within incarnation 1 are
    still written once, also after OPTIMIZE rewrote the sink's files; incarnation 0 cannot run again."""
    index, sink = str(tmp_path / "index"), str(tmp_path / "sink")
    records = [
        Rec((None,), 100, 0, 0, "null-0"),
        Rec(("a",), 100, 0, 1, "a"),
        Rec(("b",), 200, 0, 2, "b"),
        Rec(("c",), 50, 0, 3, "late-c"),
    ]
    old = Deduplicator.create(spark, index, by="id", interval=INTERVAL)
    assert old.run(frame(spark, records, ("id",)), 0, sink).sink_rows == 4
    assert old.run(frame(spark, records, ("id",)), 1, sink).sink_rows == 0  # a re-delivery
    new = Deduplicator.open(spark, index, incarnation=1)
    stats = new.run(frame(spark, records, ("id",)), 0, sink)  # batch ids start again
    assert (stats.batch_id, stats.replay, stats.sink_rows) == (0, False, 4)
    assert _sink_labels(spark, sink) == sorted(2 * ["null-0", "a", "b", "late-c"])
    assert new.run(frame(spark, records, ("id",)), 1, sink).sink_rows == 0
    spark.sql(f"OPTIMIZE delta.`{sink}`")
    assert new.run(frame(spark, records, ("id",)), 2, sink).sink_rows == 0
    assert len(_sink_labels(spark, sink)) == 8
    with pytest.raises(InvalidInputError, match="batch ids must increase"):
        old.run(frame(spark, records, ("id",)), 2, sink)
    with pytest.raises(InvalidInputError, match="incarnation must be"):
        Deduplicator.open(spark, index, incarnation=-1)


def test_a_new_incarnation_into_a_new_sink_still_writes_each_record_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    index, sink = str(tmp_path / "index"), str(tmp_path / "sink")
    dedup = Deduplicator.create(spark, index, by="id", interval=INTERVAL, incarnation=2)
    records = [Rec((None,), 100, 0, 0, "null-0"), Rec(("a",), 100, 0, 1, "a")]
    assert dedup.run(frame(spark, records, ("id",)), 0, sink).sink_rows == 2
    assert dedup.run(frame(spark, records, ("id",)), 1, sink).sink_rows == 0
    assert _sink_labels(spark, sink) == ["a", "null-0"]


@pytest.mark.slow
def test_records_incarnation_acknowledges_a_reused_landing_folder_in_the_pipeline(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A re-used landing folder brings a record identical to one the sink holds (a NULL id at a held
    offset): with ``records_incarnation`` bumped it is written, and the files read before are not read
    again (t1 stays one row)."""
    landing = tmp_path / "landing" / "transactions"
    first = [{**txn(0, "EUR", 30, 0), "txn_id": None}, txn(1, "EUR", 31, 1)]
    land(landing, "f0", first)
    run_pipeline(spark, spec(tmp_path, max_files_per_trigger=0), "ingest", emit=lambda m: None)
    land(landing, "f1", first[:1])
    acknowledged = spec(tmp_path, max_files_per_trigger=0, records_incarnation=1)
    run_pipeline(spark, acknowledged, "ingest", emit=lambda m: None)
    deduped = spark.read.format("delta").load(acknowledged.tables.deduped)
    assert sorted((r["key"], r["offset"]) for r in deduped.collect()) == [("t0", 0), ("t0", 0), ("t1", 1)]


@pytest.mark.slow
def test_records_incarnation_acknowledges_a_recreated_delta_source_in_the_pipeline(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A Delta source table deleted and re-created stops ingest in one line naming the source; with
    ``records_incarnation`` bumped the re-created table's rows (identical to the old ones) are written."""
    first = [{**txn(0, "EUR", 30, 0), "txn_id": None}, txn(1, "EUR", 31, 1)]
    source = str(tmp_path / "records_delta")
    delta = spec(tmp_path / "d", records=source, records_format="delta", max_files_per_trigger=0)
    rows = spark.read.schema(RECORDS_DDL).json(spark.sparkContext.parallelize([_json(r) for r in first]))
    rows.write.format("delta").save(source)
    run_pipeline(spark, delta, "ingest", emit=lambda m: None)
    shutil.rmtree(source)
    rows.write.format("delta").save(source)
    with pytest.raises(LakehouseError) as stopped:
        run_pipeline(spark, delta, "ingest", emit=lambda m: None)
    message = str(stopped.value)
    assert "\n" not in message and f"the source {source} was re-created" in message
    assert "records_incarnation=1" in message
    bumped = spec(tmp_path / "d", records=source, records_format="delta", records_incarnation=1)
    run_pipeline(spark, bumped, "ingest", emit=lambda m: None)
    again = spark.read.format("delta").load(bumped.tables.deduped)
    assert sorted((r["key"], r["offset"]) for r in again.collect()) == [
        ("t0", 0),
        ("t0", 0),
        ("t1", 1),
        ("t1", 1),
    ]


def test_a_sink_folder_is_refused_once_quiet_and_waited_for_while_another_writer_creates_it(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sink another writer is creating holds data files before its first commit, which may come many
    seconds later on a loaded machine: it is waited for while files keep landing. A folder left unchanged
    for the quiet time is not a sink being created: refused in one line, nothing written."""
    monkeypatch.setattr(deduplicator, "_SINK_CREATION_QUIET_S", 2.0)
    dedup = Deduplicator.create(spark, str(tmp_path / "index"), by="id", interval=INTERVAL)
    records = frame(spark, [Rec(("a",), 100, 0, 0, "a")], ("id",))
    old = tmp_path / "old"
    old.mkdir()
    (old / "part-0.parquet").write_bytes(b"not a table")
    os.utime(old / "part-0.parquet", (0, 0))
    os.utime(old, (0, 0))
    with pytest.raises(InvalidInputError, match="is not a Delta table") as refused:
        dedup.run(records, 0, str(old))
    assert (
        "\n" not in str(refused.value) and not (tmp_path / "index" / "_delta_log" / f"{1:020d}.json").exists()
    )

    creating = tmp_path / "creating"
    creating.mkdir()

    def create_slowly() -> None:  # files land for 4 s (twice the quiet time), then the first commit
        for n in range(8):
            (creating / f"part-{n}.tmp").write_bytes(b"")
            time.sleep(0.5)
        records.limit(0).write.format("delta").mode("append").save(str(creating))

    creator = threading.Thread(target=create_slowly)
    creator.start()
    try:
        assert dedup.run(records, 0, str(creating)).sink_rows == 1
    finally:
        creator.join()
    assert _sink_labels(spark, str(creating)) == ["a"]
