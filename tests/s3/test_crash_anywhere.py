"""Crash anywhere on an object store (issue 38): the versioned store's stage (materialize) and the dedup
index's (ingest), with their tables and checkpoints on ``s3a://`` (landing folders local), crashed after
any commit or killed as a process, restarted each time, end with every table equal to an uninterrupted
run's (on a local folder). The scenarios are the local test's (tests/pipeline/crashing.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.child import child_env
from tests.objectstore import ObjectStore
from tests.pipeline.crashing import Pipeline, exception_after_any_commit, killed_after_any_commit
from tests.test_readme import ROOT

STAGES = ("materialize", "ingest")
#: Crashes at random Py4J calls in the exception test's third run.
RANDOM_CALLS = 1
#: The exception test crashes each stage after every CRASH_STRIDE-th of its commits, from a random first
#: one (runs of the suite cover them all): every crash-armed Py4J call lists the store (about 3 ms).
CRASH_STRIDE = 3
#: The kill test kills the job after every KILL_STRIDE-th commit: each kill is a new Python and JVM.
KILL_STRIDE = 9
LABEL = " (tables on an object store)"


@pytest.mark.slow
def test_an_exception_after_any_commit_then_a_restart_ends_as_an_uninterrupted_run(
    spark: SparkSession, tmp_path: Path, s3: ObjectStore
) -> None:
    crashed, alone = Pipeline(tmp_path / "crashed", s3.under("crashed")), Pipeline.local(tmp_path / "alone")
    exception_after_any_commit(spark, crashed, alone, STAGES, CRASH_STRIDE, RANDOM_CALLS, LABEL)


@pytest.mark.slow
def test_a_killed_job_process_then_a_restart_ends_as_an_uninterrupted_run(
    spark: SparkSession, tmp_path: Path, s3: ObjectStore
) -> None:
    crashed, alone = Pipeline(tmp_path / "crashed", s3.under("crashed")), Pipeline.local(tmp_path / "alone")
    env = child_env(
        PYTHONPATH=str(ROOT), LAKEHOUSE_MASTER="local[1]", LAKEHOUSE_DRIVER_MEMORY="1g", **s3.env()
    )
    killed_after_any_commit(spark, crashed, alone, STAGES, KILL_STRIDE, env, "s3", LABEL)
