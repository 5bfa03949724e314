"""Crash anywhere (issues 17 and 38): the end-to-end pipeline crashed after any commit of any stage and table
(every other one per run, from a random first: runs of the suite cover them all), or its job process killed,
restarted each time, ends with every table equal to an uninterrupted run's.

The scenarios run on a local folder (tests/pipeline/test_crash_anywhere.py: every stage) and with the tables
on an object store (tests/s3/test_crash_anywhere.py: the store's and the dedup index's stages). Landing
folders are local in both; the uninterrupted run's tables are local (rows compared, not files).
"""

from __future__ import annotations

import random
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession

from lakehouse.pipeline import PipelineSpec, run_pipeline
from lakehouse.pipeline.order import ORDER
from tests.crash import Py4JCrash, Root, after_commit, at_call, commits, kill_after_commit, listed
from tests.objectstore import ObjectStore
from tests.pipeline.helpers import land, rate, spec, txn, write_config
from tests.test_readme import ROOT

#: Injection points covered by this run's crash tests (printed in the run's summary, tests/conftest.py).
POINTS: dict[str, int] = {}

#: Each stage takes all new input in one micro-batch: every kind of commit still comes (a batch on new
#: tables, a batch on existing state), at half the restarts of one file per batch.
ONE_BATCH = {"max_files_per_trigger": 0}

#: Stages that resume after a crash (Structured Streaming checkpoints): their next commit is new. The others
#: (maintain, assign) redo their commits when re-run, so each crash there moves one commit further.
RESUMING = {"materialize", "ingest", "enrich"}


@dataclass(frozen=True)
class Pipeline:
    """The tiny pipeline (tests/pipeline/helpers.py) with its landing folders under ``landing`` (local) and
    its tables and checkpoints under ``tables`` (a local folder or an object store's)."""

    landing: Path
    tables: Root

    @classmethod
    def local(cls, folder: Path) -> Pipeline:
        """Landing folders and tables under ``folder`` (the tables where :func:`spec` puts them)."""
        return cls(folder, folder / "wh" / "tiny")

    @property
    def root(self) -> str:
        """The tables' root as Spark reads it: a local path or an ``s3a://`` URI."""
        return self.tables.uri() if isinstance(self.tables, ObjectStore) else str(self.tables)

    @property
    def spec(self) -> PipelineSpec:
        return spec(self.landing, root=self.root, **ONE_BATCH)

    def config(self, profile: str = "local") -> Path:
        """A configuration file for a job process of this pipeline (``profile``: ``local`` or ``s3``)."""
        return write_config(self.landing, profile=profile, root=self.root, **ONE_BATCH)


def land_first(root: Path) -> None:
    land(root / "landing" / "rates", "r0", [rate("EUR", 1.1, 0, 0), rate("GBP", 1.3, 1, 1)])
    land(root / "landing" / "rates", "r1", [rate("EUR", 1.2, 10, 2), rate("GBP", None, 12, 3)])
    land(
        root / "landing" / "transactions",
        "t0",
        [txn(0, "EUR", 5, 0), txn(1, "GBP", 6, 1), txn(0, "EUR", 5, 0)],
    )
    land(root / "landing" / "transactions", "t1", [txn(2, "EUR", 12, 2), txn(0, "EUR", 7, 3)])


def land_second(root: Path) -> None:
    land(root / "landing" / "transactions", "t2", [txn(3, "EUR", 95, 4), txn(2, "EUR", 12, 2)])
    land(root / "landing" / "rates", "r2", [rate("EUR", 1.3, 94, 4)])


def land_third(root: Path) -> None:
    land(root / "landing" / "transactions", "t3", [txn(4, "GBP", 100, 5), txn(3, "EUR", 99, 6)])
    land(root / "landing" / "rates", "r3", [rate("GBP", 1.4, 98, 5)])


def table_rows(spark: SparkSession, root: Root) -> dict[str, list[tuple[object, ...]]]:
    """Every Delta table under ``root`` (by relative path): its rows, sorted."""
    found = {}
    folders = {parts[: parts.index("_delta_log")] for parts in listed(root) if "_delta_log" in parts}
    for folder in sorted(folders):
        location = root.uri(*folder) if isinstance(root, ObjectStore) else str(Path(root, *folder))
        frame = spark.read.format("delta").load(location)
        found["/".join(folder)] = sorted((tuple(map(repr, row)) for row in frame.collect()), key=str)
    return found


def run_stages(spark: SparkSession, pipeline: Pipeline, stages: Sequence[str]) -> None:
    """Run ``stages`` of the pipeline in order, uninterrupted."""
    for stage in stages:
        run_pipeline(spark, pipeline.spec, stage, emit=lambda m: None)


