"""A whole-table replica holds copies of the source's files and replays the source's file actions."""

from __future__ import annotations

import json
import os
from urllib.parse import unquote

import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from lakehouse.commit_log import snapshot_files
from lakehouse.errors import InvalidInputError
from lakehouse.replica import Replica, ReplicaReinitializedWarning
from tests.replica.helpers import (
    INTERVAL_MS,
    RETENTION_MS,
    assert_equals_source,
    assert_follows_source,
    assert_gets_equal,
    jobs_of,
    no_reinit,
    put,
    synced_replica,
)
from tests.versioned.helpers import at, create_store


def file_set(spark: SparkSession, path: str) -> set[tuple[str, str | None]]:
    """The table's data files (relative paths) and their deletion vectors' unique ids, as of now."""
    return {
        (f.path(), None if f.deletionVector() is None else str(f.deletionVector().uniqueId()))
        for f in snapshot_files(spark, path)
    }


def modified_times(path: str, files: set[tuple[str, str | None]]) -> dict[str, int]:
    """The modification time (ns) of each data file of ``files`` under the table at ``path``."""
    return {name: os.stat(os.path.join(path, unquote(name))).st_mtime_ns for name, _ in files}


def test_a_whole_table_replica_replays_the_source_files_and_a_seal_sync_runs_no_spark_job(
    spark: SparkSession, tmp_path
) -> None:
    store = create_store(spark, str(tmp_path / "src"), RETENTION_MS, INTERVAL_MS)
    put(store, [("a", "x", 0, 0, 0), ("b", "x", 1, 0, 1), ("c", "x", 2, 0, 2)], 0)
    store.seal()
    replica = Replica.create(spark, store.path, str(tmp_path / "r"))
    restored = replica.sync()
    assert restored.restored and restored.rows == store.table().count() == 3
    assert file_set(spark, replica.path) == file_set(spark, store.path)

    held = file_set(spark, replica.path)
    held_times = modified_times(replica.path, held)

    put(store, [("a", "y", 10, 0, 3), ("b", None, 11, 0, 4)], 1)  # appended to the pending partition
    store.seal()  # a MERGE: pending rows deleted, versions moved, open versions closed (deletion vectors)
    put(store, [("c", "z", 40, 0, 5)], 2)
    assert store.expire().removed_files > 0  # a partition drop: the range is applied in two commits
    with no_reinit():
        result, jobs = jobs_of(spark, "sync", replica.sync)
    # Reading the source's log, copying files and committing their actions: no Spark job at all.
    assert jobs == 0
    # A data file the replica held that the seal gave a deletion vector is not copied again: only its
    # vector is (Delta never rewrites a data file in place).
    now = file_set(spark, replica.path)
    revectored = {name for name, vector in now if vector is not None and (name, vector) not in held}
    assert revectored & {name for name, _ in held}
    kept = {(name, vector) for name, vector in now if name in held_times}
    assert modified_times(replica.path, kept) == {name: held_times[name] for name, _ in kept}
    assert (result.restored, result.partition_drops, result.commits) == (False, 1, 2)
    assert result.rows > 0
    assert file_set(spark, replica.path) == file_set(spark, store.path)
    assert assert_equals_source(replica) == result.checkpoint
    assert_gets_equal(replica, store, "abc", [None, at(12), at(39)])


def test_a_whole_table_replica_built_row_by_row_is_rebuilt_from_the_source_files(
    spark: SparkSession, tmp_path
) -> None:
    store, replica = synced_replica(spark, tmp_path, records=[("a", "x", 0, 0, 0)])
    # What an earlier lakehouse wrote: the same rows in files of the replica's own, a sync's metadata
    # without the file marker (replaying the source's file actions onto these files would be wrong).
    rows = spark.read.format("delta").load(store.path)
    metadata = json.loads(replica._commit([], replica._kind(), replica.checkpoint(), "restore", None)[0])
    assert metadata["lakehouse"]["replica"].pop("files") is True
    legacy = rows.write.format("delta").mode("overwrite").option("userMetadata", json.dumps(metadata))
    legacy.save(replica.path)
    put(store, [("b", "x", 5, 0, 1)], 1)
    with pytest.warns(ReplicaReinitializedWarning, match="row by row"):
        assert replica.sync().restored
    assert file_set(spark, replica.path) == file_set(spark, store.path)
    assert_equals_source(replica)


def test_a_whole_table_replica_the_source_no_longer_covers_is_rebuilt_keeping_the_files_it_shares(
    spark: SparkSession, tmp_path, retention_check_off: None
) -> None:
    store, replica = synced_replica(spark, tmp_path, seal=True)
    shared = file_set(spark, replica.path)
    put(store, [("c", "y", 10, 0, 2)], 1)  # a new key: the seal leaves the files of a and b as they are
    store.seal()
    DeltaTable.forPath(spark, store.path).vacuum(0)  # files the replica's sync would copy are gone
    assert shared & file_set(spark, store.path)  # some files the replica holds the source still uses
    with pytest.warns(ReplicaReinitializedWarning, match="VACUUM"):
        assert replica.sync().restored
    assert file_set(spark, replica.path) == file_set(spark, store.path)
    assert_equals_source(replica)


def test_a_whole_table_replica_of_a_column_mapped_or_type_widened_source_is_refused_writing_nothing(
    spark: SparkSession, tmp_path
) -> None:
    store, replica = synced_replica(spark, tmp_path, records=[("a", "x", 0, 0, 0)])
    before = DeltaTable.forPath(spark, replica.path).history(1).first()["version"]
    # Column mapping: the source's files name their columns by physical names only its metadata maps, so
    # copies of them in a table without that mapping would read as NULLs. A sync must refuse, not copy.
    spark.sql(f"ALTER TABLE delta.`{store.path}` SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name')")
    with pytest.raises(InvalidInputError, match="column mapping") as refused:
        replica.sync()
    assert "\n" not in str(refused.value)
    assert DeltaTable.forPath(spark, replica.path).history(1).first()["version"] == before
    with pytest.raises(InvalidInputError, match="shard=Shard"):
        Replica.create(spark, store.path, str(tmp_path / "r2"))
    widened = create_store(spark, str(tmp_path / "widened"), RETENTION_MS, INTERVAL_MS)
    spark.sql(f"ALTER TABLE delta.`{widened.path}` SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")
    with pytest.raises(InvalidInputError, match="type widening"):
        Replica.create(spark, widened.path, str(tmp_path / "r4"))
    # By rows it works: a replica of Shard(0, 1) holds every row.
    rows = Replica.create(spark, store.path, str(tmp_path / "r3"), (0, 1))
    rows.sync()
    assert_follows_source(rows)  # its versions, as every read sees them
