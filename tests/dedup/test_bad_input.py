"""Bad input gives a clear error and writes nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse.dedup import Deduplicator
from lakehouse.delta_ops import latest_version
from lakehouse.errors import InvalidInputError, SchemaMismatchError, StoreSettingsConflictError
from tests.dedup.helpers import RECORD_SCHEMA, at, frame
from tests.reference.dedup import Rec

INTERVAL = timedelta(seconds=10)
RECORDS = [Rec(("a",), 1, 0, 0, "x")]


def test_negative_interval_rejected_before_anything_is_written(spark: SparkSession, table_path: str) -> None:
    with pytest.raises(InvalidInputError, match="interval must be >= 0"):
        Deduplicator.create(spark, table_path, by="id", interval=timedelta(seconds=-1))
    with pytest.raises(InvalidInputError, match="timedelta"):
        Deduplicator.create(spark, table_path, by="id", interval=10)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="system column"):
        Deduplicator.create(spark, table_path, by="entry_ts", interval=INTERVAL)
    with pytest.raises(InvalidInputError, match="nested fields"):
        Deduplicator.create(spark, table_path, by="txn.id", interval=INTERVAL)
    with pytest.raises(InvalidInputError, match="interval must be at most"):
        Deduplicator.create(spark, table_path, by="id", interval=timedelta(days=10**7))
    with pytest.raises(InvalidInputError, match="bucket_width must be >= 1 ms, got 0:00:00"):
        Deduplicator.create(spark, table_path, by="id", interval=INTERVAL, bucket_width=timedelta(0))
    assert not Path(table_path).exists()


def test_index_created_with_other_settings_conflicts(spark: SparkSession, table_path: str) -> None:
    Deduplicator.create(spark, table_path, by="id", interval=INTERVAL)
    with pytest.raises(StoreSettingsConflictError) as conflict:
        Deduplicator.create(spark, table_path, by="key", interval=INTERVAL)
    assert conflict.value.setting == "lakehouse.dedup.by"
    with pytest.raises(StoreSettingsConflictError, match="interval_us"):
        Deduplicator.create(spark, table_path, by="id", interval=2 * INTERVAL)
    assert Deduplicator.open(spark, table_path).settings.interval == INTERVAL


def test_bad_batches_write_nothing(spark: SparkSession, table_path: str) -> None:
    dedup = Deduplicator.create(spark, table_path, by="id", interval=INTERVAL)
    table = DeltaTable.forPath(spark, table_path)
    version = latest_version(table)
    good = frame(spark, RECORDS, ("id",))
    with pytest.raises(SchemaMismatchError, match="offset"):
        dedup.apply(good.drop("offset"), batch_id=0)
    with pytest.raises(SchemaMismatchError, match="id"):
        dedup.apply(good.drop("id"), batch_id=0)
    with pytest.raises(SchemaMismatchError, match="timestamp"):
        dedup.apply(good.withColumn("timestamp", good["timestamp"].cast("string")), batch_id=0)
    with pytest.raises(InvalidInputError, match="outside years 1 to 9999"):
        dedup.apply(good.withColumn("timestamp", F.timestamp_micros(F.lit(253402300800000000))), batch_id=0)
    with pytest.raises(SchemaMismatchError, match="a MAP cannot be compared"):
        dedup.apply(good.withColumn("id", F.create_map(F.lit("a"), F.col("id"))), batch_id=0)
    null_ts = spark.createDataFrame([("k", "a", "v", 0, 0, None), ("k", "b", "v", 0, 1, at(1))], good.schema)
    with pytest.raises(InvalidInputError, match="NULL timestamp"):
        dedup.apply(null_ts, batch_id=0)
    assert latest_version(table) == version
    dedup.apply(good, batch_id=0).count()
    with pytest.raises(SchemaMismatchError, match="id"):
        dedup.apply(good.withColumn("id", good["offset"]), batch_id=1)


def test_a_sink_that_cannot_take_the_batch_is_refused_before_the_index_commits(
    spark: SparkSession, tmp_path: Path
) -> None:
    dedup = Deduplicator.create(spark, str(tmp_path / "index"), by="id", interval=INTERVAL)
    sink = str(tmp_path / "sink")
    good = frame(spark, RECORDS, ("id",))
    good.withColumn("value", good["offset"]).limit(0).write.format("delta").save(sink)  # value: BIGINT
    index = DeltaTable.forPath(spark, dedup.path)
    version = latest_version(index)
    with pytest.raises(SchemaMismatchError, match=r"dedup sink .* value: expected string, got bigint"):
        dedup.run(good, batch_id=0, sink=sink)
    assert latest_version(index) == version
    fixed = str(tmp_path / "fixed")
    assert dedup.run(good, batch_id=0, sink=fixed).sink_rows == 1


def test_records_of_years_1_to_999_are_deduplicated(spark: SparkSession, tmp_path: Path) -> None:
    """Times before year 1000 are saved in the index and deduplicate like any other."""
    dedup = Deduplicator.create(spark, str(tmp_path / "index"), by="id", interval=INTERVAL)
    ancient = datetime(500, 3, 1, tzinfo=UTC)
    rows = [("k", "a", "first", 0, 0, ancient), ("k", "a", "again", 0, 1, ancient + timedelta(seconds=1))]
    batch = spark.createDataFrame(rows, RECORD_SCHEMA)
    stats = dedup.run(batch, batch_id=0, sink=str(tmp_path / "sink"))
    assert (stats.duplicates, stats.sink_rows) == (1, 1)
    assert dedup.run(batch, batch_id=1, sink=str(tmp_path / "sink")).sink_rows == 0
