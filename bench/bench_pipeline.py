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
its Spark jobs. Where a run's time goes, from Spark's event log of the session (:func:`spark_time`): the
seconds some Spark job was running, the rest (the driver alone: planning, Delta log reads and commits,
stream starts, Python), and the executors' task seconds (the work on the data, summed over tasks).

Next to each run, two floors (:mod:`pipeline_floor`): the same stages over the same landed files in bare
Spark and Delta, doing less than the issue asks. The **floor** shows what the issue's shape itself costs;
**floor+** adds only the tables and reads the issue names (a seen-ID index and a quarantine, maintain's
commit reads, the last assignment). Run 1 is lakehouse's, then the floors'; run 2 is the floors', then
lakehouse's. So a floor's run 2 has at least the warm-up lakehouse's run 2 would have in a process of its own
(lakehouse's run 1, plus the floors' earlier runs), and lakehouse's run 2 runs in the warmest JVM: a floor's
run 2 over 15% of lakehouse's run 1 shows the target out of reach for anything doing at least that floor's
work.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pipeline_floor import STEPS, floor_run
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
    window_ms: tuple[int, int]  # epoch milliseconds of the run's start and end
    steps: list[tuple[str, tuple[int, int]]]  # each step's name and window: from the one before to its line


@dataclass(frozen=True)
class FloorResult:
    """One run of the floor (:mod:`pipeline_floor`): seconds per step and in all, and its Spark jobs."""

    steps: dict[str, float]
    seconds: float
    jobs: int


#: The floors, by name: whether each keeps the issue's tables (floor+, see :mod:`pipeline_floor`).
FLOORS = {"floor": False, "floor+": True}


def run(
    spark: SparkSession, size: DemoSize, root: str
) -> tuple[list[RunResult], dict[str, list[FloorResult]]]:
    """The demo's two runs at ``size`` on a fresh ``root``, and each floor's over the same landed parts (under
    ``root/floor`` and ``root/floor_plus``): lakehouse's run 1 before the floors', its run 2 after theirs."""
    warehouse = warehouse_uri(load_settings())
    spec = demo_spec(warehouse, root)
    floor_specs = {name: demo_spec(warehouse, f"{spec.root}/{name.replace('+', '_plus')}") for name in FLOORS}
    assignments = AssignmentStore.create(spark, spec.assignment_root, DEMO_CONFIG)
    results: list[RunResult] = []
    floors: dict[str, list[FloorResult]] = {name: [] for name in FLOORS}
    sc = spark.sparkContext

    def lakehouse_run(number: int, landed: str) -> None:
        lines: list[str] = []
        marks: list[tuple[int, str]] = []
        echo = _echo(lines, marks)
        echo(f"[demo] run {number}: {landed}")
        group = f"run{number}"
        sc.setJobGroup(group, group)
        started, started_ms = time.perf_counter(), int(time.time() * 1000)
        metrics = demo_run(spark, spec, assignments, number, echo)
        seconds = time.perf_counter() - started
        jobs = len(sc.statusTracker().getJobIdsForGroup(group))
        window = (started_ms, int(time.time() * 1000))
        results.append(RunResult(metrics, seconds, jobs, lines, window, _steps(marks, started_ms)))

    def floor_runs(number: int) -> None:
        for name, issue_tables in FLOORS.items():
            group = f"{name}{number}"
            sc.setJobGroup(group, group)
            started = time.perf_counter()
            floor_spec = floor_specs[name]
            steps = floor_run(spark, floor_spec, floor_spec.root, number, issue_tables)
            seconds = time.perf_counter() - started
            floors[name].append(FloorResult(steps, seconds, len(sc.statusTracker().getJobIdsForGroup(group))))
            print(
                f"[{name}] run {number}: {seconds:.1f} s "
                + ", ".join(f"{k} {v:.1f}" for k, v in steps.items())
            )

    for number, part in enumerate(demo_parts(spark, size), start=1):
        landed = land_part(spec, number, part)
        for floor_spec in floor_specs.values():
            land_part(floor_spec, number, part)
        if number == 1:
            lakehouse_run(number, landed)
            floor_runs(number)
        else:
            floor_runs(number)
            lakehouse_run(number, landed)
    return results, floors


