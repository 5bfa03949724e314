"""Small helpers over delta-spark shared by every stateful primitive: tables, their settings, partitions.

Which batches a writer committed and the state it records are in :mod:`lakehouse.commit_log`; the
replica's commits (which copy a source's metadata) use :func:`commit_options` and :func:`dml_commit`.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse.commit_log import CommitLog, commit_confs, commit_infos, latest_snapshot, parse_metadata
from lakehouse.errors import (
    InvalidInputError,
    LakehouseInternalError,
    ReadOnlyReplicaError,
    StoreSettingsConflictError,
)

# Properties lakehouse writes on its tables; Delta passes keys outside "delta." through unvalidated.
PROPERTY_PREFIX = "lakehouse."
#: Properties a lakehouse state table is created with: its commits' rows stay readable (Delta's Change
#: Data Feed) for replicas (``lakehouse.replica``). Tables created before lack them and keep working.
CHANGE_FEED = {"delta.enableChangeDataFeed": "true"}
#: Marks a table as a read-only replica of the table at the property's value (``lakehouse.replica``).
REPLICA_SOURCE_PROPERTY = f"{PROPERTY_PREFIX}replica.source_path"
# The txn session confs are shared by every thread of a session (delta-io/delta#3934): writes that set
# them are serialized within this process.
_SESSION_TXN_LOCK = threading.Lock()


def ensure_table(
    spark: SparkSession,
    path: str,
    schema: T.StructType,
    *,
    partition_by: tuple[str, ...] = (),
    properties: Mapping[str, str] | None = None,
    created_with: Mapping[str, str] | None = None,
) -> DeltaTable:
    """Create the Delta table at ``path``, or check that the existing one has the same settings.

    ``properties`` are ``lakehouse.*`` settings stored on the table (plus any ``delta.*`` properties).
    ``created_with`` are properties set when the table is created and not checked on an existing one
    (features such as the Change Data Feed, which older tables may lack).
    Creating twice with the same settings is a no-op, so jobs may call this on every run.

    Raises:
        StoreSettingsConflictError: the table exists with another schema, partitioning or setting.
    """
    properties = dict(properties or {})
    if DeltaTable.isDeltaTable(spark, path):
        check_table_settings(spark, path, schema, partition_by, properties)
        return DeltaTable.forPath(spark, path)
    builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(schema)
    if partition_by:
        builder = builder.partitionedBy(*partition_by)
    for key, value in {**(created_with or {}), **properties}.items():
        builder = builder.property(key, value)
    builder.execute()
    return DeltaTable.forPath(spark, path)


FORMAT_VERSION = "1"


def settings_properties(kind: str, settings: Mapping[str, str]) -> dict[str, str]:
    """The ``lakehouse.*`` table properties of a lakehouse table of ``kind`` with these ``settings``.

    ``lakehouse.kind`` and ``lakehouse.format_version`` say what wrote the table; each setting ``name``
    becomes ``lakehouse.<name>``.
    """
    return {
        f"{PROPERTY_PREFIX}kind": kind,
        f"{PROPERTY_PREFIX}format_version": FORMAT_VERSION,
        **{f"{PROPERTY_PREFIX}{name}": value for name, value in settings.items()},
    }


def settings_from_properties(path: str, properties: Mapping[str, str], kind: str) -> dict[str, str]:
    """The settings :func:`settings_properties` recorded on the table at ``path``, by setting name.

    Raises:
        StoreSettingsConflictError: the table is not a lakehouse table of ``kind``.
    """
    found = properties.get(f"{PROPERTY_PREFIX}kind")
    if found != kind:
        raise StoreSettingsConflictError(path, f"{PROPERTY_PREFIX}kind", str(found), kind)
    return {
        name.removeprefix(PROPERTY_PREFIX): value
        for name, value in properties.items()
        if name.startswith(PROPERTY_PREFIX)
    }


def check_table_settings(
    spark: SparkSession,
    path: str,
    schema: T.StructType,
    partition_by: tuple[str, ...],
    properties: Mapping[str, str],
) -> None:
    """Raise :class:`StoreSettingsConflictError` if the table differs from what is asked for."""
    metadata = table_metadata(spark, path)
    existing_schema = spark.read.format("delta").load(path).schema
    if _columns(existing_schema) != _columns(schema):
        raise StoreSettingsConflictError(
            path, "schema", existing_schema.simpleString(), schema.simpleString()
        )
    if metadata.partition_columns != tuple(partition_by):
        raise StoreSettingsConflictError(
            path, "partitioning", ",".join(metadata.partition_columns), ",".join(partition_by)
        )
    existing = metadata.properties
    for key, value in properties.items():
        if existing.get(key) != value:
            raise StoreSettingsConflictError(path, key, str(existing.get(key)), value)


def _columns(schema: T.StructType) -> list[tuple[str, T.DataType]]:
    return [(f.name, f.dataType) for f in schema.fields]


@dataclass(frozen=True)
class TableMetadata:
    """What a Delta table's metadata action says: its id, properties and partition columns."""

    id: str
    properties: dict[str, str]
    partition_columns: tuple[str, ...]


