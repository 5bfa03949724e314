"""Quality suite benchmark: the versioned store's suite vs one full scan of the same table.

Run: ``flock /tmp/lakehouse-bench.lock .venv/bin/python bench/bench_quality.py [--keys 1000000 --versions
10]`` from a temporary folder; writes ``RESULTS_quality.md`` there (``--out``), to be merged into
``bench/RESULTS_quality.md``. The store is written directly (one append, as in
``bench_versioned.py``). Two comparisons, each timing one full scan of the table (every column read,
written to Spark's ``noop`` sink) and ``run_quality`` on the table (the suite's per-key aggregate, its
window pass over the keys the aggregate cannot certify, GX's expectations over the violations, the results
append and the Data Docs build), with the Spark jobs each ran:

- **first reads** (what a scheduled job pays): for ``--cold-rounds`` rounds, a fresh process times the scan
  and another fresh process times ``run_quality``, each as that process's first read of the store (after a
  warm-up round on a small store, so neither pays for JIT and first-use class loading);
- **warm** (what a session that already read the table pays): in this process, after one untimed read of
  the store, the scan and ``run_quality`` alternate for ``--rounds`` rounds.

The machine is shared, so each verdict compares medians.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from statistics import median

from pyspark.sql import SparkSession

sys.path.insert(0, str(Path(__file__).parent))
from bench_versioned import Measured, bulk_store, load, measure

from lakehouse.config import Settings, load_settings
from lakehouse.quality import QualityReport, run_quality
from lakehouse.session import get_spark


def full_scan(spark: SparkSession, path: str) -> None:
    """Read every row and column of the table once (Spark's ``noop`` sink writes nothing)."""
    spark.read.format("delta").load(path).write.format("noop").mode("overwrite").save()


def warm_up(spark: SparkSession, root: Path) -> None:
    """One small round of both contenders, so no timed call pays for JIT and first-use class loading."""
    warm = str(root / "warm" / "store")
    bulk_store(spark, warm, 10_000, 2)
    full_scan(spark, warm)
    run_quality(spark, str(root / "warm"), [warm])


def first_read(what: str, path: str, partitions: int) -> Measured:
    """In this (fresh) process: warm up, then time ``what`` (scan or quality) as the store's first read."""
    spark = get_spark(settings=_settings(partitions))
    root = Path(tempfile.mkdtemp(prefix="bench_quality_first_"))
    try:
        warm_up(spark, root)
        if what == "scan":
            return measure(spark, "first scan", lambda: full_scan(spark, path))
        report: list[QualityReport] = []
        measured = measure(
            spark, "first quality", lambda: report.append(run_quality(spark, str(root / "q"), [path]))
        )
        assert report[0].success, report[0].lines()
        return measured
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run(args: argparse.Namespace) -> list[str]:
    spark = get_spark(settings=_settings(args.partitions))
    root = Path(tempfile.mkdtemp(prefix="bench_quality_"))
    try:
        warm_up(spark, root)
        path = str(root / "big" / "store")
        bulk_store(spark, path, args.keys, args.versions)
        cold_rows, cold_scans, cold_qualities = [], [], []
        for n in range(1, args.cold_rounds + 1):
            scan, quality = _in_fresh_process("scan", path, args), _in_fresh_process("quality", path, args)
            cold_scans.append(scan.seconds)
            cold_qualities.append(quality.seconds)
            cold_rows += [_row(n, _SCAN, scan), _row(n, _QUALITY, quality)]
        full_scan(spark, path)  # the warm rounds: this process has read the store once
        reports = []
        warm_rows, scans, qualities = [], [], []
        for n in range(1, args.rounds + 1):
            scan = measure(spark, f"scan {n}", lambda: full_scan(spark, path))
            quality = measure(
                spark, f"quality {n}", lambda: reports.append(run_quality(spark, str(root / "big"), [path]))
            )
            scans.append(scan.seconds)
            qualities.append(quality.seconds)
            warm_rows += [_row(n, _SCAN, scan), _row(n, _QUALITY, quality)]
        assert all(report.success for report in reports), [report.lines() for report in reports]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    versions = args.keys * args.versions
    table = ["| round | run | seconds | Spark jobs | load before-after |", "|---|---|---|---|---|"]
    return [
        f"Store: {args.keys:,} keys x {args.versions} versions = {versions:,} versions "
        f"({args.partitions} shuffle partitions).",
        "",
        "First reads (each run in a fresh process, after a warm-up on a small store):",
        "",
        *table,
        *cold_rows,
        "",
        _verdict("First reads", cold_qualities, cold_scans),
        "",
        "Warm (one process, the store read once before):",
        "",
        *table,
        *warm_rows,
        "",
        _verdict("Warm", qualities, scans),
    ]


def _in_fresh_process(what: str, path: str, args: argparse.Namespace) -> Measured:
    command = [sys.executable, __file__, "--first-read", what, "--path", path]
    command += ["--partitions", str(args.partitions)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return Measured(**json.loads(done.stdout.strip().splitlines()[-1]))


def _verdict(label: str, qualities: list[float], scans: list[float]) -> str:
    ratio = median(qualities) / median(scans)
    return (
        f"{label}: medians {median(qualities):.1f} s vs {median(scans):.1f} s: the suite costs {ratio:.2f}x "
        f"one full scan (target <= 2x): {'met' if ratio <= 2 else 'missed'}."
    )


def _settings(partitions: int) -> Settings:
    return load_settings(overrides={"shuffle_partitions": partitions, "log_level": "ERROR"})


_SCAN = "one full scan (all columns, noop sink)"
_QUALITY = "`run_quality` on the store (7 expectations)"


def _row(round_number: int, run: str, measured: Measured) -> str:
    return f"| {round_number} | {run} | {measured.seconds:.1f} | {measured.jobs} | {measured.load} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--versions", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cold-rounds", type=int, default=2)
    parser.add_argument("--out", default="RESULTS_quality.md")
    parser.add_argument("--first-read", choices=("scan", "quality"), help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.first_read:  # a fresh process of run(): one first read, printed as JSON
        print(json.dumps(asdict(first_read(args.first_read, args.path, args.partitions))))
        return
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    load_at_start = load()
    lines = run(args)
    print("\n".join(lines), flush=True)
    header = [
        "## Data quality (issue 15)",
        "",
        f"Command: `flock /tmp/lakehouse-bench.lock .venv/bin/python {' '.join(sys.argv)}`; started "
        f"{started}; 1-minute load average {load_at_start} at the start, {load()} at the end.",
        "",
    ]
    Path(args.out).write_text("\n".join(header + lines) + "\n")


if __name__ == "__main__":
    main()
