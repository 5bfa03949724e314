"""Stage inputs: a Delta table, a landing folder of JSON/Parquet files or a Kafka topic, read as a stream;
landing files."""

from __future__ import annotations

from typing import Literal

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse.catalog import hadoop_fs, hadoop_path, list_files, path_exists
from lakehouse.errors import InvalidConfigError, InvalidInputError
from lakehouse.kafka_source import read_kafka
from lakehouse.pipeline.spec import PipelineSpec, source_schema


def read_source(spark: SparkSession, spec: PipelineSpec, name: Literal["records", "changelog"]) -> DataFrame:
    """The spec's ``records`` or ``changelog`` source as a stream: new input only.

    A ``kafka`` topic is read from its earliest offsets on the first run (then from the query's
    checkpoint), its JSON values parsed by ``<name>_schema``, its key in the ``<name>_kafka_key`` column.
    A changelog's ``changelog_timestamp`` value field is its event time; a tombstone (null value) takes
    it from its header (:func:`lakehouse.kafka_source.produce` writes it), else from Kafka's record
    timestamp.
    """
    path, fmt, schema = getattr(spec, name), getattr(spec, f"{name}_format"), getattr(spec, f"{name}_schema")
    if fmt != "kafka":
        return read_stream(spark, name, path, fmt, schema, spec.max_files_per_trigger)
    if not path:
        raise InvalidConfigError(name, "this stage needs a topic")
    value_schema = source_schema(f"{name}_schema", schema)
    event_time = spec.changelog_timestamp if name == "changelog" else "timestamp"
    records = read_kafka(
        spark,
        spec.kafka_bootstrap_servers,
        path,
        value_schema,
        timestamp=None if event_time == "timestamp" else event_time,
        key=getattr(spec, f"{name}_kafka_key"),
        max_offsets_per_trigger=spec.max_offsets_per_trigger,
    )
    return records if event_time == "timestamp" else records.withColumn(event_time, F.col("timestamp"))


def read_stream(
    spark: SparkSession, key: str, path: str, fmt: str, schema: str, max_files_per_trigger: int
) -> DataFrame:
    """A streaming read of the files or Delta table at ``path``: new files only (tracked by the query's
    checkpoint).

    Args:
        key: The spec key naming the source (for errors).
        fmt: ``delta``, ``json`` or ``parquet``; the file formats need ``schema`` (a name in ``schemas/``
            or a DDL string), a Delta table brings its own.
        max_files_per_trigger: Files per micro-batch (0: everything new in one micro-batch).

    Raises:
        InvalidConfigError: no source path, a missing schema, or no Delta table at ``path``.
        InvalidInputError: no landing folder at ``path``.
    """
    if not path:
        raise InvalidConfigError(key, "this stage needs a source path")
    reader = spark.readStream.format(fmt)
    if max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", max_files_per_trigger)
    if fmt != "delta":
        reader = reader.schema(source_schema(f"{key}_schema", schema))
        if not path_exists(spark, path):
            raise InvalidInputError(f"nothing has landed in {path} yet (the {key} landing folder)")
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
