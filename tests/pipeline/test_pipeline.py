"""The pipeline end to end on tiny landing folders: two runs, and a crash between commits re-run."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from lakehouse import VersionedStore
from lakehouse.commit_log import CommitLog
from lakehouse.delta_ops import session_confs
from lakehouse.pipeline import BatchMetrics, run_pipeline, stream
from tests.child import child_env
from tests.pipeline.helpers import land, rate, spec, txn, write_config
from tests.test_readme import ROOT

RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"
ZERO = timedelta(0)


class CrashError(Exception):
    """Injected after a micro-batch's commits, before Spark marks the batch done."""


def _rows(spark: SparkSession, path: str, *columns: str) -> list[tuple[object, ...]]:
    return sorted(tuple(r) for r in spark.read.format("delta").load(path).select(*columns).collect())


@pytest.mark.slow
def test_second_run_sees_new_files_only_and_a_crashed_batch_reruns_exactly_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    landing = tmp_path / "landing"
    land(landing / "rates", "r0", [rate("EUR", 1.1, 0, 0), rate("GBP", 1.3, 1, 1)])
    land(landing / "rates", "r1", [rate("EUR", 1.2, 10, 2)])
    # t0 carries the same record twice (same partition and offset) and t1 a duplicate of t0's id.
    land(landing / "transactions", "t0", [txn(0, "EUR", 5, 0), txn(1, "GBP", 6, 1), txn(0, "EUR", 5, 0)])
    land(landing / "transactions", "t1", [txn(2, "EUR", 12, 2), txn(0, "EUR", 7, 3)])
    pipeline = spec(tmp_path)
    first: list[BatchMetrics] = []
    run_pipeline(spark, pipeline, "all", emit=first.append)
    ingest = [m for m in first if m.stage == "ingest"]
    assert [(m.batch_id, m.records_in, m.records_out, m.duplicates) for m in ingest] == [
        (0, 3, 2, 0),
        (1, 2, 1, 1),
    ]
    assert [m.batch_id for m in first if m.stage == "materialize"] == [0, 1]

    # Second run: one new file of records (one is a re-delivery of t1's offset 2) and one of rates.
    land(landing / "transactions", "t2", [txn(3, "EUR", 15, 4), txn(2, "EUR", 12, 2)])
    land(landing / "rates", "r2", [rate("EUR", 1.3, 14, 3)])

    def crash_once(stage: str, batch_id: int) -> None:
        if (stage, batch_id) == ("ingest", 2) and not crashed:
            crashed.append(batch_id)
            raise CrashError(stage)

    crashed: list[int] = []
    with pytest.raises(CrashError):
        run_pipeline(spark, pipeline, "all", emit=lambda m: None, after_batch=crash_once)
    second: list[BatchMetrics] = []
    run_pipeline(spark, pipeline, "all", emit=second.append, after_batch=crash_once)
    by_stage = {(m.stage, m.batch_id): m for m in second}
    assert by_stage["ingest", 2].replay and by_stage["ingest", 2].records_in == 2
    assert ("ingest", 1) not in by_stage and ("materialize", 1) not in by_stage
    assert sum(m.records_in for m in second if m.stage == "enrich") == 1

    tables = pipeline.tables
    assert _rows(spark, tables.deduped, "txn_id", "offset") == [("t0", 0), ("t1", 1), ("t2", 2), ("t3", 4)]
    assert _rows(spark, tables.enriched, "txn_id", "rate_rate") == [
        ("t0", 1.1),
        ("t1", 1.3),
        ("t2", 1.2),
        ("t3", 1.3),
    ]
    assert _rows(spark, tables.quarantine, "txn_id", "offset") == [("t0", 3)]
    assert len(_rows(spark, tables.store, "currency", "valid_from")) == 4


def _commits(table: str) -> int:
    return len(list((Path(table) / "_delta_log").glob("*.json")))