def exception_after_any_commit(
    spark: SparkSession,
    crashed: Pipeline,
    alone: Pipeline,
    stages: Sequence[str],
    stride: int,
    random_calls: int,
    label: str = "",
) -> None:
    """Crash ``stages`` of ``crashed`` after every ``stride``-th of their commits and restart them, over the
    first and then the second landing, then at ``random_calls`` random Py4J calls of a third run (anywhere
    inside a batch): after each part its tables equal ``alone``'s, run uninterrupted."""
    for pipeline in (crashed, alone):
        land_first(pipeline.landing)
    run_stages(spark, alone, stages)
    first = _crash_after_every_commit(spark, crashed, stages, stride)
    assert table_rows(spark, crashed.tables) == table_rows(spark, alone.tables)

    for pipeline in (crashed, alone):
        land_second(pipeline.landing)
    run_stages(spark, alone, stages)
    second = _crash_after_every_commit(spark, crashed, stages, stride)
    assert table_rows(spark, crashed.tables) == table_rows(spark, alone.tables)
    POINTS[f"exception after a commit{label}"] = first + second
    assert first + second >= commits(alone.tables) // stride // 2, f"{first + second} crashes only"

    for pipeline in (crashed, alone):
        land_third(pipeline.landing)
    counted = at_call(sys.maxsize)
    with counted.armed():
        run_stages(spark, alone, stages)
    targets = [random.randint(1, counted.calls) for _ in range(random_calls)]
    fired = [_run_crashing(spark, crashed, at_call(target), stages) for target in targets]
    run_stages(spark, crashed, stages)
    assert table_rows(spark, crashed.tables) == table_rows(spark, alone.tables), f"crashed at {targets}"
    POINTS[f"exception at a random Py4J call{label}"] = sum(f is not None for f in fired)


def _crash_after_every_commit(
    spark: SparkSession, pipeline: Pipeline, stages: Sequence[str], stride: int
) -> int:
    """Run each of ``stages``, crashing it after every ``stride``-th of its commits (from a random one of
    the first stride) and restarting it, until it completes uncrashed; returns the number of crashes.

    Commits made within one Py4J call (VACUUM's start and end) get one crash, after the last.
    """
    crashes = 0
    for stage in stages:
        nth = random.randint(1, stride)
        while True:
            start = commits(pipeline.tables)
            injector = after_commit(pipeline.tables, start + nth)
            if _run_crashing(spark, pipeline, injector, [stage]) is None:
                break
            crashes += 1
            assert crashes < 200, f"{stage} commits on every restart: a crash loop"
            nth = stride if stage in RESUMING else injector.fired_at - start + stride
    return crashes


def _run_crashing(
    spark: SparkSession, pipeline: Pipeline, injector: Py4JCrash, stages: Sequence[str]
) -> int | None:
    """Run ``stages`` of the pipeline with ``injector`` armed; returns where it crashed (None: completed)."""
    with injector.armed():
        try:
            run_stages(spark, pipeline, stages)
        except Exception:
            if injector.fired_at is None:
                raise
    # A crash in the driver's thread leaves its streaming query running, which a dead process would not.
    for query in spark.streams.active:
        query.stop()
    return injector.fired_at


def killed_after_any_commit(
    spark: SparkSession,
    crashed: Pipeline,
    alone: Pipeline,
    stages: Sequence[str],
    stride: int,
    env: Mapping[str, str],
    profile: str = "local",
    label: str = "",
) -> None:
    """SIGKILL the job process of ``crashed`` (Python and JVM; running ``stages`` in order, in profile
    ``profile`` with ``env``) after every ``stride``-th commit of an uninterrupted run (from a random first
    one, so runs of the suite cover them all), one kill and restart per chosen commit (polled, so anywhere
    up to 10 ms after it); the tables then equal ``alone``'s."""
    for pipeline in (crashed, alone):
        land_first(pipeline.landing)
        land_second(pipeline.landing)
    run_stages(spark, alone, stages)
    total = commits(alone.tables)
    job = _job(crashed.config(profile), stages)
    # A kill after every stride-th of the uninterrupted run's commits; a restart redoes some (maintain's
    # VACUUM), so each is at least the next commit of the run so far.
    killed: list[int] = []
    for target in range(random.randint(1, stride), total + 1, stride):
        killed_at, done = kill_after_commit(
            job,
            crashed.tables,
            max(target, commits(crashed.tables) + 1),
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        if killed_at is None:  # the job finished first: the next run only checks
            assert done.returncode == 0, done.stderr[-3000:]
            break
        killed.append(killed_at)
    done = subprocess.run(job, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert table_rows(spark, crashed.tables) == table_rows(spark, alone.tables), f"killed after {killed}"
    POINTS[f"killed process after a commit{label}"] = len(killed)
    assert len(killed) >= max(1, total // stride // 2), f"killed after {killed} only, of {total} commits"


def _job(config: Path, stages: Sequence[str]) -> list[str]:
    """The job process: ``jobs/pipeline.py`` for every stage, else tests/pipeline/stages_job.py."""
    options = ["--pipeline", "tiny", "--config", str(config)]
    if tuple(stages) == ORDER:
        return [sys.executable, "jobs/pipeline.py", *options]
    return [sys.executable, "-m", "tests.pipeline.stages_job", ",".join(stages), *options]
