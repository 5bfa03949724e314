"""Helpers for replica tests: a replica against its source at its checkpoint (rows, or reads)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from pyspark.sql import DataFrame, SparkSession

from lakehouse.replica import Replica, ReplicaReinitializedWarning, Shard
from lakehouse.replica.failover import live_versions
from lakehouse.versioned import VersionedStore
from tests.versioned.helpers import batch_frame, create_store

T = TypeVar("T")
RETENTION_MS = 20
INTERVAL_MS = 5
#: Two keys' first versions (``(key, value, ms, partition, offset)``): batch 0 of most replica tests.
TWO_KEYS = [("a", "x", 0, 0, 0), ("b", "x", 1, 0, 1)]


def put(store: VersionedStore, records: list[tuple], batch_id: int) -> None:
    store.put_all(batch_frame(store.spark, records), batch_id=batch_id)


def synced_replica(
    spark: SparkSession,
    root: Path | str,
    shard: Shard | None = None,
    records: list[tuple] = TWO_KEYS,
    seal: bool = False,
) -> tuple[VersionedStore, Replica]:
    """A store at ``root/src`` holding ``records`` (batch 0; sealed if ``seal``) and a replica of ``shard``
    at ``root/r`` restored from it (``root``: a local folder or a URI, ``s3a://...``)."""
    store = create_store(spark, f"{root}/src", RETENTION_MS, INTERVAL_MS)
    put(store, records, 0)
    if seal:
        store.seal()
    replica = Replica.create(spark, store.path, f"{root}/r", shard)
    replica.sync()
    return store, replica


@contextmanager
def no_reinit() -> Iterator[None]:
    """A sync inside must not re-initialize its replica."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReplicaReinitializedWarning)
        yield


def jobs_of(spark: SparkSession, group: str, call: Callable[[], T]) -> tuple[T, int]:
    """``call()``'s result and how many Spark jobs it ran (in job group ``group``)."""
    spark.sparkContext.setJobGroup(group, group)
    try:
        result = call()
    finally:
        spark.sparkContext.setJobGroup("", "")
    return result, len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))


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


def assert_gets_equal(
    replica: Replica, store: VersionedStore, keys: str, times: list[datetime | None]
) -> None:
    """A whole-table replica of ``store`` opened as a store: the same stream time, and the same ``get`` of
    each of ``keys`` at each of ``times`` (None: the latest)."""
    copy = VersionedStore.open(replica.spark, replica.path)
    assert copy.stream_time == store.stream_time
    for key in keys:
        for t in times:
            assert copy.get(key, t) == store.get(key, t), f"{key} as of {t}"