@pytest.mark.slow
def test_a_micro_batch_commits_once_to_each_table_it_writes_and_reports_that_commits_version(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Issue 36: one Delta commit per logical step. A micro-batch of ingest makes one commit on the index,
    the quarantine and the sink, one of enrich one on ``enriched``; each reports its own commit's version."""
    landing = tmp_path / "landing"
    land(landing / "rates", "r0", [rate("EUR", 1.1, 0, 0)])
    land(landing / "transactions", "t0", [txn(0, "EUR", 5, 0)])
    pipeline = spec(tmp_path)
    run_pipeline(spark, pipeline, "all", emit=lambda m: None)  # creates the tables
    tables = pipeline.tables
    written = (tables.dedup_index, tables.quarantine, tables.deduped, tables.enriched)
    before = {table: _commits(table) for table in written}
    # One new file: a new record and a duplicate of t0's id (the quarantine gets a row).
    land(landing / "transactions", "t1", [txn(1, "EUR", 6, 1), txn(0, "EUR", 7, 2)])
    done: list[BatchMetrics] = []
    for stage in ("ingest", "enrich"):
        run_pipeline(spark, pipeline, stage, emit=done.append)
    assert {table: _commits(table) - before[table] for table in written} == dict.fromkeys(written, 1)
    [ingest] = [m for m in done if m.stage == "ingest"]
    [enrich] = [m for m in done if m.stage == "enrich"]
    assert (ingest.records_out, ingest.duplicates, ingest.version) == (1, 1, _commits(tables.deduped) - 1)
    assert (enrich.records_out, enrich.version) == (1, _commits(tables.enriched) - 1)


@pytest.mark.slow
def test_maintain_job_prints_only_its_json_line(spark: SparkSession, tmp_path: Path) -> None:
    """Delta's VACUUM prints a line on the JVM's console: the job's stdout still holds only JSON lines, and
    quiet by default, the line is not printed at all (`--verbose` shows it).

    The store keeps no removed files (a file retention of 0), so VACUUM is due at once."""
    store = spec(tmp_path).tables.store
    schema = T.StructType([T.StructField("currency", T.StringType()), T.StructField("rate", T.DoubleType())])
    with session_confs(spark, {RETENTION_CHECK: "false"}):
        VersionedStore.create(spark, store, "currency", schema, timedelta(hours=1), file_retention=ZERO)
    env = child_env(PYTHONPATH=str(ROOT), LAKEHOUSE_MASTER="local[1]", LAKEHOUSE_DRIVER_MEMORY="1g")
    config = write_config(tmp_path, spark_confs={RETENTION_CHECK: "false"})
    done = subprocess.run(
        [sys.executable, "jobs/maintain.py", "--pipeline", "tiny", "--config", str(config)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    [line] = done.stdout.splitlines()
    metrics = json.loads(line)
    assert (metrics["stage"], metrics["details"]["vacuumed_files"]) == ("maintain", 0)
    assert "Deleted 0 files and directories" not in done.stdout + done.stderr


@pytest.mark.slow
def test_a_batch_that_loses_a_commit_race_is_retried_and_the_tables_end_as_an_uninterrupted_run(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """17: another writer commits to the store and to the index while a batch is planned against them."""
    for root in (tmp_path / "raced", tmp_path / "alone"):
        land(root / "landing" / "rates", "r0", [rate("EUR", 1.1, 0, 0), rate("GBP", 1.3, 1, 1)])
        land(root / "landing" / "rates", "r1", [rate("EUR", 1.2, 10, 2)])
        land(root / "landing" / "transactions", "t0", [txn(0, "EUR", 5, 0), txn(1, "GBP", 6, 1)])
        land(root / "landing" / "transactions", "t1", [txn(2, "EUR", 12, 2), txn(0, "EUR", 7, 3)])
    raced, alone = spec(tmp_path / "raced"), spec(tmp_path / "alone")
    run_pipeline(spark, alone, "all", emit=lambda m: None)

    check = CommitLog.require_unchanged
    raced_tables = {raced.tables.store, raced.tables.dedup_index}
    raced_once: set[str] = set()

    def another_writer_commits_first(log: CommitLog, read_version: int, step: str) -> None:
        if log.path in raced_tables - raced_once and step.endswith("batch 1"):
            raced_once.add(log.path)
            spark.sql(f"ALTER TABLE delta.`{log.path}` SET TBLPROPERTIES ('owner.note' = 'raced')")
        check(log, read_version, step)

    monkeypatch.setattr(CommitLog, "require_unchanged", another_writer_commits_first)
    monkeypatch.setattr(stream, "CONFLICT_BACKOFF_S", 0.01)
    metrics: list[BatchMetrics] = []
    run_pipeline(spark, raced, "all", emit=metrics.append)
    retried = {(m.stage, m.batch_id) for m in metrics if m.details.get("conflict_retries") == 1}
    assert retried == {("materialize", 1), ("ingest", 1)}
    for name, columns in (
        ("store", ("currency", "rate", "valid_from", "valid_to", "tombstone")),
        ("deduped", ("txn_id", "offset")),
        ("enriched", ("txn_id", "rate_rate")),
        ("dedup_index", ("txn_id", "task")),
    ):
        paths = [getattr(p.tables, name) for p in (raced, alone)]
        assert _rows(spark, paths[0], *columns) == _rows(spark, paths[1], *columns), name


@pytest.mark.slow
def test_maintain_expires_only_when_stream_time_crossed_a_segment_past_stored_data(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Each maintenance task runs when due and says why it skipped the others (from commit metadata)."""
    landing = tmp_path / "landing"
    land(landing / "rates", "r0", [rate("EUR", 1.1, 0, 0)])
    land(landing / "rates", "r1", [rate("EUR", 1.2, 10, 1)])
    land(landing / "transactions", "t0", [txn(0, "EUR", 5, 0)])
    pipeline = spec(tmp_path)
    for stage in ("materialize", "ingest"):
        run_pipeline(spark, pipeline, stage, emit=lambda m: None)

    def maintain() -> dict[str, object]:
        [metrics] = run_pipeline(spark, pipeline, "maintain", emit=lambda m: None)
        return dict(metrics.details)

    first = maintain()  # stream time 00:10, R 1 h: nothing is expired yet, the store is new
    skipped = first["skipped"]
    assert isinstance(skipped, dict) and "expired_versions" not in first and "purged_entries" not in first
    assert "<= lowest stored segment" in skipped["expire"] and "<= lowest stored bucket" in skipped["purge"]
    assert "file retention" in skipped["vacuum"] and "optimize store" in skipped

    land(landing / "rates", "r2", [rate("EUR", 1.3, 200, 2)])  # 00:10 -> 03:20: EUR@00:00 expires
    run_pipeline(spark, pipeline, "materialize", emit=lambda m: None)
    second = maintain()
    assert second["expired_versions"] == 1 and "expire" not in second["skipped"]  # type: ignore[operator]
    third = maintain()
    assert "expired_versions" not in third and "expire" in third["skipped"]  # type: ignore[operator]
