"""Replicas against the source's own time travel: random sequences, crashes, vacuums, foreign writes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from delta.tables import DeltaTable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse import delta_ops
from lakehouse.commit_log import latest_snapshot
from lakehouse.dedup import Deduplicator
from lakehouse.errors import InvalidInputError, ReadOnlyReplicaError
from lakehouse.pipeline.due import CHECKPOINT_EVERY
from lakehouse.replica import (
    ChangeDataFeedDisabledError,
    Replica,
    ReplicaReinitializedWarning,
    Shard,
)
from lakehouse.replica.failover import live_versions
from lakehouse.replica.replica import maintain_replicas
from lakehouse.versioned import VersionedStore
from lakehouse.versioned.pending import PENDING_SEGMENT
from lakehouse.versioned.store import APP_ID as STORE_APP_ID
from lakehouse.versioned.store import SEAL_OPERATION
from tests.child import child_env
from tests.dedup.helpers import frame, labelled
from tests.replica.helpers import (
    INTERVAL_MS,
    RETENTION_MS,
    assert_equals_source,
    assert_follows_source,
    jobs_of,
    no_reinit,
    put,
    rows,
    synced_replica,
)
from tests.replica.vacuum import assert_vacuum_keeps_what_a_registered_replica_needs
from tests.versioned.helpers import at, create_store

HOUR = timedelta(hours=1)
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
MAPPING_DEFAULT = "spark.databricks.delta.properties.defaults.columnMapping.mode"
SLOW_SETTINGS = settings(
    max_examples=2,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
RECORDS = st.lists(
    st.tuples(st.sampled_from("abcd"), st.sampled_from(["x", "y", None]), st.integers(0, 60)),
    min_size=1,
    max_size=4,
)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), RECORDS),
        st.tuples(st.sampled_from(["replay", "seal", "expire", "vacuum"]), st.none()),
        st.tuples(st.just("sync"), st.integers(0, 2)),  # a shard's replica, or the whole table's
        st.tuples(st.just("seal_replica"), st.integers(0, 1)),
    ),
    min_size=3,
    max_size=6,
)


@pytest.mark.slow
@SLOW_SETTINGS
@given(OPS)
def test_versioned_replicas_equal_the_source_at_their_checkpoint(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, ops
) -> None:
    root = tmp_path_factory.mktemp("rv")
    store = create_store(spark, str(root / "src"), RETENTION_MS, INTERVAL_MS)
    replicas = [Replica.create(spark, store.path, str(root / f"r{p}"), Shard(p, 2)) for p in range(2)]
    replicas.append(Replica.create(spark, store.path, str(root / "all")))  # copies the source's files
    batch_id, offset, last = 0, 0, None
    for op, arg in ops:
        if op == "put":
            records = [(k, v, ms, 0, offset + i) for i, (k, v, ms) in enumerate(arg)]
            offset += len(records)
            last = (records, batch_id)
            put(store, records, batch_id)
            batch_id += 1
        elif op == "replay" and last is not None:
            put(store, *last)  # a committed batch id: nothing written
        elif op == "seal":
            store.seal()
        elif op == "expire":
            store.expire()
        elif op == "vacuum":
            store.vacuum()
        elif op == "seal_replica" and replicas[arg].checkpoint() is not None:
            replicas[arg].seal()  # on its own schedule: reads are the same
        elif op == "sync":
            with no_reinit():
                replicas[arg].sync()
            assert_follows_source(replicas[arg])
    for replica in replicas:
        with no_reinit():
            replica.sync()
        assert_follows_source(replica)
        opened = VersionedStore.open(spark, replica.path)
        assert opened.stream_time == store.stream_time
        keys = [row["k"] for row in replica.table().select("k").distinct().collect()]
        for key in keys:
            assert opened.get(key) == store.get(key)
            assert opened.get(key, at(30)) == store.get(key, at(30))
        assert rows(opened.as_of(at(30)).drop("segment")) == rows(
            store.as_of(at(30)).where(F.col("k").isin(keys)).drop("segment")
        )
    shards = [rows(live_versions(VersionedStore.open(spark, r.path))) for r in replicas[:2]]
    assert sorted(shards[0] + shards[1], key=repr) == rows(live_versions(store))
    assert rows(replicas[2].table()) == rows(spark.read.format("delta").load(store.path))  # file copies


@pytest.mark.slow
@SLOW_SETTINGS
@given(
    st.lists(
        st.lists(
            st.tuples(st.sampled_from("pq"), st.integers(0, 30), st.integers(0, 1)), min_size=1, max_size=4
        ),
        min_size=2,
        max_size=3,
    )
)
def test_dedup_index_replicas_equal_the_source_at_their_checkpoint(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, batches
) -> None:
    root = tmp_path_factory.mktemp("rd")
    dedup = Deduplicator.create(spark, str(root / "index"), by=("key", "id"), interval=timedelta(seconds=5))
    replicas = [Replica.create(spark, dedup.path, str(root / f"r{p}"), Shard(p, 2)) for p in range(2)]
    whole = Replica.create(spark, dedup.path, str(root / "all"))  # copies the source's files
    for replica in (replicas[0], whole):
        replica.sync()  # before the first batch: the index has no id columns yet
    offsets = [0, 0]
    for batch_id, batch in enumerate(batches):
        records = []
        for ident, ts, partition in batch:
            records.append(((ident, "i"), ts + 20 * batch_id, partition, offsets[partition]))
            offsets[partition] += 1
        dedup.apply(frame(spark, labelled(records), ("key", "id")), batch_id)
        if batch_id == 1:
            dedup.purge()
    for replica in replicas:
        with no_reinit():
            replica.sync()
        assert_equals_source(replica)
        # A shard of a per-partition index is its task's entries: the task column modulo the shards.
        assert {r["task"] % 2 for r in replica.table().select("task").collect()} <= {replica.shard.partition}
    with no_reinit():
        whole.sync()
    assert_equals_source(whole)
    for opened in (Deduplicator.open(spark, replicas[0].path), Deduplicator.open(spark, whole.path)):
        assert opened.stream_times() == dedup.stream_times()


@pytest.mark.parametrize("shard", [None, Shard(0, 1)], ids=["files", "logical"])
def test_sync_interrupted_after_any_commit_and_rerun_yields_the_same_replica(
    spark: SparkSession, tmp_path, shard: Shard | None
) -> None:
    store, replica = synced_replica(spark, tmp_path, shard)
    put(store, [("a", "y", 40, 0, 2), ("c", "y", 41, 0, 3)], 1)
    store.expire()  # a partition drop: the range is applied in two commits
    put(store, [("b", None, 50, 0, 4)], 2)

    def crash(step: str) -> None:
        raise RuntimeError(f"killed after {step}")

    replica._after_commit = crash
    with pytest.raises(RuntimeError, match="killed after"):
        replica.sync()
    interrupted_at = assert_follows_source(replica)  # every commit is a consistent source version
    replica._after_commit = lambda step: None
    result = replica.sync()
    assert result.checkpoint_before == interrupted_at
    assert assert_follows_source(replica) == result.checkpoint
    assert replica.sync().versions == 0


def newest(spark: SparkSession, path: str) -> tuple[str, dict[str, str]]:
    """The operation and metrics of the table's newest commit."""
    row = DeltaTable.forPath(spark, path).history(1).first()
    return row["operation"], dict(row["operationMetrics"] or {})


