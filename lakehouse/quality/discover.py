"""Finding the Delta tables under a warehouse folder (any Hadoop file system: local, s3a, abfss, ...)."""

from __future__ import annotations

from collections.abc import Iterator

from pyspark.sql import SparkSession

DELTA_LOG = "_delta_log"
#: How deep below the warehouse tables are looked for (a demo's tables are two levels down).
MAX_DEPTH = 4


def lakehouse_tables(spark: SparkSession, warehouse: str, max_depth: int = MAX_DEPTH) -> list[str]:
    """Every folder under ``warehouse`` (itself included) holding a Delta log, in path order.

    Paths are spelled from ``warehouse`` (``<warehouse>/a/b``). A table's own folders are not searched,
    nor folders whose name starts with ``_`` or ``.``. Metadata only: directory listings, no data read.
    """
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    hadoop_path = jvm.org.apache.hadoop.fs.Path
    fs = hadoop_path(warehouse).getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())

    def walk(folder: str, depth: int) -> Iterator[str]:
        if fs.exists(hadoop_path(f"{folder}/{DELTA_LOG}")):
            yield folder
            return
        if depth == max_depth:
            return
        children = sorted(
            status.getPath().getName()
            for status in fs.listStatus(hadoop_path(folder))
            if status.isDirectory()
        )
        for name in children:
            if not name.startswith(("_", ".")):
                yield from walk(f"{folder}/{name}", depth + 1)

    root = warehouse.rstrip("/")
    return list(walk(root, 0)) if fs.exists(hadoop_path(root)) else []
