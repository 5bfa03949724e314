"""Helpers for as-of join tests: millisecond timelines, stores with a known history, the model's answer."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse.versioned import VersionedStore
from tests.reference.versioned import VersionedStoreModel
from tests.versioned.helpers import batch_frame, create_store

STREAM_SCHEMA = "id long, k string, ms long"


def store_with(
    spark: SparkSession,
    path: str,
    puts: list[tuple[str, str | None, int]],
    retention_ms: int,
    interval_ms: int,
) -> tuple[VersionedStore, VersionedStoreModel]:
    """A store (key ``k``, value ``v``) and its model after ``puts`` ``(key, value or None, ms)`` in order."""
    store = create_store(spark, path, retention_ms, interval_ms)
    model = VersionedStoreModel(retention_ms)
    for key, value, ms in puts:
        model.put(key, value, ms)
    records = [(k, v, ms, 0, offset) for offset, (k, v, ms) in enumerate(puts)]
    store.put_all(batch_frame(spark, records))
    return store, model


def stream(spark: SparkSession, events: list[tuple[str | None, int | None]]) -> DataFrame:
    """Stream records ``(key, ms)`` numbered by position as ``id``, with a TIMESTAMP ``timestamp``."""
    rows = [(i, k, ms) for i, (k, ms) in enumerate(events)]
    return spark.createDataFrame(rows, STREAM_SCHEMA).withColumn("timestamp", F.timestamp_millis("ms"))


def joined(frame: DataFrame, value: str = "v", valid_from: str = "valid_from") -> dict[int, Any]:
    """``id -> (value, valid_from ms)`` of a join result, ``None`` where nothing matched."""
    rows = frame.select("id", F.col(value).alias("v"), F.unix_millis(valid_from).alias("from_ms")).collect()
    found = {r["id"]: (None if r["from_ms"] is None else (r["v"], r["from_ms"])) for r in rows}
    assert len(found) == len(rows), "a stream record was emitted more than once"
    return found


def expected(model: VersionedStoreModel, key: Any, ms: int | None) -> tuple[Any, int] | None:
    """What ``model.get(key, as_of=ms)`` answers, as ``(value, valid_from)``."""
    if key is None or ms is None:
        return None
    found = model.get(key, ms)
    return None if found is None else (found.value, found.valid_from)