def test_a_shard_replica_appends_batches_to_its_pending_partition_and_a_seal_copies_no_row(
    spark: SparkSession, tmp_path
) -> None:
    store, replica = synced_replica(spark, tmp_path, Shard(0, 1))
    before = replica.checkpoint()
    assert before is not None
    put(store, [("c", "y", 10, 0, 2), ("d", "y", 11, 0, 3)], 1)  # appended to the pending partition
    put(store, [("c", "z", 12, 0, 4)], 2)  # a MERGE into it: c@10 ends at 12
    # The checkpoint, the lag in versions and the source's history come from Delta's log, not Spark jobs.
    assert jobs_of(spark, "checkpoint", replica.checkpoint) == (before, 0)
    assert jobs_of(spark, "behind", replica.versions_behind) == (2, 0)
    with no_reinit():
        result = replica.sync()
    # c@10 (re-bounded), d@11, c@12: the newest row of each version, appended (nothing was pending).
    assert (result.checkpoint, result.rows, result.commits) == (before + 2, 3, 1)
    assert newest(spark, replica.path)[0] == "WRITE"
    assert_follows_source(replica)
    store.seal()  # a MERGE moving every pending row: no read changes, so nothing to copy
    with no_reinit():
        result, jobs = jobs_of(spark, "seal", replica.sync)
    assert (result.checkpoint, result.rows, result.commits) == (before + 3, 0, 1)
    operation, metrics = newest(spark, replica.path)
    assert operation == "WRITE" and metrics.get("numOutputRows", "0") == "0" and jobs == 0
    assert_follows_source(replica)
    put(store, [("a", "w", 20, 0, 5)], 3)  # after every version pending in the replica (file statistics)
    with no_reinit():
        assert replica.sync().rows == 1
    assert newest(spark, replica.path)[0] == "WRITE"  # so appended: none of them is pending there
    assert_follows_source(replica)
    put(store, [("a", "v", 25, 0, 6)], 4)  # a MERGE into the source's pending partition: a@20 ends at 25
    with no_reinit():
        assert replica.sync().rows == 1  # a@25 only: a@20's new bound is what the replica's reads resolve
    assert newest(spark, replica.path)[0] == "WRITE"  # after every version pending in the replica: appended
    assert_follows_source(replica)
    put(store, [("c", "q", 12, 0, 7)], 5)  # c@12 again, a version pending in the replica
    with no_reinit():
        assert replica.sync().rows == 1
    assert newest(spark, replica.path)[0] == "MERGE"  # the replica's own pending rows: replaced by version
    assert_follows_source(replica)
    pending = replica.table().where(F.col("segment") == F.lit(PENDING_SEGMENT)).count()
    assert replica.seal().rows_written >= pending == 5  # its own seal, on its own schedule
    assert replica.table().where(F.col("segment") == F.lit(PENDING_SEGMENT)).count() == 0
    assert_follows_source(replica)


