"""The demo pipeline end to end on object storage (issue 38): ``lakehouse demo --root s3a://...`` in a child
process of the ``s3`` profile says what it does as quietly as on local disk, and every table it writes
(store, seen-ID index, sinks, quarantine, assignment, quality results, the failover drill's replicas)
holds row for row what the same demo writes on local disk."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from lakehouse.catalog import find_tables
from lakehouse.quality.job import LOCAL_DOCS_DIR
from tests.child import child_env
from tests.objectstore import ObjectStore
from tests.test_demo import SIZE

_CHECKOUT = Path(__file__).resolve().parents[2]
#: Columns whose values depend on when a run happened (wall-clock times, run ids), not on what it computed.
_WHEN = frozenset({"time", "probing_rebalance_at", "registered_at", "run_id", "run_time"})
#: Columns holding a table's location: compared relative to the demo's root.
_WHERE = frozenset({"replica_path", "table_path"})


def _comparable(spark: SparkSession, path: str) -> DataFrame:
    table = spark.read.format("delta").load(path)
    return table.select(
        *[
            F.regexp_replace(c, r"^.*?/demo/", "").alias(c) if c in _WHERE else F.col(c)
            for c in table.columns
            if c not in _WHEN
        ]
    )


def _summary_counts(lines: list[str]) -> list[list[str]]:
    """The per-run, per-stage rows of the summary: run, stage, batches, in, out."""
    start = lines.index("Summary") + 2
    end = lines.index("Tables")
    return [line.split()[:5] for line in lines[start:end]]


def _demo(root: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``lakehouse demo --root root`` at the test's size, run in ``cwd`` with ``env`` added (it must pass)."""
    command = [sys.executable, "-m", "lakehouse", "demo", "--root", root]
    command += ["--rate-updates", str(SIZE.rate_updates), "--transactions", str(SIZE.transactions)]
    cwd.mkdir(parents=True, exist_ok=True)
    child = child_env(**env, PYTHONPATH=str(_CHECKOUT))
    done = subprocess.run(command, cwd=cwd, env=child, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.mark.slow
def test_the_demo_on_object_storage_writes_every_table_as_on_local_disk(
    spark: SparkSession, s3: ObjectStore, tmp_path: Path
) -> None:
    root = s3.uri("demo")
    # Each demo in a child process of its own profile (the test session's heap, late in a run, is no place
    # for two whole pipelines), in a folder of its own (the Data Docs of a root on object storage go under
    # the working directory), with this checkout's lakehouse.
    done = _demo(root, tmp_path / "s3", **s3.env())
    # Quiet: the first line only (no SLF4J notice of the AWS SDK, no S3A committer warning, no warning that
    # the demo's one driver is two writers).
    assert done.stderr.splitlines() == [
        f"lakehouse demo: starting Spark to run the demo pipeline (root {root}, profile s3)"
    ], done.stderr[-3000:]
    local_root = str(tmp_path / "local" / "demo")
    printed = _demo(local_root, tmp_path / "local").stdout.splitlines()

    on_s3 = done.stdout.splitlines()
    assert _summary_counts(on_s3) == _summary_counts(printed)
    assert [line for line in on_s3 if line.startswith("[quality] PASS")] == [
        line for line in printed if line.startswith("[quality] PASS")
    ]
    docs = tmp_path / "s3" / LOCAL_DOCS_DIR / s3.bucket / s3.prefix / "demo" / "index.html"
    assert on_s3[-1] == f"[quality] Data Docs: {docs}" and docs.is_file()

    s3_tables, local_tables = find_tables(spark, root), find_tables(spark, local_root)
    assert sorted(s3_tables) == sorted(local_tables)
    assert {"store", "dedup_index", "deduped", "enriched", "dedup_quarantine"} <= set(s3_tables)
    assert {"assignment_assignment", "assignment_subscriptions", "quality_results"} <= set(s3_tables)
    assert any(name.startswith("failover_") for name in s3_tables)
    for name, path in s3_tables.items():
        assertDataFrameEqual(_comparable(spark, path), _comparable(spark, local_tables[name]), rtol=0, atol=0)
