"""Small domain helpers for versioned-store tests: millisecond timelines and model comparisons."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse.versioned import VersionedStore
from tests.reference.versioned import VersionedStoreModel

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
SCHEMA = T.StructType([T.StructField("k", T.StringType()), T.StructField("v", T.StringType())])
BATCH_SCHEMA = "k string, v string, ms long, partition int, offset long"


def at(ms: int) -> datetime:
    """The instant ``ms`` milliseconds after the epoch."""
    return EPOCH + timedelta(milliseconds=ms)


def ms_of(value: datetime | None) -> int | None:
    return None if value is None else (value - EPOCH) // timedelta(milliseconds=1)


def create_store(
    spark: SparkSession, path: str, retention_ms: int, interval_ms: int | None = None
) -> VersionedStore:
    interval = None if interval_ms is None else timedelta(milliseconds=interval_ms)
    return VersionedStore.create(spark, path, "k", SCHEMA, timedelta(milliseconds=retention_ms), interval)


def batch_frame(spark: SparkSession, records: list[tuple[str, str | None, int, int, int]]) -> DataFrame:
    """Records ``(key, value, ms, partition, offset)`` as a put_all batch with a ``timestamp`` column."""
    frame = spark.createDataFrame(records, BATCH_SCHEMA)
    return frame.withColumn("timestamp", F.timestamp_millis("ms"))


def store_history(store: VersionedStore) -> list[tuple[Any, int, int | None, Any]]:
    """The stored versions as ``(key, valid_from ms, valid_to ms, value or None for a tombstone)``."""
    rows = store.history().select(
        "k",
        F.unix_millis("valid_from").alias("from_ms"),
        F.unix_millis("valid_to").alias("to_ms"),
        F.when(~F.col("tombstone"), F.col("v")).alias("v"),
    )
    return sorted((r["k"], r["from_ms"], r["to_ms"], r["v"]) for r in rows.collect())


def assert_matches_model(store: VersionedStore, model: VersionedStoreModel) -> None:
    """The store holds what the model holds where a read can see it (:meth:`readable_history`), and
    nothing else than the model's versions (a version expired when its batch committed may be missing)."""
    stored = set(store_history(store))
    assert set(model.readable_history()) <= stored <= set(model.history())