def test_a_shard_replica_reads_batches_of_a_column_mapped_source_by_its_metadata(
    spark: SparkSession, tmp_path
) -> None:
    # A batch's rows are read from the files it added, with the source's metadata at the sync's start
    # when no commit after the batch may have changed the schema (else from its Change Data Feed). The
    # source's files name its columns by physical names (col-<uuid>) that only its metadata maps.
    with delta_ops.session_confs(spark, {MAPPING_DEFAULT: "name"}):
        store, replica = synced_replica(spark, tmp_path, Shard(0, 1))
    data_file = next(Path(store.path).rglob("*.parquet"))
    assert all(c.startswith("col-") for c in spark.read.parquet(str(data_file)).columns)
    put(store, [("c", "y", 10, 0, 2), ("d", "y", 11, 0, 3)], 1)
    with no_reinit():
        assert replica.sync().rows == 2
    assert_follows_source(replica)
    put(store, [("c", "z", 12, 0, 4)], 2)
    put(store, [("e", "x", 13, 0, 5)], 3)
    # Read by the feed: a commit after the batches set a property.
    retention = "'delta.logRetentionDuration' = '60 days'"
    spark.sql(f"ALTER TABLE delta.`{store.path}` SET TBLPROPERTIES ({retention})")
    with no_reinit():
        assert replica.sync().rows == 2
    assert_follows_source(replica)


