"""The quality results table: one row per expectation per run (``schemas/quality_results.json``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse import delta_ops
from lakehouse.commit_log import CommitLog, append_to_table
from lakehouse.schemas import load_schema

if TYPE_CHECKING:
    from lakehouse.quality.job import TableVerdict

KIND = "quality_results"
APP_ID = "lakehouse.quality"


def append_results(
    spark: SparkSession, path: str, run_time: datetime, verdicts: Sequence[TableVerdict]
) -> None:
    """Append the rows of one run to the results table at ``path`` (created if missing): one commit."""
    schema = load_schema(KIND)
    delta_ops.ensure_table(spark, path, schema, properties=delta_ops.settings_properties(KIND, {}))
    run_id = run_time.isoformat()
    rows = [
        (
            run_id,
            run_time,
            verdict.path,
            verdict.kind,
            verdict.version,
            verdict.suite,
            result.rule.name,
            result.rule.description,
            result.success,
            result.unexpected_count,
            list(result.sample_keys),
        )
        for verdict in verdicts
        for result in verdict.results
    ]
    options = CommitLog(spark, path, APP_ID).writer_options(None, {}, run_id=run_id, tables=len(verdicts))
    frame = spark.createDataFrame(rows, schema).coalesce(1)
    append_to_table(frame, path, options)


@dataclass(frozen=True)
class PassedCheck:
    """The newest check of a table in which every expectation passed: the version it read, when it ran."""

    version: int
    run_time: datetime


def last_passes(spark: SparkSession, path: str, tables: Sequence[str]) -> dict[str, PassedCheck]:
    """The newest passed check of each of ``tables`` recorded in the results table at ``path`` (none
    for a table without one, or when the results table does not exist yet): one small Spark job."""
    if not tables or not DeltaTable.isDeltaTable(spark, path):
        return {}
    checks = (
        spark.read.format("delta")
        .load(path)
        .where(F.col("table_path").isin(list(tables)))
        .groupBy("table_path", "run_id", "table_version", "run_time")
        .agg(F.min(F.col("success").cast("int")).alias("passed"))
    )
    newest = (
        checks.where(F.col("passed") == 1)
        .groupBy("table_path")
        .agg(F.max(F.struct("table_version", "run_time")).alias("newest"))
    )
    return {
        row["table_path"]: PassedCheck(int(row["newest"]["table_version"]), row["newest"]["run_time"])
        for row in newest.collect()
    }
