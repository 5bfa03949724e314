"""Beyond one machine: the main job on a real standalone cluster loses a worker mid-job and still writes
exactly what a local run writes."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from lakehouse._jars import DELTA_COORDINATE
from lakehouse.cli import main
from lakehouse.config import load_settings
from lakehouse.session import DELTA_CATALOG, DELTA_EXTENSION
from tests.cluster import cluster_env, standalone_cluster
from tests.test_readme import ROOT

pytestmark = pytest.mark.slow
# Columns that hold the wall-clock time of a run (an assignment generation's time), not data.
_WALL_CLOCK = {"time", "probing_rebalance_at"}
_JOB_TIMEOUT_S = 1200


def test_main_job_survives_losing_a_worker(spark: SparkSession, tmp_path: Path) -> None:
    local_root, cluster_root = tmp_path / "local", tmp_path / "cluster"
    assert main(["demo", "--root", str(local_root)]) == 0

    with standalone_cluster(tmp_path / "standalone") as cluster:
        job = subprocess.Popen(
            _submit_command(cluster.url, cluster_root),
            cwd=ROOT,
            env={**cluster_env(), "PYTHONPATH": str(ROOT)},
            stdout=(tmp_path / "job.out").open("wb"),
            stderr=(tmp_path / "job.err").open("wb"),
        )
        # Lose a worker once the job has committed its first state table: mid-job, with work left.
        _wait_until(lambda: any(cluster_root.glob("*/_delta_log/00000000000000000001.json")), job)
        assert job.poll() is None, "the job ended before the worker could be lost"
        cluster.kill_worker(0)
        returncode = job.wait(timeout=_JOB_TIMEOUT_S)
    err = (tmp_path / "job.err").read_text(errors="replace")
    assert returncode == 0, err[-4000:]

    tables = sorted(p.parent.name for p in local_root.glob("*/_delta_log"))
    assert len(tables) >= 5
    assert sorted(p.parent.name for p in cluster_root.glob("*/_delta_log")) == tables
    for name in tables:
        local = _rows(spark.read.format("delta").load(str(local_root / name)))
        remote = _rows(spark.read.format("delta").load(str(cluster_root / name)))
        assert remote == local, name


def _submit_command(master: str, root: Path) -> list[str]:
    ivy = str(Path(load_settings().ivy_cache).expanduser())
    return [
        "spark-submit", "--master", master,
        "--packages", DELTA_COORDINATE,
        "--conf", f"spark.jars.ivy={ivy}",
        "--conf", f"spark.sql.extensions={DELTA_EXTENSION}",
        "--conf", f"spark.sql.catalog.spark_catalog={DELTA_CATALOG}",
        "--conf", "spark.sql.shuffle.partitions=2",
        "--conf", "spark.sql.session.timeZone=UTC",
        "--conf", "spark.executor.memory=768m",
        "--conf", f"spark.executorEnv.PYTHONPATH={ROOT}",
        "--driver-memory", "1g",
        "jobs/demo.py", "--root", str(root),
    ]


def _wait_until(condition: object, job: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + _JOB_TIMEOUT_S
    while time.monotonic() < deadline and job.poll() is None:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.2)


def _rows(df: DataFrame) -> list[tuple[object, ...]]:
    """A small table's rows without wall-clock columns, sorted (demo tables hold a few hundred rows)."""
    kept = [c for c in df.columns if c not in _WALL_CLOCK]
    return sorted((tuple(r) for r in df.select(*kept).collect()), key=repr)
