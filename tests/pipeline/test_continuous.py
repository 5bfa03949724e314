"""Continuous mode (issue 36): the pipeline always on, stopped by SIGTERM in the middle of a micro-batch, ends
as an uninterrupted run, and its enrich micro-batches say how fresh their rows are."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from lakehouse.cli import main as lakehouse_main
from lakehouse.pipeline import PipelineSpec, run_pipeline
from tests.child import child_env
from tests.pipeline.crashing import table_rows
from tests.pipeline.helpers import land, rate, spec, txn, write_config
from tests.test_readme import ROOT

#: Maintenance has nothing to do while the child runs (no seal, no OPTIMIZE: the data is tiny), so the
#: tables do not depend on when it ran; the last scheduled run of each root does it all.
QUIET_MAINTENANCE = {"seal_min_rows": 1000, "optimize_min_files": 0}
#: Seconds the test waits for the child to reach a micro-batch of enrich, and then to stop.
PATIENCE_S = 300


def _land_first(root: Path) -> None:
    land(root / "landing" / "rates", "r0", [rate("EUR", 1.1, 0, 0), rate("GBP", 1.3, 1, 1)])
    first = [txn(0, "EUR", 5, 0), txn(1, "GBP", 6, 1), txn(0, "EUR", 5, 0)]
    land(root / "landing" / "transactions", "t0", first)


def _land_second(root: Path) -> None:
    second = [txn(2, "EUR", 12, 2), txn(3, "GBP", 7, 3), txn(0, "EUR", 5, 0)]
    land(root / "landing" / "transactions", "t1", second)


def _spec(root: Path) -> PipelineSpec:
    return spec(root, **QUIET_MAINTENANCE)


def _in_flight(checkpoint: Path) -> int | None:
    """The micro-batch a query's checkpoint has planned (``offsets``) and not marked done (``commits``)."""
    planned = {int(f.name) for f in (checkpoint / "offsets").glob("[0-9]*")}
    done = {int(f.name) for f in (checkpoint / "commits").glob("[0-9]*")}
    return min(planned - done, default=None)


def _await_in_flight(child: subprocess.Popen[str], checkpoint: Path) -> int:
    deadline = time.monotonic() + PATIENCE_S
    while time.monotonic() < deadline and child.poll() is None:
        batch = _in_flight(checkpoint)
        if batch is not None:
            return batch
        time.sleep(0.01)
    child.kill()
    raise AssertionError(f"no micro-batch in flight under {checkpoint}: {child.communicate()[1][-3000:]}")


@pytest.mark.slow
def test_sigterm_mid_batch_stops_after_the_batch_commits_and_the_tables_end_as_an_uninterrupted_run(
    spark: SparkSession, tmp_path: Path
) -> None:
    signalled, alone = tmp_path / "signalled", tmp_path / "alone"
    for root in (signalled, alone):
        _land_first(root)
    # The first part runs scheduled, in this session: the tables exist when the child starts, so its
    # micro-batches are short, and the store is current, so each record's join does not depend on timing.
    landed = time.time()
    first = run_pipeline(spark, _spec(signalled), "all", emit=lambda m: None)
    since_landing = time.time() - landed + 1  # file times: to the second on some file systems
    for metrics in (m for m in first if m.stage == "enrich"):  # ingested by this run: its lag is known
        lag = metrics.details["freshness_s"]
        assert 0 <= lag["freshest"] <= lag["stalest"] <= since_landing, metrics
    for root in (signalled, alone):
        _land_second(root)
    run_pipeline(spark, _spec(alone), "all", emit=lambda m: None)

    config = write_config(signalled, **QUIET_MAINTENANCE)
    env = child_env(PYTHONPATH=str(ROOT), LAKEHOUSE_MASTER="local[1]", LAKEHOUSE_DRIVER_MEMORY="1g")
    command = [sys.executable, "jobs/pipeline.py", "--pipeline", "tiny", "--config", str(config)]
    child = subprocess.Popen(
        [*command, "--continuous", "--trigger", "1s"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    checkpoints = Path(_spec(signalled).tables.checkpoints)
    batch = _await_in_flight(child, checkpoints / "ingest")
    child.send_signal(signal.SIGTERM)
    out, err = child.communicate(timeout=PATIENCE_S)
    assert child.returncode == 0, err[-3000:]
    # The micro-batch in flight committed and Spark marked it done: the next start goes on after it.
    assert (checkpoints / "ingest" / "commits" / str(batch)).exists(), out
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    ingested = [m["batch_id"] for m in lines if m["stage"] == "ingest" and m["batch_id"] is not None]
    assert ingested == [batch], out  # one line per micro-batch

    # A restart (here a scheduled run) takes up what the stop left, then both roots end alike.
    run_pipeline(spark, _spec(signalled), "all", emit=lambda m: None)
    tables = [Path(_spec(root).tables.root) for root in (signalled, alone)]
    assert table_rows(spark, tables[0]) == table_rows(spark, tables[1])


def test_trigger_and_for_go_with_continuous(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path)
    argv = ["--config", str(config), "run", "all", "--pipeline", "tiny", "--for", "1m"]
    assert lakehouse_main(argv) == 2
    assert "--trigger and --for go with --continuous" in capsys.readouterr().err
