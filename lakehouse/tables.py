"""What ``lakehouse tables`` and ``lakehouse sql`` see: every table under the warehouse, described and named.

Kind, version, rows and stream time are read from each table itself: ``lakehouse.kind`` from its
properties, the version from its log, rows from the log's file statistics and stream time from the state
object of its kind (a versioned store's or dedup index's own recorded stream time, an assignment store's
latest generation).

:func:`describe_all_local` does the same without a JVM through delta-rs (:mod:`lakehouse.read`), for a
local warehouse whose tables delta-rs reads right; :func:`describe_all` is the Spark path (any file system).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from lakehouse import delta_ops
from lakehouse.catalog import KIND_PROPERTY, find_tables
from lakehouse.dedup.deduplicator import Deduplicator
from lakehouse.read.engine import find_local_tables, open_table, recorded_state_of, run_sql
from lakehouse.times import from_micros
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
        return format_time(VersionedStore.open(spark, path).stream_time)
    if kind == "dedup_index":
        times = Deduplicator.open(spark, path).stream_times()
        return format_time(max(times.values())) if times else "-"
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


def describe_all_local(root: str) -> list[TableInfo]:
    """:func:`describe_all` through delta-rs, without a JVM, for the local folder ``root``.

    Raises:
        EngineUnsupportedError: a table delta-rs cannot read right (before any is described).
    """
    tables = {name: open_table(path) for name, path in find_local_tables(root).items()}
    infos = []
    for name, table in tables.items():
        kind = table.metadata().configuration.get(KIND_PROPERTY, "delta")
        rows = run_sql({"t": table}, "SELECT count(*) AS n FROM t").column("n")[0].as_py()
        info = TableInfo(name, table.table_uri, kind, table.version(), rows, _local_stream_time(table, kind))
        infos.append(info)
    return infos


def _local_stream_time(table: Any, kind: str) -> str:
    """:func:`_stream_time` of a delta-rs table, from its commit metadata (or its largest generation)."""
    if kind in _STATE_OF:
        app_id, field = _STATE_OF[kind]
        found = recorded_state_of(table, app_id, (field,)).get(field)
        times = list(found.values()) if isinstance(found, dict) else [] if found is None else [found]
        return format_time(from_micros(int(max(times)))) if times else "-"
    if kind == "assignment_store":
        top = run_sql({"t": table}, "SELECT max(generation) AS g FROM t").column("g")[0].as_py()
        return "-" if top is None else f"generation {top}"
    return "-"


# The app id and state field of each kind's stream time (a dedup index keeps one per task).
_STATE_OF = {
    "versioned_store": ("lakehouse.versioned_store", "stream_time_us"),
    "dedup_index": ("lakehouse.dedup", "stream_time_us"),
}


def format_time(value: datetime | None) -> str:
    """A time as ISO-8601 with its zone (``2024-01-01 00:30:00+00:00``; a naive one is the local time of
    this process, as PySpark returns timestamps), or ``-``."""
    if value is None:
        return "-"
    return value.astimezone(UTC).isoformat(sep=" ")
