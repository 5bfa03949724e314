"""The replicas registered with a source, and a VACUUM of the source that keeps what they still need.

The registry is a small Delta table beside the source, at ``<source path>__replicas`` (a table inside the
source's folder would be taken for one of its partitions): one row per registration (appends only; the
newest row of a replica path wins; an unregistered path has a row with ``active`` false).
"""

from __future__ import annotations

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
#: Margin over what a protected replica needs: VACUUM stamps its horizon at its own commit, some time after
#: the decision here, and a replica's coverage check compares against that horizon.
_PLANNING_SLACK = timedelta(minutes=10)


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
    """VACUUM the source with its own retention, unless a registered replica within its ``max_lag`` needs
    files that VACUUM would delete.

    The retention is the table's own (``delta.deletedFileRetentionDuration``): Delta forgets removed files
    older than it, so a longer ``RETAIN`` cannot keep them. A replica behind, but within its ``max_lag``,
    needs the files of every commit after its checkpoint (written up to the history's write margin before
    the commit, plus a slack until VACUUM commits). If any such replica needs files older than the
    retention, nothing is vacuumed and the report says which replicas held it back (raise the retention
    or sync them). A replica further behind than its ``max_lag`` is not protected: it is reported (and
    warned about), and its next sync re-initializes it.
    """
    from lakehouse.replica.replica import Replica  # the replica module imports this one

    source_path = resolve_path(source_path)
    now = now or datetime.now(UTC)
    hours = file_retention_hours(spark, source_path)
    horizon = now - timedelta(hours=hours)
    commits = _history.source_commits(spark, source_path)
    times = {c.version: c.timestamp.replace(tzinfo=UTC) for c in commits}
    protected, beyond, holding = [], [], []
    for path, (_, max_lag_us) in sorted(registered(spark, source_path).items()):
        if not DeltaTable.isDeltaTable(spark, path):
            continue
        checkpoint = Replica.open(spark, path).checkpoint()
        if checkpoint is None or checkpoint + 1 not in times:
            continue  # restores from a snapshot (nothing held) or is caught up
        first_needed = times[checkpoint + 1]
        if first_needed < now - timedelta(microseconds=max_lag_us):
            beyond.append(path)
            continue
        protected.append(path)
        if first_needed - _history.WRITE_MARGIN - _PLANNING_SLACK <= horizon:
            holding.append(path)
    for path in beyond:
        warnings.warn(
            f"VACUUM of {source_path} does not keep the changes replica {path} needs (further behind than "
            "its max_lag): its next sync re-initializes it",
            ReplicaBeyondRetentionWarning,
            stacklevel=2,
        )
    if holding:
        return VacuumReport(0, hours, tuple(protected), tuple(beyond), tuple(holding))
    deleted = delta_ops.vacuum(spark, source_path, hours)
    return VacuumReport(deleted, hours, tuple(protected), tuple(beyond), ())


def file_retention_hours(spark: SparkSession, path: str) -> float:
    """The table's ``delta.deletedFileRetentionDuration`` in hours (Delta's default: one week)."""
    text = delta_ops.table_metadata(spark, path).properties.get("delta.deletedFileRetentionDuration")
    if text is None:
        return 7 * 24.0
    row = spark.sql(f"SELECT unix_micros(TIMESTAMP'1970-01-01 00:00:00Z' + {text}) AS us").first()
    assert row is not None
    return int(row["us"]) / 3_600_000_000
