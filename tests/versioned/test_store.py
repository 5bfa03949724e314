"""VersionedStore behaviour on real Delta tables: KIP-889's examples, retention, layout, errors, SQL."""

from __future__ import annotations

import contextlib
import io
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse.errors import InvalidInputError, SchemaMismatchError, StoreSettingsConflictError
from lakehouse.versioned import PutStatus, VersionedStore, default_segment_interval
from tests.versioned.expiry import assert_expiry_is_metadata_only_then_vacuum_deletes
from tests.versioned.helpers import SCHEMA, at, batch_frame, create_store, ms_of, store_history

RETENTION_MS = 60_000
INTERVAL_MS = 10_000


def _value(store: VersionedStore, key: str, as_of_ms: int | None = None) -> str | None:
    found = store.get(key, None if as_of_ms is None else at(as_of_ms))
    return None if found is None else found.value["v"]


@pytest.mark.parametrize(
    ("retention", "interval"),
    [
        (timedelta(0), timedelta(seconds=2)),
        (timedelta(seconds=60), timedelta(seconds=20)),
        (timedelta(seconds=61), timedelta(seconds=20)),
        (timedelta(minutes=5), timedelta(minutes=1)),
        (timedelta(minutes=6), timedelta(minutes=1)),
        (timedelta(hours=1), timedelta(minutes=5)),
        (timedelta(hours=2), timedelta(minutes=5)),
        (timedelta(days=1), timedelta(hours=1)),
    ],
)
def test_default_segment_interval_follows_kafka_tiers(retention: timedelta, interval: timedelta) -> None:
    assert default_segment_interval(retention) == interval


def test_kip889_b0_b3_example_reads_as_of_each_stream_time(spark: SparkSession, table_path: str) -> None:
    store = create_store(spark, table_path, RETENTION_MS)
    store.put_all(batch_frame(spark, [("B", "b0", 0, 0, 0), ("B", "b3", 3, 0, 1)]))
    assert [_value(store, "B", t) for t in (1, 4, 2)] == ["b0", "b3", "b0"]


def test_currency_rates_out_of_order_update_and_delete(spark: SparkSession, tmp_path: Path) -> None:
    schema = T.StructType(
        [T.StructField("currency", T.StringType()), T.StructField("rate", T.DecimalType(18, 6))]
    )
    store = VersionedStore.create(spark, str(tmp_path / "rates"), "currency", schema, timedelta(hours=1))
    updates = spark.createDataFrame(
        [
            ("EUR", Decimal("1.10"), False, 0, 0),
            ("EUR", Decimal("1.12"), False, 10, 1),
            ("EUR", Decimal("1.11"), False, 8, 2),
            ("EUR", None, True, 20, 3),
        ],
        "currency string, rate decimal(18,6), deleted boolean, s long, offset long",
    ).select("*", F.lit(0).alias("partition"), F.timestamp_seconds("s").alias("timestamp"))
    result = store.put_all(updates, deletes="deleted")
    assert (result.records, result.dropped) == (4, 0)

    def rate(second: int) -> Decimal | None:
        found = store.get("EUR", at(second * 1000))
        return None if found is None else found.value["rate"]

    assert [rate(s) for s in (5, 9, 12, 21)] == [Decimal("1.10"), Decimal("1.11"), Decimal("1.12"), None]
    assert store.get("EUR") is None
    eleven = store.get("EUR", at(9_000))
    assert eleven is not None and (ms_of(eleven.valid_from), ms_of(eleven.valid_to)) == (8_000, 10_000)


def test_multi_column_keys_and_values_with_sequence_by(spark: SparkSession, table_path: str) -> None:
    schema = T.StructType(
        [
            T.StructField("region", T.StringType()),
            T.StructField("sku", T.LongType()),
            T.StructField("price", T.DoubleType()),
            T.StructField("note", T.StringType()),
        ]
    )
    store = VersionedStore.create(spark, table_path, ["region", "sku"], schema, timedelta(minutes=1))
    batch = spark.createDataFrame(
        [("eu", 1, 9.5, "a", 1, 2), ("eu", 1, 9.0, None, 0, 1), ("us", 1, 8.0, "c", 0, 3)],
        "region string, sku long, price double, note string, s long, seq long",
    ).withColumn("timestamp", F.timestamp_seconds("s"))
    store.put_all(batch, sequence_by="seq")
    latest = store.get(("eu", 1))
    assert latest is not None and latest.value == {"price": 9.5, "note": "a"}
    first = store.get({"region": "eu", "sku": 1}, at(500))
    assert first is not None and first.value == {"price": 9.0, "note": None}
    assert store.as_of(at(0)).count() == 2


