"""Helpers for replica tests: a replica's content against the source's shard at its checkpoint."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame

from lakehouse.replica import Replica


def rows(df: DataFrame) -> list[tuple[Any, ...]]:
    """A small frame's rows, sorted (columns in name order, so column order does not matter)."""
    columns = sorted(df.columns)
    return sorted((tuple(r) for r in df.select(*columns).collect()), key=repr)


def source_shard_at(replica: Replica, version: int) -> DataFrame:
    """``source VERSION AS OF version`` restricted to the replica's shard."""
    source = replica.spark.read.format("delta").option("versionAsOf", version).load(replica.source_path)
    return source.where(replica._kind().in_shard(replica.shard, source.schema))


def assert_equals_source(replica: Replica) -> int:
    """Assert the replica's rows equal the source's shard at its checkpoint; returns the checkpoint."""
    checkpoint = replica.checkpoint()
    assert checkpoint is not None
    expected = source_shard_at(replica, checkpoint)
    assert rows(replica.table().select(*expected.columns)) == rows(expected), f"at version {checkpoint}"
    return checkpoint
