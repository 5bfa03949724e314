"""Replicas on an object store (issue 38): source and replicas on ``s3a://`` sync and read as their source,
and a VACUUM of the source keeps what its registered replicas need (the local scenario, on the store)."""

from __future__ import annotations

from pyspark.sql import SparkSession

from lakehouse.replica import Replica, Shard
from tests.objectstore import ObjectStore
from tests.replica.helpers import assert_follows_source, assert_gets_equal, no_reinit, put, synced_replica
from tests.replica.vacuum import assert_vacuum_keeps_what_a_registered_replica_needs
from tests.versioned.helpers import at


def test_a_whole_table_and_a_shard_replica_sync_and_read_as_their_source(
    spark: SparkSession, s3: ObjectStore
) -> None:
    store, whole = synced_replica(spark, s3.uri(), records=[("a", "x", 0, 0, 0), ("b", "x", 1, 0, 1)])
    shard = Replica.create(spark, store.path, s3.uri("shard"), Shard(0, 2))
    shard.sync()
    put(store, [("a", "y", 10, 0, 2), ("b", None, 11, 0, 3), ("c", "x", 12, 0, 4)], 1)  # pending files
    store.seal()  # a MERGE: pending rows deleted, versions moved, open versions closed (deletion vectors)
    put(store, [("c", "z", 40, 0, 5)], 2)
    assert store.expire().removed_files > 0  # a partition drop
    for replica in (whole, shard):
        with no_reinit():
            assert replica.sync().commits > 0
        assert_follows_source(replica)
    assert_gets_equal(whole, store, "abc", [None, at(11), at(39)])


def test_vacuum_keeps_what_a_registered_replica_needs_within_its_max_lag(
    spark: SparkSession, s3: ObjectStore, retention_check_off: None
) -> None:
    assert_vacuum_keeps_what_a_registered_replica_needs(spark, s3.uri())
