"""Crash anywhere (issue 17): the end-to-end pipeline crashed after any commit of any stage and table (every
other one per run, from a random first: runs of the suite cover them all), restarted each time, ends with
every table equal to an uninterrupted run's."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from lakehouse.pipeline import PipelineSpec, run_pipeline
from lakehouse.pipeline.order import stages_of
from tests.child import child_env
from tests.crash import Py4JCrash, after_commit, at_call, commits, kill_after_commit
from tests.pipeline.helpers import land, rate, spec, txn, write_config
from tests.test_readme import ROOT

#: Crashes at random Py4J calls in the exception test's third run.
RANDOM_CALLS = 1

#: The exception test crashes each stage after every CRASH_STRIDE-th of its commits, from a random first
#: one: runs of the suite cover every commit, each run half of them at half the restarts.
CRASH_STRIDE = 2

#: The kill test kills the job after every KILL_STRIDE-th commit: each kill is a new Python and JVM.
KILL_STRIDE = 9

#: Injection points covered by this run's crash tests (printed in the run's summary, tests/conftest.py).
POINTS: dict[str, int] = {}


def _land_first(root: Path) -> None:
    land(root / "landing" / "rates", "r0", [rate("EUR", 1.1, 0, 0), rate("GBP", 1.3, 1, 1)])
    land(root / "landing" / "rates", "r1", [rate("EUR", 1.2, 10, 2), rate("GBP", None, 12, 3)])
    land(
        root / "landing" / "transactions",
        "t0",
        [txn(0, "EUR", 5, 0), txn(1, "GBP", 6, 1), txn(0, "EUR", 5, 0)],
    )
    land(root / "landing" / "transactions", "t1", [txn(2, "EUR", 12, 2), txn(0, "EUR", 7, 3)])


def _land_second(root: Path) -> None:
    land(root / "landing" / "transactions", "t2", [txn(3, "EUR", 95, 4), txn(2, "EUR", 12, 2)])
    land(root / "landing" / "rates", "r2", [rate("EUR", 1.3, 94, 4)])


#: Each stage takes all new input in one micro-batch: every kind of commit still comes (a batch on new
#: tables, a batch on existing state), at half the restarts of one file per batch.
ONE_BATCH = {"max_files_per_trigger": 0}


def _spec(root: Path) -> PipelineSpec:
    return spec(root, **ONE_BATCH)


def _land_third(root: Path) -> None:
    land(root / "landing" / "transactions", "t3", [txn(4, "GBP", 100, 5), txn(3, "EUR", 99, 6)])
    land(root / "landing" / "rates", "r3", [rate("GBP", 1.4, 98, 5)])


def _tables(spark: SparkSession, pipeline: PipelineSpec) -> dict[str, list[tuple[object, ...]]]:
    """Every Delta table under the pipeline's root (by relative path): its rows, sorted."""
    root = Path(pipeline.tables.root)
    found = {}
    for log in sorted(root.rglob("_delta_log")):
        frame = spark.read.format("delta").load(str(log.parent))
        found[str(log.parent.relative_to(root))] = sorted(
            (tuple(map(repr, row)) for row in frame.collect()), key=str
        )
    return found


#: Stages that resume after a crash (Structured Streaming checkpoints): their next commit is new. The others
#: (maintain, assign) redo their commits when re-run, so each crash there moves one commit further.
RESUMING = {"materialize", "ingest", "enrich"}


def _crash_after_every_commit(spark: SparkSession, pipeline: PipelineSpec) -> int:
    """Run each stage of the pipeline, crashing it after every :data:`CRASH_STRIDE`-th of its commits
    (from a random one of the first stride) and restarting it, until it completes uncrashed; returns the
    number of crashes.

    Commits made within one Py4J call (VACUUM's start and end) get one crash, after the last.
    """
    root = Path(pipeline.tables.root)
    crashes = 0
    for stage in stages_of("all", pipeline):
        nth = random.randint(1, CRASH_STRIDE)
        while True:
            start = commits(root)
            injector = after_commit(root, start + nth)
            if _run_crashing(spark, pipeline, injector, stage) is None:
                break
            crashes += 1
            assert crashes < 200, f"{stage} commits on every restart: a crash loop"
            nth = CRASH_STRIDE if stage in RESUMING else injector.fired_at - start + CRASH_STRIDE
    return crashes