def table_metadata(spark: SparkSession, path: str) -> TableMetadata:
    """The metadata of the table's newest snapshot.

    Read from the snapshot Delta keeps per session (no Spark job, unlike ``DESCRIBE DETAIL``, which also
    counts the snapshot's files).
    """
    return metadata_of(str(latest_snapshot(spark, path).metadata().json()))


def metadata_of(text: str) -> TableMetadata:
    """:class:`TableMetadata` of a Delta ``metaData`` action serialized as Delta writes it in its log
    (``Metadata.json()``: one JVM call for the whole action, where reading its maps and lists through
    Py4J costs round trips per item)."""
    action = json.loads(text)["metaData"]
    return TableMetadata(
        id=str(action["id"]),
        properties={str(k): str(v) for k, v in (action.get("configuration") or {}).items()},
        partition_columns=tuple(str(c) for c in action.get("partitionColumns") or ()),
    )


def table_properties(spark: SparkSession, path: str, prefix: str = PROPERTY_PREFIX) -> dict[str, str]:
    """The table's properties whose key starts with ``prefix``."""
    props = table_metadata(spark, path).properties
    return {k: v for k, v in props.items() if k.startswith(prefix)}


def commit_options(metadata: str, txn: tuple[str, int] | None) -> dict[str, str]:
    """DataFrameWriter options of a commit carrying ``metadata`` and, if given, ``(txnAppId, txnVersion)``."""
    options = {"userMetadata": metadata}
    if txn is not None:
        options.update(txnAppId=txn[0], txnVersion=str(txn[1]))
    return options


@contextmanager
def dml_commit(spark: SparkSession, metadata: str, txn: tuple[str, int] | None) -> Iterator[None]:
    """Run DML statements as commits carrying ``metadata`` and, if given, ``(txnAppId, txnVersion)``.

    Serialized with the other such blocks of this process (the confs are session-wide).
    """
    with _SESSION_TXN_LOCK, session_confs(spark, commit_confs(metadata, txn)):
        yield


@contextmanager
def session_confs(spark: SparkSession, confs: Mapping[str, str]) -> Iterator[None]:
    """Set session confs for the block; the previous values (or unset) are restored on exit, whatever happens.

    Session confs are shared by every thread of the session: nest this in :func:`dml_commit` (which
    serializes its blocks) when other threads may write at the same time.
    """
    previous = {key: spark.conf.get(key, None) for key in confs}
    try:
        for key, value in confs.items():
            spark.conf.set(key, value)
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def drop_partitions_below(
    log: CommitLog, column: str, bound: Any, state: Mapping[str, Any]
) -> dict[str, str]:
    """Delete every partition whose ``column`` value is ``< bound`` (NULL partitions are kept).

    The predicate names a partition column only, so Delta removes whole files from the log without
    reading any data file (a metadata-only delete). The commit records the writer's current ``state``
    (see :mod:`lakehouse.commit_log`). Returns the commit's ``operationMetrics``, or an empty dict when
    nothing matched and Delta wrote no commit.

    Raises:
        InvalidInputError: ``column`` is not a partition column of the table (the delete would scan data).
    """
    partition_columns = table_metadata(log.spark, log.path).partition_columns
    if column not in partition_columns:
        raise InvalidInputError(f"{column!r} is not a partition column of {log.path} ({partition_columns})")
    table = DeltaTable.forPath(log.spark, log.path)
    before = latest_version(table)
    session = log.session(None, state, operation="drop_partitions", bound=str(bound))
    DeltaTable.forPath(session, log.path).delete(F.col(column) < F.lit(bound))
    if latest_version(table) == before:
        return {}
    row = table.history(1).select("operationMetrics").first()
    return dict(row["operationMetrics"]) if row is not None else {}