def test_maintain_seals_compacts_and_vacuums_registered_replicas_on_the_due_rules(
    spark: SparkSession, tmp_path
) -> None:
    store, shard = synced_replica(spark, tmp_path, Shard(0, 1))
    put(store, [("a", "y", 10, 0, 2)], 1)
    shard.sync()
    done = maintain_replicas(spark, store.path, seal_min_rows=5, optimize_min_files=0, vacuum_interval=HOUR)
    # a@10, appended to its pending partition (a@0's new bound, the source's re-bound, changes no read):
    # 1 of the 5 rows that make a seal due.
    assert done[shard.path]["seal"] == "skipped, 1 of 5 pending rows"
    done = maintain_replicas(spark, store.path, seal_min_rows=1, optimize_min_files=0, vacuum_interval=HOUR)
    assert done[shard.path]["seal"].endswith(" rows") and "younger" in done[shard.path]["vacuum"]
    assert VersionedStore.open(spark, shard.path).pending_commits() == 0
    with no_reinit():
        assert shard.sync().versions == 0  # its own seal is no foreign write
    put(store, [("b", "y", 11, 0, 3)], 2)
    with no_reinit():
        shard.sync()
    assert_follows_source(shard)
    assert done[shard.path]["checkpoint"].startswith("skipped, ")
    for n in range(CHECKPOINT_EVERY):  # source commits that change no read: each sync commits its checkpoint
        spark.sql(f"ALTER TABLE delta.`{store.path}` SET TBLPROPERTIES ('note' = '{n}')")
        shard.sync()
    assert checkpoint_version(spark, shard.path) == -1  # its syncs wrote none (their interval is 100)
    done = maintain_replicas(spark, store.path, seal_min_rows=1, optimize_min_files=0, vacuum_interval=HOUR)
    assert done[shard.path]["checkpoint"] == "done"
    assert checkpoint_version(spark, shard.path) == latest_version(spark, shard.path)


def checkpoint_version(spark: SparkSession, path: str) -> int:
    """The version of the newest checkpoint in the table's log (-1: none)."""
    return int(latest_snapshot(spark, path).logSegment().checkpointProvider().version())


def latest_version(spark: SparkSession, path: str) -> int:
    return int(latest_snapshot(spark, path).version())


def test_replica_refuses_writes_and_a_source_without_change_feed_is_refused(
    spark: SparkSession, tmp_path
) -> None:
    store = create_store(spark, str(tmp_path / "src"), RETENTION_MS, INTERVAL_MS)
    replica = Replica.create(spark, store.path, str(tmp_path / "r"))
    replica.sync()
    with pytest.raises(ReadOnlyReplicaError, match="read-only replica"):
        VersionedStore.open(spark, replica.path).put("a", "x", at(100))
    spark.sql(f"ALTER TABLE delta.`{store.path}` SET TBLPROPERTIES (delta.enableChangeDataFeed = false)")
    with pytest.raises(ChangeDataFeedDisabledError, match="enableChangeDataFeed"):
        Replica.create(spark, store.path, str(tmp_path / "r2"))


def test_checkpoint_the_source_no_longer_covers_reinitializes_with_a_warning(
    spark: SparkSession, tmp_path, retention_check_off: None
) -> None:
    store, replica = synced_replica(spark, tmp_path, Shard(0, 1))
    put(store, [("a", "y", 10, 0, 2)], 1)
    DeltaTable.forPath(spark, store.path).vacuum(0)  # a plain VACUUM of everything unreferenced
    assert not replica.lag().covered
    with pytest.warns(ReplicaReinitializedWarning, match="VACUUM"):
        result = replica.sync()
    assert result.restored and result.reinitialized_because
    assert_follows_source(replica)


def test_a_rebuild_at_a_limit_whose_files_were_vacuumed_is_refused_in_one_line(
    spark: SparkSession, tmp_path, retention_check_off: None
) -> None:
    store = create_store(spark, str(tmp_path / "src"), RETENTION_MS, INTERVAL_MS)
    # Single puts: with nothing pending, each goes straight into its segment.
    store.put("a", "x", at(0))  # version 1
    replica = Replica.create(spark, store.path, str(tmp_path / "r"), Shard(0, 1))
    replica.sync()
    store.put("a", "y", at(10))  # version 2: a@0 ends at 10, in segment 2
    store.put("z", "z", at(100))  # stream time 100: segments below 16 are expired
    assert store.expire().first_live_segment == 16
    DeltaTable.forPath(spark, store.path).vacuum(0)  # a@0's file is gone
    version = DeltaTable.forPath(spark, replica.path).history(1).first()["version"]
    with pytest.raises(InvalidInputError, match=r"cannot be built at version 2 .*vacuumed") as raised:
        replica.sync(limit=2)
    assert "\n" not in str(raised.value) and replica.checkpoint() == 1
    assert DeltaTable.forPath(spark, replica.path).history(1).first()["version"] == version
    with pytest.warns(ReplicaReinitializedWarning):
        replica.sync()
    assert_follows_source(replica)


