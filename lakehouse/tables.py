"""What ``lakehouse tables`` and ``lakehouse sql`` see: every table under the warehouse, described and named.

Kind, version, rows and stream time are read from each table itself: ``lakehouse.kind`` from its
properties, the version from its log, rows from the log's file statistics and stream time from the state
object of its kind (a versioned store's or dedup index's own recorded stream time, an assignment store's
latest generation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from lakehouse import delta_ops
from lakehouse.catalog import KIND_PROPERTY, find_tables
from lakehouse.dedup.deduplicator import Deduplicator
from lakehouse.versioned.store import VersionedStore


@dataclass(frozen=True)
class TableInfo:
    """What ``lakehouse tables`` shows of one table."""

    name: str
    path: str
    kind: str
    version: int
    rows: int
    stream_time: str


def describe(spark: SparkSession, name: str, path: str) -> TableInfo:
    """Kind (``lakehouse.kind``, else ``delta``), version, rows and stream time of one table."""
    kind = delta_ops.table_properties(spark, path).get(KIND_PROPERTY, "delta")
    version = delta_ops.latest_version(DeltaTable.forPath(spark, path))
    rows = spark.read.format("delta").load(path).count()  # answered from the log's file statistics
    return TableInfo(name, path, kind, version, rows, _stream_time(spark, kind, path))


def _stream_time(spark: SparkSession, kind: str, path: str) -> str:
    """The table's stream time (or the state's equivalent) read from its own state, as text."""
    if kind == "versioned_store":
        return str(VersionedStore.open(spark, path).stream_time or "-")
    if kind == "dedup_index":
        times = Deduplicator.open(spark, path).stream_times()
        return str(max(times.values())) if times else "-"
    if kind == "assignment_store":
        return _generation(spark, path)
    return "-"


def _generation(spark: SparkSession, path: str) -> str:
    row: Any = spark.read.format("delta").load(path).agg({"generation": "max"}).first()
    return "-" if row is None or row[0] is None else f"generation {row[0]}"


def describe_all(spark: SparkSession, root: str) -> list[TableInfo]:
    """:func:`describe` of every table under ``root``, in name order."""
    return [describe(spark, name, path) for name, path in find_tables(spark, root).items()]


def register_all(spark: SparkSession, root: str) -> list[str]:
    """Register every table under ``root`` as a temporary view of its name (stores also get ``<name>_as_of``).

    Returns the names registered.
    """
    names = []
    for name, path in find_tables(spark, root).items():
        kind = delta_ops.table_properties(spark, path).get(KIND_PROPERTY)
        if kind == "versioned_store":
            VersionedStore.open(spark, path).register(name)
            names += [name, f"{name}_as_of"]
        else:
            delta_ops.register_table(spark, name, path, temporary=True)
            names.append(name)
    return names
