"""Quality suite benchmark: the versioned store's suite vs one full scan of the same table.

Run: ``flock /tmp/lakehouse-bench.lock .venv/bin/python bench/bench_quality.py [--keys 1000000 --versions
10]``; writes ``bench/RESULTS_quality.md``. The store is written directly (one append, as in
``bench_versioned.py``); after a warm-up round on a small store, it times one full scan of the table (every
column read, written to Spark's ``noop`` sink) and ``run_quality`` on the table (the suite's per-key
aggregate, its window pass over the keys the aggregate cannot certify, GX's expectations over the
violations, the results append and the Data Docs build), with the Spark jobs each ran. The two alternate
for ``--rounds`` rounds (the machine is shared: one sample of each says little); the verdict compares the
medians.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from statistics import median

from pyspark.sql import SparkSession

sys.path.insert(0, str(Path(__file__).parent))
from bench_versioned import Measured, bulk_store, load, measure

from lakehouse.config import load_settings
from lakehouse.quality import run_quality
from lakehouse.session import get_spark


def full_scan(spark: SparkSession, path: str) -> None:
    """Read every row and column of the table once (Spark's ``noop`` sink writes nothing)."""
    spark.read.format("delta").load(path).write.format("noop").mode("overwrite").save()


def run(args: argparse.Namespace) -> list[str]:
    settings = load_settings(overrides={"shuffle_partitions": args.partitions, "log_level": "ERROR"})
    spark = get_spark(settings=settings)
    root = Path(tempfile.mkdtemp(prefix="bench_quality_"))
    try:
        warm = str(root / "warm" / "store")
        bulk_store(spark, warm, 10_000, 2)
        full_scan(spark, warm)
        run_quality(spark, str(root / "warm"), [warm])
        path = str(root / "big" / "store")
        bulk_store(spark, path, args.keys, args.versions)
        reports = []
        rows = []
        scans, qualities = [], []
        for n in range(1, args.rounds + 1):
            scan = measure(spark, f"scan {n}", lambda: full_scan(spark, path))
            quality = measure(
                spark, f"quality {n}", lambda: reports.append(run_quality(spark, str(root / "big"), [path]))
            )
            scans.append(scan.seconds)
            qualities.append(quality.seconds)
            rows += [
                _row(n, "one full scan (all columns, noop sink)", scan),
                _row(n, "`run_quality` on the store (7 expectations)", quality),
            ]
        assert all(report.success for report in reports), [report.lines() for report in reports]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    versions = args.keys * args.versions
    ratio = median(qualities) / median(scans)
    return [
        f"Store: {args.keys:,} keys x {args.versions} versions = {versions:,} versions "
        f"({args.partitions} shuffle partitions).",
        "",
        "| round | run | seconds | Spark jobs | load before-after |",
        "|---|---|---|---|---|",
        *rows,
        "",
        f"Medians: {median(qualities):.1f} s vs {median(scans):.1f} s. The suite costs {ratio:.2f}x one full "
        f"scan (target <= 2x): {'met' if ratio <= 2 else 'missed'}.",
    ]


def _row(round_number: int, run: str, measured: Measured) -> str:
    return f"| {round_number} | {run} | {measured.seconds:.1f} | {measured.jobs} | {measured.load} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--versions", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default="bench/RESULTS_quality.md")
    args = parser.parse_args()
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    load_at_start = load()
    lines = run(args)
    header = [
        "## Data quality (issue 15)",
        "",
        f"Command: `flock /tmp/lakehouse-bench.lock .venv/bin/python {' '.join(sys.argv)}`; started "
        f"{started}; 1-minute load average {load_at_start} at the start, {load()} at the end.",
        "",
    ]
    Path(args.out).write_text("\n".join(header + lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