def test_a_foreign_write_to_the_replica_is_detected_and_repaired(spark: SparkSession, tmp_path) -> None:
    store, replica = synced_replica(spark, tmp_path, records=[("a", "x", 0, 0, 0)])
    spark.sql(f"DELETE FROM delta.`{replica.path}` WHERE k = 'a'")  # bypasses the stores' guard
    put(store, [("b", "x", 5, 0, 1)], 1)
    with pytest.warns(ReplicaReinitializedWarning, match="not written by its sync"):
        replica.sync()
    assert_equals_source(replica)


def test_a_store_commit_that_is_no_batch_drop_or_seal_reinitializes_a_shard_replica(
    spark: SparkSession, tmp_path
) -> None:
    store, replica = synced_replica(spark, tmp_path, Shard(0, 1))
    assert store.pending_commits() > 0
    store.seal()
    sealed = json.loads(DeltaTable.forPath(spark, store.path).history(1).first()["userMetadata"])
    assert sealed["lakehouse"]["operation"] == SEAL_OPERATION  # what the replica skips it by
    with no_reinit():
        assert replica.sync().rows == 0
    # A commit of the store that changes rows and says no operation (as seals did before they said so):
    # its effect on reads is unknown, so the replica must rebuild, never skip it.
    del sealed["lakehouse"]["operation"]
    assert sealed["lakehouse"]["app_id"] == STORE_APP_ID
    spark.conf.set(USER_METADATA, json.dumps(sealed))
    try:
        spark.sql(f"DELETE FROM delta.`{store.path}` WHERE k = 'b'")
    finally:
        spark.conf.unset(USER_METADATA)
    with pytest.warns(ReplicaReinitializedWarning, match="neither a batch, a drop nor a read-neutral"):
        assert replica.sync().restored
    assert_follows_source(replica)
    assert VersionedStore.open(spark, replica.path).get("b") is None


def test_vacuum_keeps_what_a_registered_replica_needs_within_its_max_lag(
    spark: SparkSession, tmp_path, retention_check_off: None
) -> None:
    assert_vacuum_keeps_what_a_registered_replica_needs(spark, str(tmp_path))


@pytest.mark.slow
@SLOW_SETTINGS
@given(st.floats(0.0, 1.0), st.booleans())
def test_sync_of_a_killed_process_rerun_yields_the_same_replica(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, fraction: float, whole: bool
) -> None:
    root = tmp_path_factory.mktemp("kill")
    # One shard of one partition (its logical changelog), or the whole table (the source's files copied).
    store, replica = synced_replica(spark, root, None if whole else Shard(0, 1))
    put(store, [("a", "y", 40, 0, 2), ("c", "y", 41, 0, 3)], 1)
    store.expire()
    put(store, [("b", None, 50, 0, 4)], 2)
    marker = root / "marker"
    child = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).with_name("sync_child.py")),
            replica.path,
            str(marker),
            str(root),
        ],
        env=child_env(PYTHONPATH=str(Path(__file__).parents[2])),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 600
        while not marker.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(fraction * 20)  # somewhere inside the sync (it takes seconds: several Spark jobs)
    finally:
        os.killpg(child.pid, signal.SIGKILL)  # the child's own process group: python and its JVM
        child.wait()
    assert_follows_source(replica)  # whatever committed is a consistent source version
    replica.sync()
    assert (
        replica.checkpoint()
        == store.table().sparkSession.sql(f"DESCRIBE HISTORY delta.`{store.path}` LIMIT 1").first()["version"]
    )
    assert_follows_source(replica)
