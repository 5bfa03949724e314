"""Quality suite benchmark: the versioned store's suite vs one full scan of the same table.

Run: ``flock /tmp/lakehouse-bench.lock .venv/bin/python bench/bench_quality.py [--keys 1000000 --versions
10]`` from a temporary folder; writes ``RESULTS_quality.md`` there (``--out``), to be merged into
``bench/RESULTS_quality.md``. The store is written directly (one append, as in
``bench_versioned.py``). Two comparisons, each timing one full scan of the table (every column read,
the sum of a hash of each row) and a full check, ``run_quality(..., full=True)``, of the table (the
suite's per-key aggregate, its window pass over the keys the aggregate cannot certify, GX's expectations
over the violations, the results append and the Data Docs build), with the Spark jobs each ran. Next to
them, the **floor** of any exact per-key check (every per-key rule, ``unique (key, valid_from)`` first,
needs all of a key's versions in one task, and a key's versions sit in every time segment): one exchange
of every version's ``(key, valid_from)`` by key with nothing computed (Spark's ``noop`` sink), and the
cheapest per-key aggregate, ``groupBy(key).count()`` of every version:

- **first reads** (what a scheduled job pays): for ``--cold-rounds`` rounds, a fresh process times the scan
  and another fresh process times ``run_quality``, each as that process's first read of the store (after a
  warm-up round on a small store, so neither pays for JIT and first-use class loading);
- **warm** (what a session that already read the table pays): in this process, after one untimed read of
  the store, the scan and ``run_quality`` alternate for ``--rounds`` rounds.

Then the same two comparisons for the **incremental** check that follows a passed one (what the scheduled
job pays from its second run on): before each round a 1% change is applied, untimed (a ``put_all`` of a
new version for 1% of the keys, then ``seal()``), and ``run_quality`` checks the keys changed since the
last passed check (its verdict must say "incremental since version N"), against one full scan of the
changed table.

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
from pyspark.sql import functions as F

sys.path.insert(0, str(Path(__file__).parent))
from bench_versioned import STEP_S, Measured, bulk_store, load, measure

from lakehouse.config import Settings, load_settings
from lakehouse.quality import QualityReport, run_quality
from lakehouse.session import get_spark
from lakehouse.versioned import VersionedStore


def full_scan(spark: SparkSession, path: str) -> None:
    """Read every row and column of the table once: the sum of a hash of each row's columns, so no column
    can be pruned and no count can come from the log's statistics. (Delta 4.4 refuses to write a frame
    read from a table with deletion vectors, which a seal leaves, even to Spark's ``noop`` sink: "Cannot
    work with a non-pinned table snapshot".)"""
    table = spark.read.format("delta").load(path)
    table.select(F.sum(F.hash(*table.columns))).collect()


def exchange_floor(spark: SparkSession, path: str) -> None:
    """One exchange of every version's key and ``valid_from`` by key, nothing computed after it (the
    ``noop`` sink): what any check that brings a key's versions together pays at least. (Fails on a table
    with deletion vectors, see :func:`full_scan`: the full-check rounds run before any seal.)"""
    table = spark.read.format("delta").load(path)
    table.select(KEY, "valid_from").repartition(KEY).write.format("noop").mode("overwrite").save()


def group_floor(spark: SparkSession, path: str) -> None:
    """The cheapest per-key aggregate of every version: the keys with more than one version, counted."""
    table = spark.read.format("delta").load(path)
    table.groupBy(KEY).count().where(F.col("count") > 1).count()


def warm_up(spark: SparkSession, root: Path) -> None:
    """One small round of every contender (full and incremental check), so no timed call pays for JIT and
    first-use class loading."""
    warm = str(root / "warm" / "store")
    bulk_store(spark, warm, 10_000, 2)
    full_scan(spark, warm)
    exchange_floor(spark, warm)
    group_floor(spark, warm)
    run_quality(spark, str(root / "warm"), [warm])
    change_one_percent(spark, warm, 10_000, 2, 1)
    assert _is_incremental(run_quality(spark, str(root / "warm"), [warm]))


