"""The replicas registered with a source, and a VACUUM of the source that keeps what they still need.

The registry is a small Delta table beside the source, at ``<source path>__replicas`` (a table inside the
source's folder would be taken for one of its partitions): one row per registration (appends only; the
newest row of a replica path wins; an unregistered path has a row with ``active`` false).
"""

from __future__ import annotations

import math
import warnings
from datetime import UTC, datetime, timedelta

from delta.tables import DeltaTable
from pyspark.sql import SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse import delta_ops
from lakehouse.paths import resolve_path
from lakehouse.replica import _history
from lakehouse.replica.records import VacuumReport

REGISTRY_SUFFIX = "__replicas"
_SCHEMA = T.StructType(
    [
        T.StructField("replica_path", T.StringType(), nullable=False),
        T.StructField("shard", T.StringType()),
        T.StructField("max_lag_us", T.LongType()),
        T.StructField("active", T.BooleanType()),
        T.StructField("registered_at", T.TimestampType()),
    ]
)
_US = timedelta(microseconds=1)


class ReplicaBeyondRetentionWarning(UserWarning):
    """A VACUUM of a source did not keep the changes of a replica further behind than its ``max_lag``."""


def registry_path(source_path: str) -> str:
    """Where the registry of the source at ``source_path`` lives."""
    return f"{source_path.rstrip('/')}{REGISTRY_SUFFIX}"


def register(
    spark: SparkSession, source_path: str, replica_path: str, shard: str, max_lag: timedelta
) -> None:
    """Record the replica with its source (an append; nothing if it is registered with the same settings)."""
    path = registry_path(source_path)
    delta_ops.ensure_table(spark, path, _SCHEMA, properties={"lakehouse.kind": "replica_registry"})
    current = registered(spark, source_path).get(replica_path)
    if current == (shard, max_lag // _US):
        return
    _append(spark, path, replica_path, shard, max_lag // _US, True)


def unregister(spark: SparkSession, source_path: str, replica_path: str) -> None:
    """Mark the replica as no longer registered (its changes are no longer kept by VACUUM)."""
    if replica_path in registered(spark, source_path):
        _append(spark, registry_path(source_path), replica_path, None, None, False)


def _append(
    spark: SparkSession, path: str, replica: str, shard: str | None, max_lag_us: int | None, active: bool
) -> None:
    row = (replica, shard, max_lag_us, active, datetime.now(UTC))
    spark.createDataFrame([row], _SCHEMA).coalesce(1).write.format("delta").mode("append").save(path)


def registered(spark: SparkSession, source_path: str) -> dict[str, tuple[str, int]]:
    """Replica path -> (shard, max_lag in microseconds) of every active registration (a small collect)."""
    path = registry_path(source_path)
    if not DeltaTable.isDeltaTable(spark, path):
        return {}
    newest = Window.partitionBy("replica_path").orderBy(F.desc("registered_at"))
    rows = (
        spark.read.format("delta")
        .load(path)
        .withColumn("_n", F.row_number().over(newest))
        .where((F.col("_n") == 1) & F.col("active"))
        .collect()
    )
    return {r["replica_path"]: (r["shard"], int(r["max_lag_us"])) for r in rows}


def vacuum_source(spark: SparkSession, source_path: str, now: datetime | None = None) -> VacuumReport:
    """VACUUM the source, keeping every file a registered replica within its ``max_lag`` still needs.

    The retention is the table's own (``delta.deletedFileRetentionDuration``), stretched to the oldest
    commit such a replica still has to apply (minus the history's write margin). A replica further behind
    than its ``max_lag`` is not protected: it is reported (and warned about), and its next sync
    re-initializes it.
    """
    from lakehouse.replica.replica import Replica  # the replica module imports this one

    source_path = resolve_path(source_path)
    now = now or datetime.now(UTC)
    table = DeltaTable.forPath(spark, source_path)
    default_hours = _default_retention_hours(spark, source_path)
    commits = _history.source_commits(spark, source_path)
    times = {c.version: c.timestamp.replace(tzinfo=UTC) for c in commits}
    needed_since: datetime | None = None
    protected, beyond = [], []
    for path, (_, max_lag_us) in sorted(registered(spark, source_path).items()):
        if not DeltaTable.isDeltaTable(spark, path):
            continue
        checkpoint = Replica.open(spark, path).checkpoint()
        first_needed = times.get((checkpoint if checkpoint is not None else -2) + 1)
        if checkpoint is None or checkpoint + 1 not in times:
            continue  # restores from a snapshot (nothing held) or is caught up
        assert first_needed is not None
        if first_needed < now - timedelta(microseconds=max_lag_us):
            beyond.append(path)
            continue
        protected.append(path)
        since = first_needed - _history.WRITE_MARGIN
        needed_since = since if needed_since is None else min(needed_since, since)
    hours = default_hours
    if needed_since is not None:
        hours = max(hours, math.ceil((now - needed_since) / timedelta(hours=1) * 1000) / 1000)
    for path in beyond:
        warnings.warn(
            f"VACUUM of {source_path} does not keep the changes replica {path} needs (further behind than "
            "its max_lag): its next sync re-initializes it",
            ReplicaBeyondRetentionWarning,
            stacklevel=2,
        )
    table.vacuum(hours)
    row = table.history(1).select("operationMetrics").first()
    deleted = int((row["operationMetrics"] or {}).get("numDeletedFiles", 0)) if row is not None else 0
    return VacuumReport(deleted, hours, tuple(protected), tuple(beyond))


def _default_retention_hours(spark: SparkSession, path: str) -> float:
    """The table's ``delta.deletedFileRetentionDuration`` in hours (Delta's default: one week)."""
    text = delta_ops.table_detail(spark, path)["properties"].get("delta.deletedFileRetentionDuration")
    if text is None:
        return 7 * 24.0
    row = spark.sql(f"SELECT unix_micros(TIMESTAMP'1970-01-01 00:00:00Z' + {text}) AS us").first()
    assert row is not None
    return int(row["us"]) / 3_600_000_000