def _echo(lines: list[str], marks: list[tuple[int, str]]):
    def echo(line: str) -> None:
        lines.append(line)
        marks.append((int(time.time() * 1000), line))
        print(line, flush=True)

    return echo


def _steps(marks: list[tuple[int, str]], start_ms: int) -> list[tuple[str, tuple[int, int]]]:
    """Each step of a run (the demo's subscription, then each stage) and its window: from the line before
    it to its own line (a stage prints when its micro-batch is done)."""
    steps = []
    for at, line in marks:
        if at < start_ms:
            continue
        name = line.split("]", 1)[0].split(":", 1)[-1] if line.startswith("[demo:") else "subscribe"
        steps.append((name, (start_ms, at)))
        start_ms = at
    return steps


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


@dataclass(frozen=True)
class SparkTime:
    """Where a run's wall clock went, from the event log: seconds with at least one Spark job running, and
    the executors' task seconds (``Executor Run Time`` summed over the run's tasks)."""

    job_s: float
    task_s: float


@dataclass(frozen=True)
class EventLog:
    """What :func:`spark_time` needs of a session's event log: each job's span and each task's run time
    (epoch milliseconds)."""

    jobs: list[tuple[int, int]]  # (submitted, completed)
    tasks: list[tuple[int, int]]  # (launched, executor run ms)


def read_event_log(event_log: Path) -> EventLog:
    """The jobs and tasks of the uncompressed event log(s) of the session under ``event_log``."""
    jobs: dict[int, list[int]] = {}
    tasks: list[tuple[int, int]] = []
    for file in sorted(event_log.rglob("events_*")):  # Spark 4's rolling event log: a folder of files
        for line in file.open():
            event = json.loads(line)
            kind = event["Event"]
            if kind == "SparkListenerJobStart":
                jobs[event["Job ID"]] = [event["Submission Time"], event["Submission Time"]]
            elif kind == "SparkListenerJobEnd" and event["Job ID"] in jobs:
                jobs[event["Job ID"]][1] = event["Completion Time"]
            elif kind == "SparkListenerTaskEnd" and event.get("Task Metrics"):
                tasks.append((event["Task Info"]["Launch Time"], event["Task Metrics"]["Executor Run Time"]))
    return EventLog([(s, e) for s, e in jobs.values()], tasks)


def spark_time(log: EventLog, windows: list[tuple[int, int]]) -> list[SparkTime]:
    """:class:`SparkTime` of each window (epoch milliseconds): the jobs submitted and tasks launched in it."""
    found = []
    for start, end in windows:
        spans = sorted((s, e) for s, e in log.jobs if start <= s <= end)
        busy, covered = 0, start
        for s, e in spans:  # the union of the jobs' spans
            busy += max(0, e - max(s, covered))
            covered = max(covered, e)
        task_ms = sum(ms for launched, ms in log.tasks if start <= launched <= end)
        found.append(SparkTime(busy / 1000, task_ms / 1000))
    return found


