"""Replicas in a cluster: real lags for the assignor, Kafka's restore order, the failover drill."""

from __future__ import annotations

import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from lakehouse.assignment import AssignmentStore, ClientAssignment, ClientState, Role
from lakehouse.replica import Replica, Shard
from lakehouse.replica.failover import catch_up, generated_drill, task_lags
from tests.replica.helpers import assert_follows_source
from tests.versioned.helpers import batch_frame, create_store


def _last_commit_time(path: str, spark: SparkSession):
    return DeltaTable.forPath(spark, path).history(1).first()["timestamp"]


def test_lags_come_from_real_replicas_and_actives_catch_up_first(spark: SparkSession, tmp_path) -> None:
    store = create_store(spark, str(tmp_path / "src"), 1000, 100)
    store.put_all(batch_frame(spark, [("a", "x", 0, 0, 0), ("b", "x", 1, 0, 1)]), batch_id=0)
    replicas = {
        Shard(p, 2).task(): Replica.create(spark, store.path, str(tmp_path / f"r{p}"), Shard(p, 2))
        for p in (0, 1)
    }
    assert task_lags(replicas) == {}  # nothing held yet: the assignor's "no local state"
    held = ClientAssignment(active=frozenset({"0_1"}), standby=frozenset({"0_0"}))
    done = catch_up(held, replicas)
    assert [(task, role) for task, role, _ in done] == [("0_1", Role.ACTIVE), ("0_0", Role.STANDBY)]
    assert _last_commit_time(replicas["0_1"].path, spark) <= _last_commit_time(replicas["0_0"].path, spark)
    store.put_all(batch_frame(spark, [("c", "y", 5, 0, 2)]), batch_id=1)
    lags = task_lags(replicas)
    assert lags == {"0_0": 1, "0_1": 1}
    assignments = AssignmentStore.create(spark, str(tmp_path / "assignment"))
    client = ClientState("c1", prev_active=held.active, prev_standby=held.standby, task_lags=lags)
    assignments.write_subscriptions(1, {"c1": client}, ["0_0", "0_1"])
    assert dict(assignments.subscription(1).clients["c1"].task_lags) == lags
    for replica in replicas.values():
        replica.sync()
        assert_follows_source(replica)
    assert task_lags(replicas) == {"0_0": 0, "0_1": 0}


@pytest.mark.slow
def test_failover_drill_promotes_the_caught_up_standby(spark: SparkSession, tmp_path) -> None:
    lines: list[str] = []
    report = generated_drill(spark, str(tmp_path), keys=20, batches=3, echo=lines.append)
    assert report.promoted != report.lost
    assert report.promoted_held_replica, lines
    assert report.catch_up.versions >= 1 and not report.catch_up.restored
    assert report.reads_equal
    assert report.cold_restore.checkpoint == report.catch_up.checkpoint
    assert report.cold_restore.restored and report.cold_restore.rows > 0
    assert any("catch-up" in line and "cold restore" in line for line in lines)
