"""A stage's input as a streaming DataFrame: a Delta table or a landing folder of JSON/Parquet files."""

from __future__ import annotations

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession

from lakehouse.catalog import path_exists
from lakehouse.errors import InvalidConfigError
from lakehouse.pipeline.spec import source_schema


def read_stream(
    spark: SparkSession, key: str, path: str, fmt: str, schema: str, max_files_per_trigger: int
) -> DataFrame:
    """A streaming read of ``path``: new files only (tracked by the query's checkpoint).

    Args:
        key: The spec key naming the source (for errors).
        fmt: ``delta``, ``json`` or ``parquet``; the file formats need ``schema`` (a name in ``schemas/``
            or a DDL string), a Delta table brings its own.
        max_files_per_trigger: Files per micro-batch (0: everything new in one micro-batch).

    Raises:
        InvalidConfigError: no source path, a missing schema, or nothing at ``path``.
    """
    if not path:
        raise InvalidConfigError(key, "this stage needs a source path")
    reader = spark.readStream.format(fmt)
    if max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", max_files_per_trigger)
    if fmt != "delta":
        reader = reader.schema(source_schema(f"{key}_schema", schema))
        if not path_exists(spark, path):
            raise InvalidConfigError(key, f"no landing folder {path}")
    elif not DeltaTable.isDeltaTable(spark, path):
        raise InvalidConfigError(key, f"no Delta table at {path}")
    return reader.load(path)
