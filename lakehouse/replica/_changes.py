"""A source's changes between two versions (Delta's Change Data Feed) as ``DataFrame -> DataFrame`` steps.

Each Delta commit is an offset of the changelog; the Change Data Feed gives its rows with ``_change_type``
``insert``, ``update_preimage``, ``update_postimage`` or ``delete`` and ``_commit_version``. Applying a
range of commits to a copy of the table as it was before the range only needs, per row identity, the
last change: an upsert (``insert``/``update_postimage``) or a removal (``delete``). Preimages carry no new
state (each has its postimage in the same commit); within one commit an upsert follows a removal of the
same identity (a rewrite), never the other way round.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from lakehouse.jvm import jvm_class, list_items
from lakehouse.replica._files import action_kind

CHANGE_TYPE = "_change_type"
COMMIT_VERSION = "_commit_version"
COMMIT_TIMESTAMP = "_commit_timestamp"
CDF_COLUMNS = (CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP)
INSERT, DELETE = "insert", "delete"
PREIMAGE, POSTIMAGE = "update_preimage", "update_postimage"
# More distinct partition values than this in one change set: the MERGE is not pruned by an IN list.
_MAX_PRUNED_PARTITIONS = 1000


def inserted_rows(spark: SparkSession, snapshot: Any, versions: Sequence[int]) -> DataFrame:
    """The rows that the commits ``versions`` of ``snapshot``'s table added, each with its
    ``_commit_version``: Delta's DataFrame over the data-changing ``AddFile`` actions of those commits (as
    its streaming source reads an append), read with ``snapshot``'s metadata (its column mapping, type
    widening and deletion vectors).

    For commits that only inserted rows, these are the rows of their Change Data Feed (each an ``insert``)
    without the feed's own work: no second look at the table's log, no relation per version. The caller
    makes sure the table's schema is the same in ``snapshot`` as at those commits (but for columns added
    since). Missing log or data files raise Delta's errors, as the feed's read does.
    """
    scala = jvm_class(spark, "scala.jdk.javaapi.CollectionConverters")
    none = jvm_class(spark, "scala.Option").empty()
    log = snapshot.deltaLog()
    wanted = set(versions)
    frames = []
    commits = log.getChanges(min(wanted), max(wanted), none, True)  # a missing commit file raises
    while commits.hasNext():
        commit = commits.next()
        version = int(commit._1())
        if version not in wanted:
            continue
        added = jvm_class(spark, "java.util.ArrayList")()
        for action in list_items(scala.asJava(commit._2())):
            if action_kind(action) == "AddFile" and action.dataChange():
                added.add(action)
        rows = DataFrame(log.createDataFrame(snapshot, scala.asScala(added).toList(), False, none), spark)
        frames.append(rows.withColumn(COMMIT_VERSION, F.lit(version).cast("long")))
    found = frames[0]
    for frame in frames[1:]:
        found = found.unionByName(frame)
    return found


def read_changes(spark: SparkSession, path: str, first: int, last: int) -> DataFrame:
    """The Change Data Feed of the table at ``path`` for versions ``first .. last`` (both inclusive)."""
    return (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", first)
        .option("endingVersion", last)
        .load(path)
    )


@dataclass(frozen=True)
class ChangeStats:
    """One aggregate over a change set: what kinds of change it has and which partitions it touches.

    ``partitions`` are the distinct partition values of every change row (preimages and deletes carry
    the partition a replica row is in now); None when there are too many to list. ``bounds`` maps each
    bound column to its (min, max) over the change rows.
    """

    rows: int
    inserts: int
    updates: int
    deletes: int
    partitions: tuple[Any, ...] | None
    bounds: dict[str, tuple[Any, Any]]

    @property
    def insert_only(self) -> bool:
        return self.updates == 0 and self.deletes == 0


def change_stats(changes: DataFrame, partition_column: str, bound_columns: Sequence[str]) -> ChangeStats:
    """:class:`ChangeStats` of ``changes`` in one Spark job (a one-row aggregate reaches the driver)."""
    kind = F.col(CHANGE_TYPE)
    bounds = [c for c in bound_columns if c in changes.columns]
    row = changes.agg(
        F.count(F.lit(1)).alias("rows"),
        F.count(F.when(kind == INSERT, 1)).alias("inserts"),
        F.count(F.when(kind == POSTIMAGE, 1)).alias("updates"),
        F.count(F.when(kind == DELETE, 1)).alias("deletes"),
        F.slice(F.collect_set(partition_column), 1, _MAX_PRUNED_PARTITIONS + 1).alias("parts"),
        F.max(F.col(partition_column).isNull().cast("int")).alias("null_part"),
        *[F.min(c).alias(f"min_{i}") for i, c in enumerate(bounds)],
        *[F.max(c).alias(f"max_{i}") for i, c in enumerate(bounds)],
    ).first()
    assert row is not None
    parts: tuple[Any, ...] | None = tuple(row["parts"]) + ((None,) if row["null_part"] else ())
    if len(row["parts"]) > _MAX_PRUNED_PARTITIONS:
        parts = None
    return ChangeStats(
        int(row["rows"]),
        int(row["inserts"]),
        int(row["updates"]),
        int(row["deletes"]),
        parts,
        {c: (row[f"min_{i}"], row[f"max_{i}"]) for i, c in enumerate(bounds)},
    )


def net_changes(changes: DataFrame, identity: Sequence[Column]) -> DataFrame:
    """Per row identity, its last change in the range: the row's columns plus ``_change_type``.

    ``_change_type`` is ``delete`` (the row is gone at the end of the range) or an upsert type (the row
    as it is at the end). One window over the changes (a shuffle of the change set, not of the table).
    """
    upsert = F.col(CHANGE_TYPE) != F.lit(DELETE)
    last_first = Window.partitionBy(*identity).orderBy(
        F.col(COMMIT_VERSION).desc(), upsert.cast("int").desc()
    )
    return (
        changes.where(F.col(CHANGE_TYPE) != F.lit(PREIMAGE))
        .withColumn("_lh_rank", F.row_number().over(last_first))
        .where(F.col("_lh_rank") == 1)
        .drop("_lh_rank", COMMIT_VERSION, COMMIT_TIMESTAMP)
    )


def target_pruning(stats: ChangeStats, partition_column: str, alias: str = "t") -> Column:
    """Literal conditions on the replica's rows that a change set can touch (partitions, bound ranges).

    Delta skips whole partitions and files by them (only literal, target-only conditions prune a MERGE).
    """
    condition = F.lit(True)
    if stats.partitions is not None:
        present = [p for p in stats.partitions if p is not None]
        column = F.col(f"{alias}.{partition_column}")
        in_parts = column.isin(present) if present else F.lit(False)
        if None in stats.partitions:
            in_parts = in_parts | column.isNull()
        condition = condition & in_parts
    for column_name, (low, high) in stats.bounds.items():
        if low is not None and high is not None:
            column = F.col(f"{alias}.{column_name}")
            condition = condition & (column >= F.lit(low)) & (column <= F.lit(high))
    return condition
