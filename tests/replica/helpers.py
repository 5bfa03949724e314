"""Helpers for replica tests: a replica against its source at its checkpoint (rows, or reads)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame

from lakehouse.replica import Replica
from lakehouse.replica.failover import live_versions
from lakehouse.versioned import VersionedStore


def rows(df: DataFrame) -> list[tuple[Any, ...]]:
    """A small frame's rows, sorted (columns in name order, so column order does not matter)."""
    columns = sorted(df.columns)
    return sorted((tuple(r) for r in df.select(*columns).collect()), key=repr)


def source_shard_at(replica: Replica, version: int) -> DataFrame:
    """``source VERSION AS OF version`` restricted to the replica's shard."""
    source = replica.spark.read.format("delta").option("versionAsOf", version).load(replica.source_path)
    return source.where(replica._kind().in_shard(replica.shard, source.schema))


def assert_equals_source(replica: Replica) -> int:
    """Assert the replica's rows equal the source's shard at its checkpoint; returns the checkpoint.

    The contract of replicas that mirror their source: a whole table's (file copies) and a dedup index's
    shard. A versioned store's shard replica is held to :func:`assert_reads_equal`.
    """
    checkpoint = replica.checkpoint()
    assert checkpoint is not None
    expected = source_shard_at(replica, checkpoint)
    assert rows(replica.table().select(*expected.columns)) == rows(expected), f"at version {checkpoint}"
    return checkpoint


def recorded(store: VersionedStore, version: int | None = None) -> tuple[Any, Any]:
    """The store's stream time and every writer's last batch id, as of ``version`` (default: now)."""
    state = store._log.read().state if version is None else store._log.state_at(version)
    return state.get("stream_time_us"), state.get("batch_ids")


def assert_reads_equal(replica: Replica) -> int:
    """Assert reads through the replica equal the source's reads at its checkpoint (its live versions in the
    shard, its stream time and last batch ids); returns the checkpoint."""
    checkpoint = replica.checkpoint()
    assert checkpoint is not None
    spark = replica.spark
    source, mine = VersionedStore.open(spark, replica.source_path), VersionedStore.open(spark, replica.path)
    expected = live_versions(source, checkpoint)
    expected = expected.where(replica._kind().in_shard(replica.shard, expected.schema))
    assert rows(live_versions(mine)) == rows(expected), f"at version {checkpoint}"
    assert recorded(mine) == recorded(source, checkpoint)
    assert mine._log.last_batch_id() == (recorded(source, checkpoint)[1] or {}).get("")
    return checkpoint


def assert_follows_source(replica: Replica) -> int:
    """The replica's contract at its checkpoint: reads equal for a versioned store's shard replica (it
    follows the logical changelog), rows equal for every other; returns the checkpoint."""
    return assert_reads_equal(replica) if replica._logical() else assert_equals_source(replica)
