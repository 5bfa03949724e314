"""Replicas of a versioned store against the pure-Python reference model (tests/reference/replica.py).

Each example is a whole random sequence of puts, replays, seals, OPTIMIZEs, expiries, VACUUMs (the store's
own, and one that deletes every file the latest version does not use) of the source, syncs of either of two
shards with random limits, and seals and OPTIMIZEs of either replica at independent points; after every
sync the real replica's result, checkpoint, rows (its own layout of the source's versions) and lag equal
the model's, and at the end reads through each replica equal the source's.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from delta.tables import DeltaTable
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse import delta_ops
from lakehouse.replica import Replica, ReplicaReinitializedWarning, Shard
from lakehouse.versioned import VersionedStore
from lakehouse.versioned.pending import PENDING_SEGMENT
from tests.reference.replica import Lag, LogicalReplicaModel, Synced, VersionedSource
from tests.replica.helpers import assert_reads_equal
from tests.versioned.helpers import batch_frame, create_store

RETENTION_MS = 20
INTERVAL_MS = 5
SHARDS = 2
# Two keys per shard of Spark's pmod(hash(key), 2) (checked by the key_shard fixture).
KEYS = ("a", "b", "c", "g")
RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"
MAINTENANCE = ("seal", "optimize", "expire", "vacuum", "vacuum_all")
RECORDS = st.lists(
    st.tuples(st.sampled_from(KEYS), st.sampled_from(["x", "y", None]), st.integers(0, 60)),
    min_size=1,
    max_size=4,
)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), RECORDS),
        st.tuples(st.sampled_from(["replay", *MAINTENANCE]), st.none()),
        st.tuples(
            st.just("sync"), st.tuples(st.integers(0, SHARDS - 1), st.one_of(st.none(), st.integers(0, 12)))
        ),
        st.tuples(st.sampled_from(["seal_replica", "optimize_replica"]), st.integers(0, SHARDS - 1)),
    ),
    min_size=3,
    max_size=6,
)


@pytest.fixture(scope="module")
def key_shard(spark: SparkSession) -> dict[str, int]:
    """Each test key's shard as the replica computes it (Spark's Murmur3 ``hash`` pmod the shards)."""
    row = spark.range(1).select(*[F.pmod(F.hash(F.lit(k)), F.lit(SHARDS)).alias(k) for k in KEYS]).first()
    shards = row.asDict()
    assert sorted(shards.values()) == [0, 0, 1, 1], shards
    return shards


def replica_rows(replica: Replica) -> list[tuple[Any, ...]]:
    """The replica's rows as the model's ``(key, valid_from ms, valid_to ms, value or None, pending)``."""
    frame = replica.table().select(
        "k",
        F.unix_millis("valid_from"),
        F.unix_millis("valid_to"),
        F.when(~F.col("tombstone"), F.col("v")),
        F.col("segment").eqNullSafe(F.lit(PENDING_SEGMENT)),
    )
    return sorted((tuple(r) for r in frame.collect()), key=repr)


def assert_sync_matches(replica: Replica, model: LogicalReplicaModel, limit: int | None) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = replica.sync(limit)
    expected = model.sync(limit)
    found = Synced(
        result.checkpoint_before,
        result.checkpoint,
        result.versions,
        result.rows,
        result.partition_drops,
        result.commits,
        result.restored,
        result.reinitialized_because is not None,
    )
    assert found == expected, f"sync({limit}) of shard {replica.shard}"
    warned = any(issubclass(w.category, ReplicaReinitializedWarning) for w in caught)
    assert warned == expected.reinitialized
    assert replica_rows(replica) == sorted(model.table.rows(), key=repr)
    lag = replica.lag()
    assert Lag(lag.checkpoint, lag.source_version, lag.versions, lag.rows, lag.covered) == model.lag()


def servable(model: LogicalReplicaModel, limit: int | None) -> int | None:
    """``limit``, or None (the latest) when the sync would restore at a version older than the last VACUUM
    RETAIN 0 HOURS: that version's files may be gone, and the restore then fails with Delta's
    FILE_NOT_EXIST instead of re-initializing (a gap reported on issue 13; never a wrong replica)."""
    source = model.source.source
    target = source.latest if limit is None else min(limit, source.latest)
    checkpoint = model.checkpoint
    restores = checkpoint is None or (target > checkpoint and not source.covers(checkpoint))
    return None if restores and target < source.covered_from else limit


def vacuum_everything(spark: SparkSession, path: str) -> None:
    """A plain VACUUM RETAIN 0 HOURS (registry or not): every file the latest version does not use goes."""
    spark.conf.set(RETENTION_CHECK, "false")
    try:
        DeltaTable.forPath(spark, path).vacuum(0)
    finally:
        spark.conf.unset(RETENTION_CHECK)


# Every path at least once: a restore, a seal and a partition drop inside a synced range, the replica's own
# seal with versions pending on both sides, a limit below the checkpoint and one beyond the latest version,
# a checkpoint VACUUM no longer covers (re-initialized).
RICH_EXAMPLE = [
    ("put", [("a", "x", 0), ("b", "y", 1), ("c", "x", 2)]),
    ("sync", (0, None)),
    ("put", [("a", "y", 10), ("g", None, 12), ("c", "y", 51)]),
    ("seal", None),
    ("put", [("a", "z", 5), ("b", "w", 52)]),
    ("expire", None),
    ("sync", (0, 9)),
    ("seal_replica", 0),
    ("put", [("a", "v", 53), ("c", None, 52)]),
    ("sync", (0, 1)),
    ("sync", (0, None)),
    ("vacuum_all", None),
    ("sync", (1, 5)),
]


@pytest.mark.slow
@settings(
    max_examples=1,  # plus the explicit example: each one is a whole sequence (about a minute)
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(OPS)
@example(RICH_EXAMPLE)
def test_replicas_match_the_reference_model(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, key_shard: dict[str, int], ops
) -> None:
    root = tmp_path_factory.mktemp("rm")
    store = create_store(spark, str(root / "src"), RETENTION_MS, INTERVAL_MS)
    source = VersionedSource(RETENTION_MS, INTERVAL_MS)
    replicas = [
        Replica.create(spark, store.path, str(root / f"r{p}"), Shard(p, SHARDS)) for p in range(SHARDS)
    ]
    models = [LogicalReplicaModel(source, lambda row, p=p: key_shard[row[0]] == p) for p in range(SHARDS)]
    batch_id, offset, last = 0, 0, None
    for op, arg in ops:
        if op == "put":
            records = [(k, v, ms, 0, offset + i) for i, (k, v, ms) in enumerate(arg)]
            offset += len(records)
            last = (records, batch_id)
            store.put_all(batch_frame(spark, records), batch_id=batch_id)
            source.put_all(arg)
            batch_id += 1
        elif op == "replay" and last is not None:
            store.put_all(batch_frame(spark, last[0]), batch_id=last[1])  # committed already: no commit
        elif op in MAINTENANCE:
            maintain(spark, store, source, op)
        elif op == "seal_replica" and models[arg].checkpoint is not None:
            replicas[arg].seal()
            models[arg].seal()
        elif op == "optimize_replica" and models[arg].checkpoint is not None:
            DeltaTable.forPath(spark, replicas[arg].path).optimize().executeCompaction()
        elif op == "sync":
            shard, limit = arg
            assert_sync_matches(replicas[shard], models[shard], servable(models[shard], limit))
    assert delta_ops.latest_version(DeltaTable.forPath(spark, store.path)) == source.source.latest
    for replica, model in zip(replicas, models, strict=True):
        assert_sync_matches(replica, model, None)
        assert replica.checkpoint() == model.checkpoint  # as the replica's Delta state records it
        assert VersionedStore.open(spark, replica.path).stream_time == store.stream_time
        assert_reads_equal(replica)
    everything = source.reads(source.source.latest, lambda row: True)
    assert models[0].reads() | models[1].reads() == everything


def maintain(spark: SparkSession, store: VersionedStore, source: VersionedSource, op: str) -> None:
    """The source's maintenance ``op`` on the store and its model."""
    if op == "seal":
        store.seal()
        source.seal()
    elif op == "optimize":
        optimize(spark, store.path, source)
    elif op == "expire":
        store.expire()
        source.expire()
    elif op == "vacuum":
        store.vacuum()
        source.vacuum()
    else:
        vacuum_everything(spark, store.path)
        source.vacuum_everything()


def optimize(spark: SparkSession, path: str, source: VersionedSource) -> None:
    """OPTIMIZE the store: a commit that changes no read, when Delta finds files to compact."""
    before = delta_ops.latest_version(DeltaTable.forPath(spark, path))
    DeltaTable.forPath(spark, path).optimize().executeCompaction()
    if delta_ops.latest_version(DeltaTable.forPath(spark, path)) > before:
        source.source.commit(source.source.rows(), role="neutral", stream_time=source.store.stream_time)