@pytest.mark.slow
def test_an_exception_after_any_commit_then_a_restart_ends_as_an_uninterrupted_run(
    spark: SparkSession, tmp_path: Path
) -> None:
    crashed, alone = _spec(tmp_path / "crashed"), _spec(tmp_path / "alone")
    for root in (tmp_path / "crashed", tmp_path / "alone"):
        _land_first(root)
    run_pipeline(spark, alone, "all", emit=lambda m: None)
    first = _crash_after_every_commit(spark, crashed)
    assert _tables(spark, crashed) == _tables(spark, alone)

    for root in (tmp_path / "crashed", tmp_path / "alone"):
        _land_second(root)
    run_pipeline(spark, alone, "all", emit=lambda m: None)
    second = _crash_after_every_commit(spark, crashed)
    assert _tables(spark, crashed) == _tables(spark, alone)
    POINTS["exception after a commit"] = first + second
    assert first + second > 20 // CRASH_STRIDE

    # Then at random Py4J calls of a third run: anywhere inside a batch, not only after a commit.
    for root in (tmp_path / "crashed", tmp_path / "alone"):
        _land_third(root)
    counted = at_call(sys.maxsize)
    with counted.armed():
        run_pipeline(spark, alone, "all", emit=lambda m: None)
    targets = [random.randint(1, counted.calls) for _ in range(RANDOM_CALLS)]
    fired = [_run_crashing(spark, crashed, at_call(target)) for target in targets]
    run_pipeline(spark, crashed, "all", emit=lambda m: None)
    assert _tables(spark, crashed) == _tables(spark, alone), f"crashed at Py4J calls {targets}"
    POINTS["exception at a random Py4J call"] = sum(f is not None for f in fired)


def _run_crashing(
    spark: SparkSession, pipeline: PipelineSpec, injector: Py4JCrash, stage: str = "all"
) -> int | None:
    """Run ``stage`` of the pipeline with ``injector`` armed; returns where it crashed (None: completed)."""
    with injector.armed():
        try:
            run_pipeline(spark, pipeline, stage, emit=lambda m: None)
        except Exception:
            if injector.fired_at is None:
                raise
    # A crash in the driver's thread leaves its streaming query running, which a dead process would not.
    for query in spark.streams.active:
        query.stop()
    return injector.fired_at


def _job(config: Path) -> list[str]:
    return [sys.executable, "jobs/pipeline.py", "--pipeline", "tiny", "--config", str(config)]


@pytest.mark.slow
def test_a_killed_job_process_then_a_restart_ends_as_an_uninterrupted_run(
    spark: SparkSession, tmp_path: Path
) -> None:
    """SIGKILL of the job's Python and JVM after every KILL_STRIDE-th commit of an uninterrupted run (from a
    random first one, so runs of the suite cover them all), one kill and restart per chosen commit (polled,
    so anywhere up to 10 ms after it). The exception test above crashes after every other commit; this
    one proves a dead process (no cleanup, no ``finally``) restarts the same way, at fewer restarts."""
    crashed, alone = tmp_path / "crashed", tmp_path / "alone"
    for root in (crashed, alone):
        _land_first(root)
        _land_second(root)
    run_pipeline(spark, _spec(alone), "all", emit=lambda m: None)
    total = commits(Path(_spec(alone).tables.root))
    config = write_config(crashed, **ONE_BATCH)
    env = child_env(PYTHONPATH=str(ROOT), LAKEHOUSE_MASTER="local[1]", LAKEHOUSE_DRIVER_MEMORY="1g")
    root = Path(_spec(crashed).tables.root)
    # A kill after every KILL_STRIDE-th of the uninterrupted run's commits; a restart redoes some (maintain's
    # VACUUM), so each is at least the next commit of the run so far.
    killed: list[int] = []
    for target in range(random.randint(1, KILL_STRIDE), total + 1, KILL_STRIDE):
        killed_at, done = kill_after_commit(
            _job(config),
            root,
            max(target, commits(root) + 1),
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        if killed_at is None:  # the job finished first: the next run only checks
            assert done.returncode == 0, done.stderr[-3000:]
            break
        killed.append(killed_at)
    done = subprocess.run(_job(config), cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert _tables(spark, _spec(crashed)) == _tables(spark, _spec(alone)), f"killed after commits {killed}"
    POINTS["killed process after a commit"] = len(killed)
    assert len(killed) >= total // KILL_STRIDE // 2, f"killed after {killed} only, of {total} commits"