def change_one_percent(spark: SparkSession, path: str, keys: int, versions: int, round_number: int) -> None:
    """A new version, after every stored one, for 1% of the keys (one ``put_all`` batch), then ``seal()``."""
    changed = spark.range(max(1, keys // 100)).select(
        (F.col("id") * 100 + round_number % 100).alias("k"),
        F.rand(round_number).alias("v"),
        F.timestamp_seconds(F.lit((versions + round_number) * STEP_S)).alias("timestamp"),
        F.lit(0).alias("partition"),
        F.col("id").alias("offset"),
    )
    store = VersionedStore.open(spark, path, writer="bench")
    store.put_all(changed, batch_id=round_number)
    store.seal()


def _is_full(report: QualityReport) -> bool:
    return report.success and all(v.scope == "full" for v in report.verdicts)


def _is_incremental(report: QualityReport) -> bool:
    return report.success and all(v.scope.startswith("incremental since") for v in report.verdicts)


def first_read(what: str, path: str, partitions: int) -> Measured:
    """In this (fresh) process: warm up, then time ``what`` as the store's first read: ``scan``, a floor
    (``exchange``, ``group``), ``quality`` (a full check, results elsewhere) or ``incremental`` (a check
    recording its results next to the store, where the last passed check is)."""
    spark = get_spark(settings=_settings(partitions))
    root = Path(tempfile.mkdtemp(prefix="bench_quality_first_"))
    try:
        warm_up(spark, root)
        if what in _READS:
            return measure(spark, f"first {what}", lambda: _READS[what](spark, path))
        warehouse = str(Path(path).parent) if what == "incremental" else str(root / "q")
        full = what == "quality"
        report: list[QualityReport] = []
        measured = measure(
            spark, f"first {what}", lambda: report.append(run_quality(spark, warehouse, [path], full=full))
        )
        assert report[0].success, report[0].lines()
        assert (_is_full if full else _is_incremental)(report[0]), report[0].lines()
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
        cold_floors: dict[str, list[float]] = {what: [] for what in _FLOORS}
        for n in range(1, args.cold_rounds + 1):
            scan = _in_fresh_process("scan", path, args)
            floors = {what: _in_fresh_process(what, path, args) for what in _FLOORS}
            quality = _in_fresh_process("quality", path, args)
            cold_scans.append(scan.seconds)
            cold_qualities.append(quality.seconds)
            cold_rows.append(_row(n, _SCAN, scan))
            for what, floor in floors.items():
                cold_floors[what].append(floor.seconds)
                cold_rows.append(_row(n, _FLOORS[what], floor))
            cold_rows.append(_row(n, _QUALITY, quality))
        full_scan(spark, path)  # the warm rounds: this process has read the store once
        reports = []
        warm_rows, scans, qualities = [], [], []
        warm_floors: dict[str, list[float]] = {what: [] for what in _FLOORS}
        for n in range(1, args.rounds + 1):
            scan = measure(spark, f"scan {n}", lambda: full_scan(spark, path))
            warm_rows.append(_row(n, _SCAN, scan))
            for what in _FLOORS:
                floor = measure(spark, f"{what} {n}", lambda what=what: _READS[what](spark, path))
                warm_floors[what].append(floor.seconds)
                warm_rows.append(_row(n, _FLOORS[what], floor))
            quality = measure(
                spark,
                f"quality {n}",
                lambda: reports.append(run_quality(spark, str(root / "big"), [path], full=True)),
            )
            scans.append(scan.seconds)
            qualities.append(quality.seconds)
            warm_rows.append(_row(n, _QUALITY, quality))
        assert all(_is_full(report) for report in reports), [report.lines() for report in reports]
        incremental = _incremental_rounds(spark, path, args)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    versions = args.keys * args.versions
    return [
        f"Store: {args.keys:,} keys x {args.versions} versions = {versions:,} versions "
        f"({args.partitions} shuffle partitions).",
        "",
        *_tables(
            "",
            (cold_rows, cold_qualities, cold_scans),
            (warm_rows, qualities, scans),
            (_floor_verdicts(cold_floors, cold_scans), _floor_verdicts(warm_floors, scans)),
        ),
        "",
        *incremental,
    ]


#: One comparison's table rows, the check's seconds and the scan's seconds.
_Runs = tuple[list[str], list[float], list[float]]


def _tables(
    label: str, cold: _Runs, warm: _Runs, floors: tuple[list[str], list[str]] = ([], [])
) -> list[str]:
    """The first-read and the warm table, each with its verdict: ``(rows, check seconds, scan seconds)``;
    ``floors``: the floors' verdict lines after each table's."""
    table = ["| round | run | seconds | Spark jobs | load before-after |", "|---|---|---|---|---|"]
    return [
        "First reads (each run in a fresh process, after a warm-up on a small store):",
        "",
        *table,
        *cold[0],
        "",
        *floors[0],
        _verdict(f"{label}first reads".capitalize(), cold[1], cold[2]),
        "",
        "Warm (one process, the store read once before):",
        "",
        *table,
        *warm[0],
        "",
        *floors[1],
        _verdict(f"{label}warm".capitalize(), warm[1], warm[2]),
    ]


def _floor_verdicts(floors: dict[str, list[float]], scans: list[float]) -> list[str]:
    """One line per floor: its median and its ratio to the scan's, each followed by a blank line."""
    lines = []
    for what, seconds in floors.items():
        ratio = median(seconds) / median(scans)
        lines += [
            f"Floor, {_FLOOR_NAMES[what]}: median {median(seconds):.1f} s vs {median(scans):.1f} s, "
            f"{ratio:.2f}x one full scan.",
            "",
        ]
    return lines


def _incremental_rounds(spark: SparkSession, path: str, args: argparse.Namespace) -> list[str]:
    """The incremental check after a 1% change vs one full scan: first reads, then warm rounds."""
    cold_rows, cold_scans, cold_checks = [], [], []
    for n in range(1, args.cold_rounds + 1):
        change_one_percent(spark, path, args.keys, args.versions, n)
        scan, check = _in_fresh_process("scan", path, args), _in_fresh_process("incremental", path, args)
        cold_scans.append(scan.seconds)
        cold_checks.append(check.seconds)
        cold_rows += [_row(n, _SCAN, scan), _row(n, _INCREMENTAL, check)]
    warm_rows, scans, checks, reports = [], [], [], []
    warehouse = str(Path(path).parent)
    for n in range(args.cold_rounds + 1, args.cold_rounds + args.rounds + 1):
        change_one_percent(spark, path, args.keys, args.versions, n)
        scan = measure(spark, f"scan {n}", lambda: full_scan(spark, path))
        check = measure(
            spark, f"incremental {n}", lambda: reports.append(run_quality(spark, warehouse, [path]))
        )
        scans.append(scan.seconds)
        checks.append(check.seconds)
        warm_rows += [_row(n, _SCAN, scan), _row(n, _INCREMENTAL, check)]
    assert all(_is_incremental(report) for report in reports), [report.lines() for report in reports]
    changed = max(1, args.keys // 100)
    return [
        f"Incremental check after a passed one: before each round, untimed, a `put_all` of a new version for "
        f"{changed:,} keys (1%) and `seal()`; the check's verdict: `{reports[-1].verdicts[0].scope}`.",
        "",
        *_tables("Incremental, ", (cold_rows, cold_checks, cold_scans), (warm_rows, checks, scans)),
    ]


def _in_fresh_process(what: str, path: str, args: argparse.Namespace) -> Measured:
    command = [sys.executable, __file__, "--first-read", what, "--path", path]
    command += ["--partitions", str(args.partitions)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n" + done.stderr[-4000:])
    return Measured(**json.loads(done.stdout.strip().splitlines()[-1]))


def _verdict(label: str, qualities: list[float], scans: list[float]) -> str:
    ratio = median(qualities) / median(scans)
    return (
        f"{label}: medians {median(qualities):.1f} s vs {median(scans):.1f} s: the suite costs {ratio:.2f}x "
        f"one full scan (target <= 2x): {'met' if ratio <= 2 else 'missed'}."
    )


def _settings(partitions: int) -> Settings:
    return load_settings(overrides={"shuffle_partitions": partitions, "log_level": "ERROR"})


KEY = "k"  # the key column of ``bulk_store``'s stores
#: What a fresh process can time as its first read of the store, besides the checks.
_READS = {"scan": full_scan, "exchange": exchange_floor, "group": group_floor}
_SCAN = "one full scan (all columns, sum of a row hash)"
_FLOORS = {
    "exchange": "floor: one exchange of every (k, valid_from) by k, `noop` sink",
    "group": "floor: `groupBy(k).count()` of every version, keys with > 1 counted",
}
_FLOOR_NAMES = {"exchange": "one exchange by key", "group": "`groupBy(k).count()`"}
_QUALITY = "`run_quality` on the store (7 expectations)"
_INCREMENTAL = "`run_quality`, incremental since the last passed check"


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
    first_reads = (*_READS, "quality", "incremental")
    parser.add_argument("--first-read", choices=first_reads, help=argparse.SUPPRESS)
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
