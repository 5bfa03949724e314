"""Crash anywhere (issue 17), on a local folder: every stage of the end-to-end pipeline crashed after any
commit of any table (every other one per run, from a random first: runs of the suite cover them all), or its
job process killed, restarted each time, ends with every table equal to an uninterrupted run's (the
scenarios: tests/pipeline/crashing.py; on an object store: tests/s3/test_crash_anywhere.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from lakehouse.pipeline.order import stages_of
from tests.child import child_env
from tests.pipeline.crashing import Pipeline, exception_after_any_commit, killed_after_any_commit
from tests.test_readme import ROOT

#: Crashes at random Py4J calls in the exception test's third run.
RANDOM_CALLS = 1

#: The exception test crashes each stage after every CRASH_STRIDE-th of its commits, from a random first
#: one: runs of the suite cover every commit, each run half of them at half the restarts.
CRASH_STRIDE = 2

#: The kill test kills the job after every KILL_STRIDE-th commit: each kill is a new Python and JVM.
KILL_STRIDE = 9


@pytest.mark.slow
def test_an_exception_after_any_commit_then_a_restart_ends_as_an_uninterrupted_run(
    spark: SparkSession, tmp_path: Path
) -> None:
    crashed, alone = Pipeline.local(tmp_path / "crashed"), Pipeline.local(tmp_path / "alone")
    stages = stages_of("all", crashed.spec)
    exception_after_any_commit(spark, crashed, alone, stages, CRASH_STRIDE, RANDOM_CALLS)


@pytest.mark.slow
def test_a_killed_job_process_then_a_restart_ends_as_an_uninterrupted_run(
    spark: SparkSession, tmp_path: Path
) -> None:
    """SIGKILL of the job's Python and JVM after every KILL_STRIDE-th commit of an uninterrupted run. The
    exception test above crashes after every other commit; this one proves a dead process (no cleanup, no
    ``finally``) restarts the same way, at fewer restarts."""
    crashed, alone = Pipeline.local(tmp_path / "crashed"), Pipeline.local(tmp_path / "alone")
    env = child_env(PYTHONPATH=str(ROOT), LAKEHOUSE_MASTER="local[1]", LAKEHOUSE_DRIVER_MEMORY="1g")
    killed_after_any_commit(spark, crashed, alone, stages_of("all", crashed.spec), KILL_STRIDE, env)
