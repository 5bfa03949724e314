from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse import delta_ops
from lakehouse.commit_log import CommitLog
from lakehouse.delta_ops import drop_partitions_below, ensure_table, table_properties
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


def test_drop_partitions_below_is_metadata_only(spark: SparkSession, table_path: str) -> None:
    ensure_table(spark, table_path, SCHEMA, partition_by=("part",))
    rows = [(i, i % 4) for i in range(40)] + [(100, None)]
    spark.createDataFrame(rows, SCHEMA).write.format("delta").mode("append").save(table_path)
    log = CommitLog(spark, table_path, APP, ("stream_time_us",))
    metrics = drop_partitions_below(log, "part", 2, {"stream_time_us": 7})
    assert int(metrics["numRemovedFiles"]) > 0
    assert int(metrics.get("numAddedFiles", "0")) == 0
    assert int(metrics.get("numCopiedRows", "0")) == 0
    assert {p for _, p in _rows_with_null(spark, table_path)} == {2, 3, None}
    assert log.read().state == {"stream_time_us": 7}  # the delete recorded the state
    assert drop_partitions_below(log, "part", 2, {"stream_time_us": 7}) == {}
    with pytest.raises(InvalidInputError, match="not a partition column"):
        drop_partitions_below(log, "id", 2, {})
    assert DeltaTable.forPath(spark, table_path).history().count() == 3


def _rows_with_null(spark: SparkSession, path: str) -> list[tuple[int, int | None]]:
    return [(r["id"], r["part"]) for r in spark.read.format("delta").load(path).collect()]


def test_compact_merges_the_small_files_and_leaves_those_a_compaction_made_big_enough(
    spark: SparkSession, table_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def files() -> set[str]:
        return {
            r["f"]
            for r in spark.read.format("delta")
            .load(table_path)
            .select(F.input_file_name().alias("f"))
            .distinct()
            .collect()
        }

    big = spark.range(20_000).select(F.col("id"), F.sha2(F.col("id").cast("string"), 256).alias("s"))
    big.coalesce(1).write.format("delta").save(table_path)
    (large,) = files()
    size = Path(unquote(urlparse(large).path)).stat().st_size
    for i in range(3):
        spark.range(i, i + 1).select("id", F.lit("x").alias("s")).write.format("delta").mode("append").save(
            table_path
        )
    monkeypatch.setattr(delta_ops, "COMPACTED_FILE_BYTES", size // 2)
    delta_ops.compact(spark, table_path)
    after = files()
    assert large in after and len(after) == 2  # the big file as it was, the three small ones in one
    assert spark.read.format("delta").load(table_path).count() == 20_003
    spark.conf.set("spark.databricks.delta.optimize.minFileSize", str(10 * size))  # the session's own wins
    try:
        delta_ops.compact(spark, table_path)
    finally:
        spark.conf.unset("spark.databricks.delta.optimize.minFileSize")
    assert len(files()) == 1 and large not in files()
