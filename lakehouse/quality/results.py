"""The quality results table: one row per expectation per run (``schemas/quality_results.json``).

Each run's commit also records, as commit-log state (:mod:`lakehouse.commit_log`: in every commit's
metadata, kept through log cleanup), the newest passed check of every table checked so far: an incremental
check finds where to start from the log on the driver, without reading the results.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from lakehouse import delta_ops
from lakehouse.commit_log import CommitLog, append_to_table
from lakehouse.schemas import load_schema
from lakehouse.times import from_micros, micros

if TYPE_CHECKING:
    from lakehouse.quality.job import TableVerdict

KIND = "quality_results"
APP_ID = "lakehouse.quality"
#: Commit-log state: table path -> [version, run time in epoch microseconds] of its newest passed check.
PASSED = "passed"


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
    log = _log(spark, path)
    passed = dict(log.read().state.get(PASSED, {}))
    for verdict in verdicts:
        if verdict.success:
            passed[verdict.path] = [verdict.version, micros(run_time)]
    options = log.writer_options(None, {PASSED: passed}, run_id=run_id, tables=len(verdicts))
    frame = spark.createDataFrame(rows, schema).coalesce(1)
    append_to_table(frame, path, options)


@dataclass(frozen=True)
class PassedCheck:
    """The newest check of a table in which every expectation passed: the version it read, when it ran."""

    version: int
    run_time: datetime


def last_passes(spark: SparkSession, path: str, tables: Sequence[str]) -> dict[str, PassedCheck]:
    """The newest passed check of each of ``tables`` recorded in the results table at ``path`` (none
    for a table without one, or when the results table does not exist yet): read from the table's
    commit-log state on the driver, no Spark job. Concurrent runs cannot lose a newer pass to an older one
    (state fields only grow: the newest version wins)."""
    if not tables or not DeltaTable.isDeltaTable(spark, path):
        return {}
    passed = _log(spark, path).read().state.get(PASSED, {})
    return {
        table: PassedCheck(int(passed[table][0]), from_micros(int(passed[table][1])))
        for table in tables
        if table in passed
    }


def _log(spark: SparkSession, path: str) -> CommitLog:
    return CommitLog(spark, path, APP_ID, state_fields=(PASSED,))
