"""Replicas in a cluster: lags for the assignor, Kafka's restore order, and a failover drill.

- :func:`task_lags` turns the replicas a client holds into its ``ClientState.task_lags`` (versions
  behind; a task it holds nothing of, or nothing it can catch up from, is absent: the assignor's "no
  local state"), so caught-up and warm-up decisions follow real replicas.
- :func:`catch_up` syncs a client's replicas in Kafka's restore order (seed 003): every active task's
  replica first; standbys and warm-ups only once all actives are caught up.
- :func:`run_failover_drill`: a cluster of clients holding replicas of a real store loses the client of
  an active task; the next assignment promotes the caught-up standby, which syncs the remaining versions
  and serves reads equal to the source; its catch-up time is printed next to a cold restore of the shard.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse.assignment import (
    AssignmentConfig,
    AssignmentResult,
    AssignmentStore,
    ClientAssignment,
    ClientState,
    Role,
    assign,
    sorted_tasks,
)
from lakehouse.errors import InvalidInputError
from lakehouse.replica._source import Shard
from lakehouse.replica.records import SyncResult
from lakehouse.replica.replica import Replica
from lakehouse.versioned._plan import VALID_TO
from lakehouse.versioned.segments import SEGMENT_COL
from lakehouse.versioned.store import VersionedStore

DRILL_CONFIG = AssignmentConfig(num_standby_replicas=1, acceptable_recovery_lag=100)
DRILL_CLIENTS = ("c0", "c1", "c2")


def task_lags(replicas: Mapping[str, Replica]) -> dict[str, int]:
    """Task -> source versions behind, for each task whose replica the client can catch up from.

    A task whose replica holds nothing (no checkpoint, or one the source no longer covers) is left out,
    as is every task the client holds no replica of: ``ClientState`` reads an absent task as "no local
    state" (Kafka: offset sum 0, a full restore).
    """
    lags = {}
    for task, replica in replicas.items():
        behind = replica.versions_behind()
        if behind is not None:
            lags[task] = behind
    return lags


def catch_up(held: ClientAssignment, replicas: Mapping[str, Replica]) -> list[tuple[str, Role, SyncResult]]:
    """Sync a client's replicas in Kafka's restore order; returns (task, role, result) in the order run.

    Active tasks' replicas are synced first (task order); standby and warm-up replicas only after every
    active one has caught up. A failing active sync raises before any standby is touched.
    """
    done = []
    for task in sorted_tasks(held.active):
        done.append((task, Role.ACTIVE, replicas[task].sync()))
    for role, tasks in ((Role.STANDBY, held.standby), (Role.WARMUP, held.warmup)):
        for task in sorted_tasks(tasks):
            done.append((task, role, replicas[task].sync()))
    return done


@dataclass(frozen=True)
class DrillReport:
    """What :func:`run_failover_drill` saw.

    Attributes:
        task: The task whose active client died.
        lost: The client that died.
        promoted: The client the next generation made active for ``task``.
        promoted_held_replica: Whether ``promoted`` held a replica of ``task`` before (not a cold client).
        catch_up: The promoted replica's sync of the remaining versions.
        cold_restore: A restore of the same shard from nothing.
        reads_equal: Whether the promoted replica's rows equal the source's shard at its checkpoint.
        lines: Printable summary.
    """

    task: str
    lost: str
    promoted: str
    promoted_held_replica: bool
    catch_up: SyncResult
    cold_restore: SyncResult
    reads_equal: bool
    lines: tuple[str, ...]


def run_failover_drill(
    spark: SparkSession,
    root: str,
    store: VersionedStore,
    batches: Sequence[DataFrame],
    partitions: int = 2,
    put: Callable[[VersionedStore, DataFrame, int], None] | None = None,
    echo: Callable[[str], None] = print,
) -> DrillReport:
    """Run the drill under ``root`` on ``store``, fed ``batches`` (batch ids = positions, replay-safe).

    All but the last two batches are put before the clients start; generation 1 assigns ``partitions``
    tasks (one per shard) with one standby to :data:`DRILL_CLIENTS`, and each client creates and syncs
    its replicas (actives first). Then one more batch, which every client syncs; then the last batch,
    which nobody syncs before the active client of task ``0_0`` dies. Generation 2 is assigned from the
    survivors' real replica lags (recorded in the assignment store under ``<root>/assignment``).
    """
    put = put or _put
    for batch_id, batch in enumerate(batches[:-2]):
        put(store, batch, batch_id)
    assignments = AssignmentStore.create(spark, f"{root}/assignment", DRILL_CONFIG)
    tasks = [Shard(p, partitions).task() for p in range(partitions)]
    held: dict[str, dict[str, Replica]] = {pid: {} for pid in DRILL_CLIENTS}
    first = _generation(assignments, 1, {pid: ClientState(pid) for pid in DRILL_CLIENTS}, tasks)
    for pid, roles in first.clients.items():
        for task in roles.roles():
            held[pid][task] = _replica(spark, root, store, pid, task, partitions)
        catch_up(roles, held[pid])
    put(store, batches[-2], len(batches) - 2)
    for pid, roles in first.clients.items():
        catch_up(roles, held[pid])
    put(store, batches[-1], len(batches) - 1)
    task = tasks[0]
    lost = first.active_owners()[task]
    survivors = {
        pid: ClientState(
            pid,
            prev_active=roles.active,
            prev_standby=roles.standby | roles.warmup,
            task_lags=task_lags(held[pid]),
        )
        for pid, roles in first.clients.items()
        if pid != lost
    }
    second = _generation(assignments, 2, survivors, tasks)
    promoted = second.active_owners()[task]
    had_replica = task in held[promoted]
    for new_task in second.clients[promoted].roles():  # tasks it holds from this generation on
        if new_task not in held[promoted]:
            held[promoted][new_task] = _replica(spark, root, store, promoted, new_task, partitions)
    replica = held[promoted][task]
    results = catch_up(second.clients[promoted], held[promoted])
    synced = next(result for t, _, result in results if t == task)
    cold = _replica(spark, root, store, "cold", task, partitions)
    restored = cold.restore(synced.checkpoint)
    equal = _equal_to_source(replica, synced.checkpoint)
    lines = (
        f"[replica] generation 1: {_roles(first.clients)}",
        f"[replica] {lost} (active for {task}) is lost; generation 2 from real replica lags "
        + ", ".join(f"{pid}={dict(state.task_lags)}" for pid, state in survivors.items()),
        f"[replica] generation 2 promotes {promoted} for {task} "
        + ("(it held a standby replica)" if had_replica else "(a cold client)"),
        f"[replica] catch-up of {promoted}'s replica: {synced.versions} versions, {synced.rows} rows in "
        f"{synced.seconds:.1f} s; cold restore of shard {task}: {restored.rows} rows in "
        f"{restored.seconds:.1f} s",
        _why(synced, restored),
        f"[replica] reads from the promoted replica equal the source at version {synced.checkpoint}: {equal}",
    )
    for line in lines:
        echo(line)
    return DrillReport(task, lost, promoted, had_replica, synced, restored, equal, lines)


def _why(catch_up: SyncResult, restore: SyncResult) -> str:
    """What the two timings say: a catch-up costs the changes (the versions the missing batches wrote,
    appended to the standby's pending partition), a restore the whole shard; both pay Delta's fixed cost
    of a commit, which rules a shard of a few rows."""
    if not catch_up.versions:
        return "[replica] the standby had nothing to catch up (this root ran the drill before): no comparison"
    if catch_up.seconds < restore.seconds:
        return (
            f"[replica] the standby applied {catch_up.rows} changed versions "
            f"{restore.seconds / max(catch_up.seconds, 1e-3):.1f}x faster than a restore of the shard's "
            f"{restore.rows} versions: a catch-up costs the changes, a restore the whole shard"
        )
    return (
        f"[replica] at this size ({restore.rows} versions in the shard) both are Delta's fixed cost of a "
        "commit and a few Spark jobs: a catch-up's cost grows with the changes and a restore's with the "
        "shard, so a standby pays off once copying the shard costs more than that"
    )


def _put(store: VersionedStore, batch: DataFrame, batch_id: int) -> None:
    store.put_all(batch, batch_id=batch_id)


def _generation(
    assignments: AssignmentStore, generation: int, clients: Mapping[str, ClientState], tasks: list[str]
) -> AssignmentResult:
    """Record the clients' subscriptions (with their lags) and the assignment of ``generation``."""
    assignments.write_subscriptions(generation, clients, tasks)
    subscription = assignments.subscription(generation)
    result = assign(subscription.clients, subscription.stateful_tasks, (), assignments.config)
    assignments.write_assignment(subscription, result)
    return result


def _replica(
    spark: SparkSession, root: str, store: VersionedStore, pid: str, task: str, partitions: int
) -> Replica:
    partition = int(task.split("_")[1])
    return Replica.create(spark, store.path, f"{root}/clients/{pid}/{task}", Shard(partition, partitions))


def _roles(clients: Mapping[str, ClientAssignment]) -> str:
    return "; ".join(
        f"{pid} active {sorted_tasks(held.active)} standby {sorted_tasks(held.standby | held.warmup)}"
        for pid, held in clients.items()
    )


def live_versions(store: VersionedStore, version: int | None = None) -> DataFrame:
    """The store's versions at table ``version`` (default: now) that a read can return: the latest ones and
    those ending after ``stream_time - R`` then (every read is a function of these, the stream time and
    the retention), without the storage column ``segment``."""
    if version is None:
        version = store.state_version()[0]
    horizon = store.horizon_us_at(version)
    versions = store.versions(version).drop(SEGMENT_COL)
    if horizon is None:
        return versions
    return versions.where(F.col(VALID_TO).isNull() | (F.unix_micros(VALID_TO) > F.lit(horizon)))


def _equal_to_source(replica: Replica, version: int) -> bool:
    """Whether reads through the replica equal the source's at ``version``: the live versions of the shard
    (:func:`live_versions`; rows for a replica that mirrors its source), by two anti-joins, no collect."""
    spark = replica.spark
    if replica._logical():
        source = live_versions(VersionedStore.open(spark, replica.source_path), version)
        mine = live_versions(VersionedStore.open(spark, replica.path))
    else:
        source = spark.read.format("delta").option("versionAsOf", version).load(replica.source_path)
        mine = replica.table()
    shard = source.where(replica._kind().in_shard(replica.shard, source.schema))
    mine = mine.select(*shard.columns)
    return mine.exceptAll(shard).isEmpty() and shard.exceptAll(mine).isEmpty()


#: Source partitions of the drill's generated changelog (records of a key are in one, as Kafka keeps them).
SOURCE_PARTITIONS = 4


def generated_batches(spark: SparkSession, keys: int, batches: int, seed: int = 13) -> list[DataFrame]:
    """``batches`` batches of updates: all ``keys`` keys first, then a tenth of them per batch.

    Columns ``key``, ``value``, ``timestamp``, and ``partition`` (``key`` mod :data:`SOURCE_PARTITIONS`) and
    ``offset`` (increasing across batches) as a Kafka changelog has them: the store orders each partition
    on its own, in parallel (a global sequence would be one Spark task).
    """
    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    frames = []
    for n in range(batches):
        rows = spark.range(keys if n == 0 else max(1, keys // 10)).select(
            (F.col("id") if n == 0 else F.floor(F.rand(seed + n) * keys)).cast("long").alias("key"),
            (F.rand(seed + 100 + n) * 100).alias("value"),
            (F.lit(t0) + F.make_interval(mins=F.lit(n) * 10 + F.col("id") % 10)).alias("timestamp"),
            (F.lit(n) * keys + F.col("id")).alias("offset"),
        )
        rows = rows.withColumn("partition", (F.col("key") % SOURCE_PARTITIONS).cast("int"))
        frames.append(rows)
    return frames


def generated_drill(
    spark: SparkSession, root: str, keys: int = 1000, batches: int = 6, echo: Callable[[str], None] = print
) -> DrillReport:
    """:func:`run_failover_drill` on a generated versioned store at ``<root>/source`` (``lakehouse
    failover-drill``)."""
    if keys < 1 or batches < 3:
        raise InvalidInputError(f"the drill needs keys >= 1 and batches >= 3, got {keys} and {batches}")
    schema = T.StructType([T.StructField("key", T.LongType()), T.StructField("value", T.DoubleType())])
    store = VersionedStore.create(spark, f"{root}/source", "key", schema, timedelta(days=1))
    return run_failover_drill(spark, root, store, generated_batches(spark, keys, batches), echo=echo)
