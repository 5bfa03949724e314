"""Quality suite benchmark: the versioned store's suite vs one full scan of the same table.

Run: ``flock /tmp/lakehouse-bench.lock .venv/bin/python bench/bench_quality.py [--keys 1000000 --versions
10]``; writes ``bench/RESULTS_quality.md``. The store is written directly (one append, as in
``bench_versioned.py``); after a warm-up round on a small store, it times one full scan of the table (every
column read, written to Spark's ``noop`` sink) and ``run_quality`` on the table (the suite's one window pass,
GX's expectations over the violations, the results append and the Data Docs build), with the Spark jobs
each ran.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import SparkSession

sys.path.insert(0, str(Path(__file__).parent))
from bench_versioned import bulk_store, load, measure

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
        scan = measure(spark, "scan", lambda: full_scan(spark, path))
        report = None

        def check() -> None:
            nonlocal report
            report = run_quality(spark, str(root / "big"), [path])

        quality = measure(spark, "quality", check)
        assert report is not None and report.success, report and report.lines()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    versions = args.keys * args.versions
    ratio = quality.seconds / scan.seconds
    return [
        f"Store: {args.keys:,} keys x {args.versions} versions = {versions:,} versions "
        f"({args.partitions} shuffle partitions).",
        "",
        "| run | seconds | Spark jobs | load before-after |",
        "|---|---|---|---|",
        f"| one full scan (all columns, noop sink) | {scan.seconds:.1f} | {scan.jobs} | {scan.load} |",
        f"| `run_quality` on the store (7 expectations) | {quality.seconds:.1f} | {quality.jobs} | "
        f"{quality.load} |",
        "",
        f"The suite costs {ratio:.2f}x one full scan (target <= 2x): "
        f"{'met' if ratio <= 2 else 'missed'}.",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--versions", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=8)
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