#: Delta logs a VACUUM as two commits (``VACUUM START``, ``VACUUM END``) only on the file systems it trusts
#: with concurrent commits by default (local, HDFS, Azure, GCS), not on S3. lakehouse reads those commits
#: everywhere: a replica's coverage (the horizon of every VACUUM since its checkpoint), ``maintain``'s
#: ``vacuum_interval``, the files a VACUUM deleted. On S3 a table has one writing driver at a time anyway
#: (docs/pipeline.md, "Object storage"), whose VACUUM commits are as safe as its other commits.
VACUUM_LOGGING = {"spark.databricks.delta.vacuum.logging.enabled": "true"}


def vacuum(spark: SparkSession, path: str, retention_hours: float | None = None) -> int:
    """VACUUM the table at ``path`` (``retention_hours``, default the table's own retention), with its
    ``VACUUM START``/``VACUUM END`` commits on every file system (:data:`VACUUM_LOGGING`); returns the
    files it deleted (its ``VACUUM END``'s count).

    Runs in a clone of ``spark`` (its settings, e.g. the commit metadata a writer set, plus the logging).
    """
    table = DeltaTable.forPath(_clone(spark, VACUUM_LOGGING), path)
    before = latest_version(table)
    if retention_hours is None:
        table.vacuum()
    else:
        table.vacuum(retention_hours)
    ends = [info for info in commit_infos(spark, path, after=before) if info["operation"] == "VACUUM END"]
    if not ends:
        raise LakehouseInternalError(f"VACUUM of {path} left no VACUUM END commit")
    return int((ends[0].get("operationMetrics") or {}).get("numDeletedFiles", 0))


#: Delta's OPTIMIZE rewrites every file smaller than this (``spark.databricks.delta.optimize.minFileSize``,
#: 1 GB by default, so the whole of most tables each time); :func:`compact` passes this instead.
COMPACTED_FILE_BYTES = 16 * 1024 * 1024
_MIN_FILE_SIZE = "spark.databricks.delta.optimize.minFileSize"


def compact(spark: SparkSession, path: str, where: str | None = None) -> None:
    """OPTIMIZE (bin-packing) the table at ``path``, rewriting only its files under
    :data:`COMPACTED_FILE_BYTES` (and those whose deletion vectors delete many rows, as Delta does): a file
    a compaction wrote at or above that size is left alone by the next, so each compaction costs about the
    files added since the last, not the table. The session's own ``minFileSize`` wins when it sets one.
    ``where``: a predicate on partition columns (only those partitions are compacted).

    Runs in a clone of ``spark`` (its settings plus that bound).
    """
    own = spark.conf.get(_MIN_FILE_SIZE, None) is not None
    bound = {} if own else {_MIN_FILE_SIZE: str(COMPACTED_FILE_BYTES)}
    optimize = DeltaTable.forPath(_clone(spark, bound), path).optimize()
    (optimize if where is None else optimize.where(where)).executeCompaction()


def _clone(spark: SparkSession, confs: Mapping[str, str]) -> SparkSession:
    """A clone of ``spark`` (its settings) with ``confs`` set: a command's own settings, unseen by the
    session's other threads."""
    session = SparkSession(spark.sparkContext, spark._jsparkSession.cloneSession())
    for key, value in confs.items():
        session.conf.set(key, value)
    return session


def refuse_replica_writes(spark: SparkSession, path: str) -> None:
    """Raise :class:`ReadOnlyReplicaError` if the table at ``path`` is a replica (only its sync writes it)."""
    source = table_properties(spark, path).get(REPLICA_SOURCE_PROPERTY)
    if source is not None:
        raise ReadOnlyReplicaError(path, source)


