"""End-to-end benchmark of the demo pipeline (issues 14 and 18): seconds per stage, records/s, two runs.

Run: ``flock /tmp/lakehouse-bench.lock .venv/bin/python bench/bench_pipeline.py [--transactions 1111111
--rate-updates 111111]``; writes ``bench/RESULTS_pipeline.md``. It runs what ``lakehouse demo`` runs
(:func:`lakehouse.demo.demo_run`: the generated data lands in ``[pipeline.demo]``'s landing folders in two
parts — the first 90% of the generated time span, then the rest, about 1/9 of the first — and every stage
runs after each), on a fresh root under a temporary folder, with the embedded session of ``make demo``.
The defaults make the first run about 1M transactions and 100k rate updates, the second about 11% of that.

Reported per run and stage: the stage's wall-clock seconds (the sum of its micro-batches' ``seconds``, as
each job logs them), records in, records/s; per run: wall-clock seconds of the whole pipeline run (every
stage, as ``lakehouse run all``; landing the part's generated files comes before and is not counted) and
its Spark jobs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import SparkSession

from lakehouse.assignment.job import DEMO_CONFIG
from lakehouse.assignment.store import AssignmentStore
from lakehouse.config import load_settings
from lakehouse.demo import demo_parts, demo_run, demo_spec, land_part
from lakehouse.demo_data import DemoSize
from lakehouse.pipeline import BatchMetrics
from lakehouse.session import get_spark, warehouse_uri


@dataclass(frozen=True)
class RunResult:
    """One run of the pipeline: its metrics, wall-clock seconds and Spark jobs."""

    metrics: list[BatchMetrics]
    seconds: float
    jobs: int
    lines: list[str]


def run(spark: SparkSession, size: DemoSize, root: str) -> list[RunResult]:
    """The demo's two runs at ``size`` on a fresh ``root``."""
    spec = demo_spec(warehouse_uri(load_settings()), root)
    assignments = AssignmentStore.create(spark, spec.assignment_root, DEMO_CONFIG)
    results = []
    sc = spark.sparkContext
    for number, part in enumerate(demo_parts(spark, size), start=1):
        lines: list[str] = []
        echo = _echo(lines)
        echo(f"[demo] run {number}: {land_part(spec, number, part)}")
        group = f"run{number}"
        sc.setJobGroup(group, group)
        started = time.perf_counter()
        metrics = demo_run(spark, spec, assignments, number, echo)
        seconds = time.perf_counter() - started
        jobs = len(sc.statusTracker().getJobIdsForGroup(group))
        results.append(RunResult(metrics, seconds, jobs, lines))
    return results


def _echo(lines: list[str]):
    def echo(line: str) -> None:
        lines.append(line)
        print(line, flush=True)

    return echo


def stage_table(results: list[RunResult]) -> list[str]:
    """Seconds, records in and records/s per stage, for each run side by side."""
    stages: dict[str, list[tuple[float, int, int]]] = defaultdict(lambda: [(0.0, 0, 0)] * len(results))
    for i, result in enumerate(results):
        for m in result.metrics:
            seconds, records, batches = stages[m.stage][i]
            stages[m.stage][i] = (seconds + m.seconds, records + m.records_in, batches + 1)
    head = "| stage | " + " | ".join(
        f"run {i + 1} s | run {i + 1} records in | run {i + 1} records/s" for i in range(len(results))
    )
    lines = [head + " |", "|---|" + "---:|" * (3 * len(results))]
    for stage, per_run in stages.items():
        cells = []
        for seconds, records, _ in per_run:
            rate = f"{records / seconds:,.0f}" if seconds and records else "-"
            cells += [f"{seconds:.1f}", f"{records:,}", rate]
        lines.append(f"| {stage} | " + " | ".join(cells) + " |")
    return lines


def report(results: list[RunResult], size: DemoSize, setup_s: float) -> list[str]:
    first, second = results[0], results[-1]
    ratio = second.seconds / first.seconds
    lines = [
        f"Generated: {size.transactions:,} transactions and {size.rate_updates:,} rate updates; session "
        f"start and Delta jars took {setup_s:.1f} s (not counted below).",
        "",
        "| run | wall-clock s (every stage; landing not counted) | Spark jobs |",
        "|---|---:|---:|",
    ]
    lines += [f"| {i + 1} | {r.seconds:.1f} | {r.jobs} |" for i, r in enumerate(results)]
    lines += ["", *stage_table(results), ""]
    lines.append(
        f"The second run (new input only) took {ratio:.0%} of the first (target <= 15%): "
        f"{'met' if ratio <= 0.15 else 'missed'}."
    )
    for i, result in enumerate(results):
        lines += ["", f"What run {i + 1} printed:", "", "```", *result.lines, "```"]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transactions", type=int, default=1_111_111)
    parser.add_argument("--rate-updates", type=int, default=111_111)
    parser.add_argument("--out", default="bench/RESULTS_pipeline.md")
    args = parser.parse_args()
    size = DemoSize(rate_updates=args.rate_updates, transactions=args.transactions)
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    load_at_start = f"{os.getloadavg()[0]:.1f}"
    t0 = time.perf_counter()
    spark = get_spark()
    spark.range(1).count()
    setup_s = time.perf_counter() - t0
    root = tempfile.mkdtemp(prefix="bench_pipeline_")
    try:
        results = run(spark, size, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    header = [
        "## Pipeline end to end (issues 14 and 18)",
        "",
        f"Command: `flock /tmp/lakehouse-bench.lock .venv/bin/python {' '.join(sys.argv)}`; started "
        f"{started}; 1-minute load average {load_at_start} at the start, {os.getloadavg()[0]:.1f} at the end "
        f"(2 cores); Python {sys.version.split()[0]}.",
        "",
    ]
    Path(args.out).write_text("\n".join(header + report(results, size, setup_s)) + "\n")
    print("\n".join(report(results, size, setup_s)[:-1]))


if __name__ == "__main__":
    main()
