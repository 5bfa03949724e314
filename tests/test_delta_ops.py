from __future__ import annotations

import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from lakehouse.delta_ops import (
    batch_commit_version,
    check_new_batch,
    drop_partitions_below,
    ensure_table,
    idempotent_dml,
    last_batch_id,
    table_properties,
    writer_options,
)
from lakehouse.errors import InvalidInputError, StoreSettingsConflictError

SCHEMA = T.StructType([T.StructField("id", T.LongType()), T.StructField("part", T.IntegerType())])
APP = "test-app"


def _rows(spark: SparkSession, path: str) -> list[tuple[int, int]]:
    return sorted((r["id"], r["part"]) for r in spark.read.format("delta").load(path).collect())


def test_ensure_table_is_idempotent_and_rejects_other_settings(spark: SparkSession, table_path: str) -> None:
    ensure_table(spark, table_path, SCHEMA, partition_by=("part",), properties={"lakehouse.x": "1"})
    ensure_table(spark, table_path, SCHEMA, partition_by=("part",), properties={"lakehouse.x": "1"})
    assert table_properties(spark, table_path) == {"lakehouse.x": "1"}
    with pytest.raises(StoreSettingsConflictError) as raised:
        ensure_table(spark, table_path, SCHEMA, partition_by=("part",), properties={"lakehouse.x": "2"})
    assert (raised.value.setting, raised.value.existing, raised.value.requested) == ("lakehouse.x", "1", "2")
    with pytest.raises(StoreSettingsConflictError, match="partitioning"):
        ensure_table(spark, table_path, SCHEMA, properties={"lakehouse.x": "1"})
    other = T.StructType([T.StructField("id", T.StringType()), T.StructField("part", T.IntegerType())])
    with pytest.raises(StoreSettingsConflictError, match="schema"):
        ensure_table(spark, table_path, other, partition_by=("part",))


def test_replayed_batch_is_skipped_by_delta_for_appends_and_merges(
    spark: SparkSession, table_path: str
) -> None:
    table = ensure_table(spark, table_path, SCHEMA)
    batch = spark.createDataFrame([(1, 0), (2, 0)], SCHEMA)
    for _ in range(2):
        batch.write.format("delta").mode("append").options(**writer_options(APP, 0)).save(table_path)
    assert _rows(spark, table_path) == [(1, 0), (2, 0)]
    update = spark.createDataFrame([(1, 5)], SCHEMA)
    for _ in range(2):
        with idempotent_dml(spark, APP, 1):
            table.alias("t").merge(update.alias("s"), "t.id = s.id").whenMatchedUpdate(
                set={"part": "t.part + s.part"}
            ).execute()
    assert _rows(spark, table_path) == [(1, 5), (2, 0)]
    assert spark.conf.get("spark.databricks.delta.write.txnVersion", None) is None
    assert last_batch_id(spark, table_path, APP) == 1
    assert batch_commit_version(spark, table_path, APP, 0) == 1
    assert batch_commit_version(spark, table_path, APP, 1) == 2


def test_check_new_batch_tells_replays_and_rejects_gaps(spark: SparkSession, table_path: str) -> None:
    ensure_table(spark, table_path, SCHEMA)
    assert check_new_batch(spark, table_path, APP, 0)
    spark.createDataFrame([(1, 0)], SCHEMA).write.format("delta").mode("append").options(
        **writer_options(APP, 5)
    ).save(table_path)
    assert not check_new_batch(spark, table_path, APP, 5)
    assert check_new_batch(spark, table_path, APP, 6)
    with pytest.raises(InvalidInputError, match="batch ids must increase"):
        check_new_batch(spark, table_path, APP, 4)
    with pytest.raises(InvalidInputError, match=">= 0"):
        check_new_batch(spark, table_path, APP, -1)


def test_drop_partitions_below_is_metadata_only(spark: SparkSession, table_path: str) -> None:
    ensure_table(spark, table_path, SCHEMA, partition_by=("part",))
    rows = [(i, i % 4) for i in range(40)] + [(100, None)]
    spark.createDataFrame(rows, SCHEMA).write.format("delta").mode("append").save(table_path)
    metrics = drop_partitions_below(spark, table_path, "part", 2, APP)
    assert int(metrics["numRemovedFiles"]) > 0
    assert int(metrics.get("numAddedFiles", "0")) == 0
    assert int(metrics.get("numCopiedRows", "0")) == 0
    assert {p for _, p in _rows_with_null(spark, table_path)} == {2, 3, None}
    assert drop_partitions_below(spark, table_path, "part", 2, APP) == {}
    with pytest.raises(InvalidInputError, match="not a partition column"):
        drop_partitions_below(spark, table_path, "id", 2, APP)
    assert DeltaTable.forPath(spark, table_path).history().count() == 3


def _rows_with_null(spark: SparkSession, path: str) -> list[tuple[int, int | None]]:
    return [(r["id"], r["part"]) for r in spark.read.format("delta").load(path).collect()]
