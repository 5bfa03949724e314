"""Beyond one machine: the whole pipeline job (jobs/pipeline.py: materialize, ingest, enrich, maintain) on
a real standalone cluster loses a worker mid-job and still writes exactly what a local run writes, in
every table."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from lakehouse._jars import DELTA_COORDINATE
from lakehouse.config import load_settings
from lakehouse.pipeline import run_pipeline
from lakehouse.session import DELTA_CATALOG, DELTA_EXTENSION
from tests.cluster import cluster_env, standalone_cluster
from tests.pipeline.helpers import land, rate, spec, txn, write_config
from tests.test_readme import ROOT

pytestmark = pytest.mark.slow
_JOB_TIMEOUT_S = 1200


def test_pipeline_job_survives_losing_a_worker(spark: SparkSession, tmp_path: Path) -> None:
    _land_inputs(tmp_path / "landing")
    local = spec(tmp_path, root=str(tmp_path / "local"))
    run_pipeline(spark, local, "all", emit=lambda metrics: None)
    cluster_root = tmp_path / "cluster"
    config = write_config(tmp_path, root=str(cluster_root))

    with standalone_cluster(tmp_path / "standalone") as cluster:
        job = subprocess.Popen(
            _submit_command(cluster.url, config),
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
    metrics = [json.loads(line) for line in (tmp_path / "job.out").read_text().splitlines()]
    ingest = [(m["batch_id"], m["records_in"]) for m in metrics if m["stage"] == "ingest"]
    assert ingest == [(n, 4) for n in range(3)]
    assert {m["stage"] for m in metrics} >= {"materialize", "ingest", "enrich", "maintain"}

    tables = sorted(p.parent.name for p in Path(local.root).glob("*/_delta_log"))
    assert tables == ["dedup_index", "dedup_quarantine", "deduped", "enriched", "store"]
    assert sorted(p.parent.name for p in cluster_root.glob("*/_delta_log")) == tables
    for name in tables:
        expected = _rows(spark.read.format("delta").load(f"{local.root}/{name}"))
        assert _rows(spark.read.format("delta").load(str(cluster_root / name))) == expected, name


def _land_inputs(landing: Path) -> None:
    """Three files of records, one micro-batch each: two new ids, a re-sent record (same offset) and a
    duplicate id at a later offset (quarantined); two files of rate updates (a tombstone among them)."""
    land(landing / "rates", "r0", [rate("EUR", 1.1, 0, 0), rate("GBP", 1.3, 1, 1)])
    land(landing / "rates", "r1", [rate("EUR", 1.2, 12, 2), rate("GBP", None, 16, 3)])
    for n in range(3):
        records = [txn(2 * n, "EUR", 10 * n + 5, 2 * n), txn(2 * n + 1, "GBP", 10 * n + 6, 2 * n + 1)]
        duplicate = txn(2 * n, "EUR", 10 * n + 7, 100 + n)
        land(landing / "transactions", f"t{n}", [*records, records[0], duplicate])


def _submit_command(master: str, config: Path) -> list[str]:
    ivy = str(Path(load_settings().ivy_cache).expanduser())
    return [
        "spark-submit",
        "--master",
        master,
        "--packages",
        DELTA_COORDINATE,
        "--conf",
        f"spark.jars.ivy={ivy}",
        "--conf",
        f"spark.sql.extensions={DELTA_EXTENSION}",
        "--conf",
        f"spark.sql.catalog.spark_catalog={DELTA_CATALOG}",
        "--conf",
        "spark.sql.shuffle.partitions=2",
        "--conf",
        "spark.sql.session.timeZone=UTC",
        "--conf",
        "spark.executor.memory=768m",
        "--conf",
        f"spark.executorEnv.PYTHONPATH={ROOT}",
        "--driver-memory",
        "1g",
        "jobs/pipeline.py",
        "--pipeline",
        "tiny",
        "--config",
        str(config),
    ]


def _wait_until(condition: object, job: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + _JOB_TIMEOUT_S
    while time.monotonic() < deadline and job.poll() is None:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.2)


def _rows(df: DataFrame) -> list[tuple[object, ...]]:
    """A tiny table's rows, sorted."""
    return sorted((tuple(r) for r in df.collect()), key=repr)
