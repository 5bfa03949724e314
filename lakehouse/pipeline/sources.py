"""Stage inputs: a Delta table or a landing folder of JSON/Parquet files, read as a stream; landing files."""

from __future__ import annotations

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession

from lakehouse.catalog import hadoop_fs, hadoop_path, list_files, path_exists
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


def land_files(df: DataFrame, folder: str, fmt: str, name: str) -> int:
    """Write ``df`` as new ``fmt`` files ``<name>-*`` into the landing ``folder``, atomically per file.

    The files are written to ``<folder>/_staging/<name>`` first (a folder the file source ignores) and
    then renamed into ``folder``, so a stage never reads a half-written file. Landing ``name`` again is a
    no-op (its files are there already), so a re-run lands nothing new. Returns the files landed.
    """
    spark = df.sparkSession
    if any(status.getPath().getName().startswith(f"{name}-") for status in list_files(spark, folder)):
        return 0
    staging = f"{folder}/_staging/{name}"
    df.write.mode("overwrite").format(fmt).save(staging)
    fs = hadoop_fs(spark, folder)
    landed = 0
    for status in list_files(spark, staging):
        file_name = status.getPath().getName()
        if file_name.startswith(("_", ".")):
            continue
        fs.rename(status.getPath(), hadoop_path(spark, f"{folder}/{name}-{file_name}"))
        landed += 1
    fs.delete(hadoop_path(spark, staging), True)
    return landed