def step_time_table(results: list[RunResult], times: list[list[SparkTime]]) -> list[str]:
    """Per step (stage) and run: seconds with a Spark job running and executor task seconds."""
    head = "| step | " + " | ".join(
        f"run {i + 1} s with a job | run {i + 1} task s" for i in range(len(results))
    )
    lines = [head + " |", "|---|" + "---:|" * (2 * len(results))]
    per_run = [
        dict(zip([n for n, _ in r.steps], t, strict=True)) for r, t in zip(results, times, strict=True)
    ]
    for name in dict.fromkeys(n for r in results for n, _ in r.steps):
        cells = [
            f"{run[name].job_s:.1f} | {run[name].task_s:.1f}" if name in run else "- | -" for run in per_run
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def report(
    results: list[RunResult],
    floors: dict[str, list[FloorResult]],
    size: DemoSize,
    setup_s: float,
    times: list[SparkTime],
    steps: list[list[SparkTime]],
) -> list[str]:
    first, second = results[0], results[-1]
    ratio = second.seconds / first.seconds
    task_ratio = times[-1].task_s / times[0].task_s
    lines = [
        f"Generated: {size.transactions:,} transactions and {size.rate_updates:,} rate updates; session "
        f"start and Delta jars took {setup_s:.1f} s (not counted below).",
        "",
        "| run | wall-clock s (every stage; landing not counted) | Spark jobs | s with a Spark job running "
        "| s of the driver alone | executor task s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {i + 1} | {r.seconds:.1f} | {r.jobs} | {t.job_s:.1f} | {r.seconds - t.job_s:.1f} "
        f"| {t.task_s:.1f} |"
        for i, (r, t) in enumerate(zip(results, times, strict=True))
    ]
    lines += ["", *stage_table(results), "", *step_time_table(results, steps), ""]
    lines.append(
        f"The second run (new input only) took {ratio:.0%} of the first (target <= 15%): "
        f"{'met' if ratio <= 0.15 else 'missed'}. Its executor task time was {task_ratio:.0%} of the "
        f"first's; the driver alone took {first.seconds - times[0].job_s:.1f} s of run 1 and "
        f"{second.seconds - times[-1].job_s:.1f} s of run 2."
    )
    lines += ["", *floor_table(results, floors)]
    for i, result in enumerate(results):
        lines += ["", f"What run {i + 1} printed:", "", "```", *result.lines, "```"]
    return lines


def floor_table(results: list[RunResult], floors: dict[str, list[FloorResult]]) -> list[str]:
    """Each floor's seconds per step and run next to lakehouse's, and what their run 2 is a share of."""
    # lakehouse's steps by their windows (from the line before to their own), stream start and stop included
    ours = [{name: (end - start) / 1000 for name, (start, end) in r.steps} for r in results]
    names = list(floors)
    runs = range(len(results))
    head = " | ".join(
        f"run {i + 1}: lakehouse s | " + " | ".join(f"run {i + 1}: {n} s" for n in names) for i in runs
    )
    lines = [
        "The floors (`bench/pipeline_floor.py`: the same stages in bare Spark and Delta, doing less than the "
        "issue asks, on the same landed files; floor+ adds the issue's tables). Run 1 is lakehouse's first, "
        "run 2 the floors' first. Each step's seconds run from its start to its end (for lakehouse, from the "
        "line before it to its own line):",
        "",
        f"| step | {head} |",
        "|---|" + "---:|" * ((1 + len(names)) * len(results)),
    ]

    # Per run, its columns: lakehouse's, then each floor's (steps' seconds, wall-clock seconds, Spark jobs).
    columns: list[tuple[dict[str, float], float, int]] = []
    for i, (result, steps) in enumerate(zip(results, ours, strict=True)):
        columns.append((steps, result.seconds, result.jobs))
        columns += [(floors[n][i].steps, floors[n][i].seconds, floors[n][i].jobs) for n in names]
    for step in STEPS:
        lines.append(
            f"| {step} | " + " | ".join(f"{c[0].get(step, float('nan')):.1f}" for c in columns) + " |"
        )
    lines.append("| every step (wall clock) | " + " | ".join(f"**{c[1]:.1f}**" for c in columns) + " |")
    lines.append("| Spark jobs (of the run's own thread) | " + " | ".join(f"{c[2]}" for c in columns) + " |")
    first = results[0].seconds
    lines.append("")
    for name in names:
        second = floors[name][-1].seconds
        verdict = "over" if second > 0.15 * first else "within"
        own = second / floors[name][0].seconds
        lines.append(
            f"The {name}'s run 2 took {second:.1f} s: {second / first:.0%} of lakehouse's run 1, {verdict} "
            f"the target's budget of {0.15 * first:.1f} s, and {own:.0%} of its own run 1."
        )
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
    root = tempfile.mkdtemp(prefix="bench_pipeline_")
    event_log = Path(root) / "event_log"
    event_log.mkdir()
    spark = get_spark(
        {
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": event_log.as_uri(),
            "spark.eventLog.compress": "false",
        }
    )
    spark.range(1).count()
    setup_s = time.perf_counter() - t0
    try:
        results, floors = run(spark, size, root)
        spark.stop()  # flushes the event log
        log = read_event_log(event_log)
        times = spark_time(log, [r.window_ms for r in results])
        steps = [spark_time(log, [w for _, w in r.steps]) for r in results]
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
    lines = report(results, floors, size, setup_s, times, steps)
    Path(args.out).write_text("\n".join(header + lines) + "\n")
    print("\n".join(lines[:-1]))


if __name__ == "__main__":
    main()