def test_replayed_batch_id_leaves_store_unchanged(spark: SparkSession, table_path: str) -> None:
    store = create_store(spark, table_path, RETENTION_MS)
    batch = batch_frame(spark, [("k", "v1", 5, 0, 0), ("k", "v2", 1, 0, 1)])
    first = store.put_all(batch, batch_id=7)
    versions = DeltaTable.forPath(spark, table_path).history().count()
    again = store.put_all(batch, batch_id=7)
    assert again.replayed and not first.replayed
    assert (again.records, again.stream_time) == (first.records, first.stream_time)
    assert DeltaTable.forPath(spark, table_path).history().count() == versions
    with pytest.raises(InvalidInputError, match="batch ids must increase"):
        store.put_all(batch, batch_id=6)


def test_records_of_one_key_and_time_keep_the_last_in_processing_order(
    spark: SparkSession, table_path: str
) -> None:
    # Partition 0's time runs ahead to 30, so its record at offset 1 is processed after partition 1's
    # record (task order: the smaller partition time goes first): "p0" is the last write of k at 10, and
    # it replaces the stored "old" while keeping the stored later version's bound.
    store = create_store(spark, table_path, RETENTION_MS)
    store.put_all(batch_frame(spark, [("k", "old", 10, 0, 0), ("k", "later", 20, 0, 1)]))
    result = store.put_all(
        batch_frame(spark, [("x", "x", 30, 0, 0), ("k", "p0", 10, 0, 1), ("k", "p1", 10, 1, 0)])
    )
    assert (result.records, result.dropped) == (3, 0)
    assert store_history(store) == [("k", 10, 20, "p0"), ("k", 20, None, "later"), ("x", 30, None, "x")]


def test_open_reads_settings_and_stream_time_from_the_table(spark: SparkSession, table_path: str) -> None:
    store = create_store(spark, table_path, RETENTION_MS, INTERVAL_MS)
    store.put_all(batch_frame(spark, [("k", "v", 70_000, 0, 0)]))
    reopened = VersionedStore.open(spark, table_path)
    assert reopened.settings == store.settings
    assert ms_of(reopened.stream_time) == 70_000
    assert reopened.put("k", "old", at(9_999)).status is PutStatus.NOT_PUT
    assert reopened.put("k", "edge", at(10_000)).status is PutStatus.HISTORY


def test_expiry_drops_whole_segments_metadata_only_and_vacuum_removes_files(
    spark: SparkSession, table_path: str, retention_check_off: None
) -> None:
    assert_expiry_is_metadata_only_then_vacuum_deletes(spark, table_path)


def test_as_of_reads_only_segments_that_can_hold_the_version(spark: SparkSession, table_path: str) -> None:
    store = create_store(spark, table_path, 10 * RETENTION_MS, INTERVAL_MS)
    store.put_all(batch_frame(spark, [("k", f"v{i}", i * INTERVAL_MS, 0, i) for i in range(6)]))
    store.seal()
    as_of = store.as_of(at(3 * INTERVAL_MS + 1))
    plan = io.StringIO()
    with contextlib.redirect_stdout(plan):
        as_of.explain()
    assert "PartitionFilters: [(isnull(segment" in plan.getvalue()
    assert "(segment#" in plan.getvalue() and ">= 3)" in plan.getvalue()
    read_segments = {f.split("segment=")[1].split("/")[0] for f in as_of.inputFiles()}
    assert read_segments <= {"3", "4", "5", "__HIVE_DEFAULT_PARTITION__"}
    assert [r["v"] for r in as_of.collect()] == ["v3"]


