"""Files of a table on whatever file system holds it (a local folder, ``s3a://``), listed through Hadoop's
``FileSystem`` as Spark and Delta see them (an object store has no folders pathlib could walk)."""

from __future__ import annotations

from pyspark.sql import SparkSession

from lakehouse.catalog import hadoop_fs, hadoop_path, path_exists


def matching(spark: SparkSession, pattern: str) -> list[str]:
    """The files matching the Hadoop glob ``pattern`` (``<table>/segment=3/*.parquet``), as URIs, sorted."""
    found = hadoop_fs(spark, pattern).globStatus(hadoop_path(spark, pattern)) or []
    return sorted(str(status.getPath().toString()) for status in found if status.isFile())


def existing(spark: SparkSession, files: list[str]) -> list[str]:
    """Those of ``files`` that still exist."""
    return [file for file in files if path_exists(spark, file)]
