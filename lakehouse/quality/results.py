"""The quality results table: one row per expectation per run (``schemas/quality_results.json``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from pyspark.sql import SparkSession

from lakehouse import delta_ops
from lakehouse.commit_log import CommitLog
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
    frame.write.format("delta").mode("append").options(**options).save(path)
