"""The tables under a warehouse folder, by name, and the file-system helpers that find them.

:func:`find_tables` lists the Delta tables under a folder with a name each (their path relative to the
folder, ``/`` as ``_``); the helpers reach any file system Spark reaches (local, HDFS, S3) through Hadoop.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession

from lakehouse import delta_ops
from lakehouse.damage import is_delta_table
from lakehouse.errors import NotALakehouseTableError
from lakehouse.paths import MAX_TABLE_DEPTH, table_name

KIND_PROPERTY = f"{delta_ops.PROPERTY_PREFIX}kind"


def path_exists(spark: SparkSession, path: str) -> bool:
    """Whether ``path`` exists on its file system (local, HDFS, S3, ... through Hadoop)."""
    return bool(hadoop_fs(spark, path).exists(hadoop_path(spark, path)))


def lakehouse_properties(spark: SparkSession, path: str, kind: str) -> dict[str, str]:
    """The ``lakehouse.*`` properties of the lakehouse table of ``kind`` at ``path`` (one metadata read).

    Raises:
        NotALakehouseTableError: nothing exists at ``path``, it is not a Delta table (a Parquet folder, a
            file), it is a Delta table lakehouse did not create, or a lakehouse table of another kind.
    """
    if not path_exists(spark, path):
        raise NotALakehouseTableError(path, kind, "nothing exists there")
    if not is_delta_table(spark, path):
        raise NotALakehouseTableError(path, kind, "it is not a Delta table (no _delta_log)")
    properties = delta_ops.table_properties(spark, path)
    found = properties.get(KIND_PROPERTY)
    if found is None:
        raise NotALakehouseTableError(path, kind, "it is a Delta table lakehouse did not create")
    if found != kind:
        raise NotALakehouseTableError(path, kind, f"it is a {found}")
    return properties


def find_tables(spark: SparkSession, root: str) -> dict[str, str]:
    """Every Delta table under ``root`` (a few levels deep), by name: its relative path with ``_``.

    Folders named ``_*`` or ``.*`` (logs, checkpoints) and partition folders (``col=value``) are skipped.
    """
    if not path_exists(spark, root):
        return {}
    fs = hadoop_fs(spark, root)
    found: dict[str, str] = {}
    pending: list[tuple[Any, tuple[str, ...]]] = [(hadoop_path(spark, root), ())]
    while pending:
        folder, parts = pending.pop()
        children = [s for s in fs.listStatus(folder) if s.isDirectory()]
        names = {c.getPath().getName() for c in children}
        if "_delta_log" in names and parts:
            found[table_name(parts)] = str(folder.toUri())
            continue
        if len(parts) >= MAX_TABLE_DEPTH:
            continue
        for child in children:
            name = child.getPath().getName()
            if not name.startswith(("_", ".")) and "=" not in name:
                pending.append((child.getPath(), (*parts, name)))
    return dict(sorted(found.items()))


def hadoop_path(spark: SparkSession, path: str) -> Any:
    """``path`` as a Hadoop ``Path`` (a JVM object)."""
    return spark._jvm.org.apache.hadoop.fs.Path(path)  # type: ignore[union-attr]


def hadoop_fs(spark: SparkSession, path: str) -> Any:
    """The Hadoop ``FileSystem`` of ``path`` (local, HDFS, S3, ...; a JVM object)."""
    conf = spark._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    return hadoop_path(spark, path).getFileSystem(conf)


def list_files(spark: SparkSession, folder: str) -> list[Any]:
    """The ``FileStatus`` of every entry of ``folder`` (none if it does not exist)."""
    if not path_exists(spark, folder):
        return []
    return list(hadoop_fs(spark, folder).listStatus(hadoop_path(spark, folder)))