def last_drop_bound(spark: SparkSession, path: str, app_id: str, up_to_version: int) -> str | None:
    """The ``bound`` of the newest :func:`drop_partitions_below` commit of ``app_id`` at or before
    ``up_to_version``, or None when there is none (a drop that matched nothing wrote no commit).

    Reads the retained commit infos from the log (:func:`lakehouse.commit_log.commit_infos`), without
    building a history DataFrame.
    """
    for info in commit_infos(spark, path):
        meta = parse_metadata(info.get("userMetadata")) or {}
        is_drop = meta.get("app_id") == app_id and meta.get("operation") == "drop_partitions"
        if is_drop and int(info["version"]) <= up_to_version and meta.get("bound") is not None:
            return str(meta["bound"])
    return None


def latest_version(table: DeltaTable) -> int:
    """The table's current version (from the session's snapshot of its log: no Spark job)."""
    none = table._spark.sparkContext._jvm.scala.Option.empty()  # type: ignore[union-attr]
    version = int(table._jdt.deltaLog().update(False, none, none).version())
    if version < 0:
        raise LakehouseInternalError("a Delta table without a commit")
    return version


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def register_table(spark: SparkSession, name: str, path: str, *, temporary: bool) -> None:
    """Make the Delta table at ``path`` queryable by SQL as ``name``.

    ``temporary``: a temporary view of the table as it is at each query (this session only). Otherwise an
    external catalog table over ``path`` (metadata only; SQL can also time-travel it and ``DESCRIBE HISTORY``
    it). A catalog name already registered for another location is re-pointed if it is an external table.

    Raises:
        InvalidInputError: ``name`` is not an SQL identifier.
        StoreSettingsConflictError: a managed table already has the name.
    """
    _require_identifier(name)
    if temporary:
        spark.read.format("delta").load(path).createOrReplaceTempView(name)
        return
    if _drop_catalog_view(spark, name) and spark.catalog.tableExists(name):
        detail = spark.sql(f"DESCRIBE DETAIL {name}").first()
        location = "" if detail is None else str(detail["location"])
        if _same_location(location, path):
            return
        if spark.catalog.getTable(name).tableType != "EXTERNAL":
            raise StoreSettingsConflictError(name, "location", location, path)
        # An external table: dropping it removes the catalog entry only, never its files.
        spark.sql(f"DROP TABLE {name}")
    spark.sql(f"CREATE TABLE {name} USING DELTA LOCATION '{path}'")


def register_view(spark: SparkSession, name: str, query: str, *, temporary: bool) -> None:
    """Make the SQL ``query`` queryable as the view ``name``, evaluated at each query.

    ``temporary``: a temporary view (this session only); otherwise a catalog view, replacing a catalog
    view or an external table of that name (dropping an external table never removes its files).

    Raises:
        InvalidInputError: ``name`` is not an SQL identifier.
        StoreSettingsConflictError: a managed table already has the name.
    """
    _require_identifier(name)
    if temporary:
        spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW {name} AS {query}")
        return
    if _drop_catalog_view(spark, name) and spark.catalog.tableExists(name):
        table_type = spark.catalog.getTable(name).tableType
        if table_type != "EXTERNAL":
            raise StoreSettingsConflictError(name, "kind", table_type.lower(), "view")
        spark.sql(f"DROP TABLE {name}")
    spark.sql(f"CREATE VIEW {name} AS {query}")


def _require_identifier(name: str) -> None:
    if not _IDENTIFIER.fullmatch(name):
        raise InvalidInputError(f"name must be an SQL identifier, got {name!r}")


def _drop_catalog_view(spark: SparkSession, name: str) -> bool:
    """Drop the catalog view ``name`` if there is one; True when the name may still hold a table."""
    if spark.catalog.tableExists(name) and spark.catalog.getTable(name).tableType == "VIEW":
        spark.sql(f"DROP VIEW {name}")
        return False
    return True


def _same_location(location: str, path: str) -> bool:
    def normalized(text: str) -> str:
        if text.startswith("file:"):
            text = "/" + text[len("file:") :].lstrip("/")
        elif "://" not in text:
            text = os.path.abspath(text)
        return text.rstrip("/")

    return normalized(location) == normalized(path)