@pytest.mark.parametrize(
    ("frame_sql", "error", "match"),
    [
        (
            "SELECT 'k' AS k, timestamp_millis(1) AS timestamp, 0 AS partition, 0L AS offset",
            SchemaMismatchError,
            "v",
        ),
        (
            "SELECT 'k' AS k, 1 AS v, timestamp_millis(1) AS timestamp, 0 AS partition, 0L AS offset",
            SchemaMismatchError,
            "v: expected string",
        ),
        ("SELECT 'k' AS k, 'v' AS v, timestamp_millis(1) AS timestamp", SchemaMismatchError, "sequence_by"),
        (
            "SELECT CAST(NULL AS STRING) AS k, 'v' AS v, timestamp_millis(1) AS timestamp, 0 AS partition, "
            "0L AS offset",
            InvalidInputError,
            "null key",
        ),
        (
            "SELECT 'k' AS k, 'v' AS v, CAST(NULL AS TIMESTAMP) AS timestamp, 0 AS partition, 0L AS offset",
            InvalidInputError,
            "null timestamp",
        ),
        (
            "SELECT 'k' AS k, 'v' AS v, timestamp_millis(1) AS timestamp, 0 AS partition, CAST(NULL AS LONG) "
            "AS offset",
            InvalidInputError,
            "null order",
        ),
        (
            "SELECT 'k' AS k, 'v' AS v, timestamp_millis(1) AS timestamp, 0 AS partition, '9' AS offset",
            SchemaMismatchError,
            "offset: string",
        ),
        (
            "SELECT 'k' AS k, 'v' AS v, timestamp_micros(253402300800000000) AS timestamp, 0 AS partition, "
            "0L AS offset",
            InvalidInputError,
            "outside years 1 to 9999",
        ),
        (
            "SELECT 'k' AS k, 'v' AS v, timestamp_micros(-62230000000000000) AS timestamp, 0 AS partition, "
            "0L AS offset",
            InvalidInputError,
            "outside years 1 to 9999",
        ),
    ],
)
def test_bad_batches_raise_and_write_nothing(
    spark: SparkSession, table_path: str, frame_sql: str, error: type[Exception], match: str
) -> None:
    store = create_store(spark, table_path, RETENTION_MS)
    versions = DeltaTable.forPath(spark, table_path).history().count()
    with pytest.raises(error, match=match):
        store.put_all(spark.sql(frame_sql))
    assert DeltaTable.forPath(spark, table_path).history().count() == versions
    assert store.table().count() == 0


def test_a_deletes_condition_that_is_not_one_is_refused_in_one_line(
    spark: SparkSession, table_path: str
) -> None:
    store = create_store(spark, table_path, RETENTION_MS)
    batch = batch_frame(spark, [("k", "v", 0, 0, 0)])
    for deletes, match in (("v =", "not a condition"), ("gone", "not a condition"), ("v", "is string")):
        with pytest.raises(InvalidInputError, match=match) as raised:
            store.put_all(batch, deletes=deletes)
        assert "\n" not in str(raised.value)
    assert store.table().count() == 0


def test_bad_settings_raise_and_reopening_with_other_settings_is_refused(
    spark: SparkSession, table_path: str
) -> None:
    with pytest.raises(InvalidInputError, match="history_retention"):
        create_store(spark, table_path, -1)
    with pytest.raises(InvalidInputError, match="segment_interval"):
        VersionedStore.create(
            spark, table_path, "k", SCHEMA, timedelta(minutes=1), timedelta(microseconds=10)
        )
    with pytest.raises(InvalidInputError, match="not in the schema"):
        VersionedStore.create(spark, table_path, "id", SCHEMA, timedelta(minutes=1))
    with pytest.raises(InvalidInputError, match="history_retention must be at most"):
        VersionedStore.create(spark, table_path, "k", SCHEMA, timedelta(days=10**7))
    with pytest.raises(InvalidInputError, match="segment_interval must be >= 1 ms, got 0:00:00"):
        VersionedStore.create(spark, table_path, "k", SCHEMA, timedelta(minutes=1), timedelta(0))
    with pytest.raises(InvalidInputError, match="under Delta's safety threshold"):
        VersionedStore.create(
            spark, table_path, "k", SCHEMA, timedelta(minutes=1), file_retention=timedelta(0)
        )
    assert not DeltaTable.isDeltaTable(spark, table_path)
    create_store(spark, table_path, RETENTION_MS)
    with pytest.raises(StoreSettingsConflictError, match="history_retention"):
        create_store(spark, table_path, 2 * RETENTION_MS)
    assert create_store(spark, table_path, RETENTION_MS).settings.history_retention == timedelta(minutes=1)
    with pytest.raises(InvalidInputError, match="null key"):
        create_store(spark, table_path, RETENTION_MS).put(None, "v", at(0))
