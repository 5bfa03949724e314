"""Replica benchmark: catch-up cost grows with the changes, not the table (issue 13).

Two versioned stores with the same keys: a small one (``--keys`` keys, one version each) and a large one
(the same keys, ``--versions`` versions each). Two change sets of the same size go into both, and two
caught-up replicas of each sync each of them (timed): a whole-table replica (``shard=None``: copies of
the source's files, a sync replays the range's file actions) and a replica of ``Shard(0, 1)`` (the same
rows, applied row by row from the Change Data Feed, as every shard's replica is):

- **MERGE-shaped**: a new version for ``--changed`` keys, put with ``put_all`` and sealed by ``seal()``. A new
  version of a key is two change rows (the old latest version gets its ``valid_to``, the new one is
  inserted), so ``--changed 50000`` changes 100,000 rows: 1% of a 10M-row store. The row-level replica
  MERGEs them; the file-level one copies the seal's new files and deletion vectors.
- **Insert-only** (the store's append write path, where a batch's new versions are appended to a pending
  partition and a later compaction seals them): ``2 * --changed`` new versions appended in one plain Delta
  append with the store's commit metadata, into the store's pending partition (what ``put_all`` writes
  when nothing is pending, without its batch plan). The replica sees from the commit infos that the range
  only inserted rows and appends them.

Each round (``--rounds``, default 3) applies both change sets and times every replica's sync of each (and the
source's own ``seal()``, and, alone, the read of the shard's change rows of the seal's sync: Delta's Change
Data Feed of that range); then
an untimed ``seal()`` and sync leave nothing pending for the next round. Finally the large store's table is
restored from nothing into ``--rounds`` fresh replicas of each kind (timed). Every figure is the median
run, and each kind's incremental syncs are compared with its cold restore. A tiny store is synced every
way first (untimed), so no timed sync pays the JVM's first use of a path. Each timed call runs in its own
Spark job group: the results give its job count and the replica commit's ``operationMetrics``.

Run: ``flock /tmp/lakehouse-bench.lock .venv/bin/python bench/bench_replica.py [--keys 1000000
--versions 10 --changed 50000 --rounds 3] [--out FILE]``; writes ``bench/RESULTS_replica.md`` (or ``--out``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse.config import load_settings
from lakehouse.replica import Replica, Shard
from lakehouse.replica._changes import CHANGE_TYPE, read_changes
from lakehouse.session import get_spark
from lakehouse.versioned import VersionedStore
from lakehouse.versioned.pending import PENDING_SEGMENT
from lakehouse.versioned.segments import segment_column

BENCH = Path(__file__).resolve().parent
SCHEMA = T.StructType([T.StructField("k", T.LongType()), T.StructField("v", T.DoubleType())])
STEP_S = 1800
RETENTION = timedelta(days=365)
INTERVAL = timedelta(hours=6)
#: The replica kinds compared: (label, shard).
KINDS = (("whole table, file copies", None), ("Shard(0, 1), rows", Shard(0, 1)))
STORE_META = '{"lakehouse": {"app_id": "lakehouse.versioned_store", "batch_id": %d, "stream_time_us": %d}}'


def bulk_store(spark: SparkSession, path: str, keys: int, versions: int) -> VersionedStore:
    """A store of ``keys`` x ``versions`` versions written with one append (its CDF records the inserts)."""
    store = VersionedStore.create(spark, path, "k", SCHEMA, RETENTION, INTERVAL)
    rows = spark.range(keys * versions).select(
        (F.col("id") % keys).alias("k"), (F.col("id") / keys).cast("long").alias("n"), F.rand(1).alias("v")
    )
    to = F.when(F.col("n") < versions - 1, F.timestamp_seconds((F.col("n") + 1) * STEP_S))
    table = rows.select(
        "k",
        F.timestamp_seconds(F.col("n") * STEP_S).alias("valid_from"),
        to.alias("valid_to"),
        segment_column(to, int(INTERVAL.total_seconds() * 1e6)).alias("segment"),
        F.lit(False).alias("tombstone"),
        "v",
    )
    table.write.format("delta").mode("append").option(
        "userMetadata", STORE_META % (0, (versions - 1) * STEP_S * 1_000_000)
    ).save(path)
    return store


def append_versions(spark: SparkSession, path: str, rows: int, at_s: int, batch_id: int) -> None:
    """Append a version of keys ``0 .. rows - 1`` at ``at_s`` into :data:`PENDING_SEGMENT`, in one commit."""
    versions = spark.range(rows).select(
        F.col("id").alias("k"),
        F.timestamp_seconds(F.lit(at_s)).alias("valid_from"),
        F.lit(None).cast("timestamp").alias("valid_to"),
        F.lit(PENDING_SEGMENT).cast("long").alias("segment"),
        F.lit(False).alias("tombstone"),
        F.rand(11).alias("v"),
    )
    versions.write.format("delta").mode("append").option(
        "userMetadata", STORE_META % (batch_id, at_s * 1_000_000)
    ).save(path)


def change_set(spark: SparkSession, changed: int, at_s: int):
    """A new version for keys ``0 .. changed - 1`` at ``at_s`` (after every stored version)."""
    return spark.range(changed).select(
        F.col("id").alias("k"),
        F.rand(7).alias("v"),
        F.timestamp_seconds(F.lit(at_s)).alias("timestamp"),
        F.col("id").alias("seq"),
    )


def timed(spark: SparkSession, group: str, fn) -> tuple[float, object, int]:
    """Wall time, result and Spark job count of ``fn()`` (its jobs run in job group ``group``)."""
    spark.sparkContext.setJobGroup(group, group)
    start = time.perf_counter()
    try:
        out = fn()
    finally:
        spark.sparkContext.setJobGroup("", "")
    jobs = len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))
    return time.perf_counter() - start, out, jobs


def middle(runs: list[tuple]) -> tuple:
    """The run of median seconds among ``timed`` results (the upper one of an even number)."""
    return sorted(runs, key=lambda run: run[0])[len(runs) // 2]


def change_read(spark: SparkSession, replica: Replica, first: int, last: int) -> tuple[float, int]:
    """Wall time and count of reading ``replica``'s shard of the source's change rows ``first .. last`` (the
    Change Data Feed the sync reads), preimages left out as the sync leaves them out."""
    start = time.perf_counter()
    changes = read_changes(spark, replica.source_path, first, last)
    shard = changes.where(replica._kind().in_shard(replica.shard, changes.schema))
    rows = shard.where(F.col(CHANGE_TYPE) != F.lit("update_preimage")).count()
    return time.perf_counter() - start, rows


def open_rows(spark: SparkSession, path: str) -> int:
    """Rows of the table's open-version partition (``segment IS NULL``: one per live key)."""
    return spark.read.format("delta").load(path).where(F.col("segment").isNull()).count()


def last_commit(spark: SparkSession, path: str) -> dict[str, str]:
    """Operation and selected ``operationMetrics`` of the newest commit of the table at ``path``."""
    row = spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").first()
    metrics = dict(row["operationMetrics"] or {})
    keep = (
        "executionTimeMs",
        "scanTimeMs",
        "rewriteTimeMs",
        "numTargetRowsUpdated",
        "numTargetRowsInserted",
        "numTargetRowsDeleted",
        "numTargetRowsCopied",
        "numTargetFilesAdded",
        "numTargetFilesRemoved",
        "numTargetDeletionVectorsAdded",
        "numOutputRows",
        "numFiles",
        "numTargetChangeFilesAdded",
    )
    return {"operation": row["operation"], **{k: metrics[k] for k in keep if k in metrics}}


def warm_up(spark: SparkSession, root: Path) -> None:
    """A restore, a MERGE sync and an append sync of a tiny store, so timed calls pay no first-use costs."""
    store = bulk_store(spark, str(root / "warm_src"), 1000, 2)
    replicas = [
        Replica.create(spark, store.path, str(root / f"warm_{i}"), s) for i, (_, s) in enumerate(KINDS)
    ]
    for replica in replicas:
        replica.sync()
    store.put_all(change_set(spark, 100, 2 * STEP_S), batch_id=1, sequence_by="seq")
    store.seal()
    for replica in replicas:
        replica.sync()
    append_versions(spark, store.path, 200, 3 * STEP_S, 2)
    for replica in replicas:
        replica.sync()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--versions", type=int, default=10)
    parser.add_argument("--changed", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3, help="timed runs of each sync and restore")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("RESULTS_replica.md"))
    args = parser.parse_args()
    settings = load_settings("local", overrides={"log_level": "ERROR", "driver_memory": "3g"})
    spark = get_spark({"spark.ui.enabled": "false"}, settings)
    root = Path(tempfile.mkdtemp(prefix="bench_replica_"))
    try:
        warm_up(spark, root)
        results: dict[tuple[str, int], tuple] = {}
        seals: dict[str, tuple] = {}
        for name, versions in (("small", 1), ("large", args.versions)):
            store = bulk_store(spark, str(root / f"{name}_src"), args.keys, versions)
            replicas = [
                Replica.create(spark, store.path, str(root / f"{name}_replica_{i}"), shard)
                for i, (_, shard) in enumerate(KINDS)
            ]
            restores = [timed(spark, f"restore_{name}_{i}", r.sync)[0] for i, r in enumerate(replicas)]
            merge_runs: list[list[tuple]] = [[] for _ in KINDS]
            append_runs: list[list[tuple]] = [[] for _ in KINDS]
            seal_runs: list[tuple] = []
            read_runs: list[tuple[float, int]] = []
            for n in range(args.rounds):
                at_s = (args.versions + 3 * n) * STEP_S
                store.put_all(change_set(spark, args.changed, at_s), batch_id=1 + 2 * n, sequence_by="seq")
                # The pending versions into their segments: the MERGE a sync must mirror.
                seal_runs.append(timed(spark, f"seal_{name}_{n}", store.seal))
                seal_commit = last_commit(spark, store.path)
                for i, r in enumerate(replicas):
                    merge_runs[i].append(timed(spark, f"merge_{name}_{n}_{i}", r.sync))
                merge_commits = [last_commit(spark, r.path) for r in replicas]
                synced = merge_runs[-1][-1][1]  # the shard replica's sync: the range it read
                first, last = synced.checkpoint_before + 1, synced.checkpoint
                read_runs.append(change_read(spark, replicas[-1], first, last))
                append_versions(spark, store.path, 2 * args.changed, at_s + STEP_S, 2 + 2 * n)
                for i, r in enumerate(replicas):
                    append_runs[i].append(timed(spark, f"append_{name}_{n}_{i}", r.sync))
                append_commits = [last_commit(spark, r.path) for r in replicas]
                store.seal()  # untimed: the next round starts with nothing pending
                for r in replicas:
                    r.sync()
            merges = [middle(runs) for runs in merge_runs]
            appends = [middle(runs) for runs in append_runs]
            # The change read of the round whose shard sync is the median one.
            read = read_runs[merge_runs[-1].index(merges[-1])]
            seals[name] = (middle(seal_runs), seal_commit, read, open_rows(spark, replicas[-1].path))
            for i in range(len(KINDS)):
                results[(name, i)] = (
                    args.keys * versions,
                    restores[i],
                    merges[i],
                    merge_commits[i],
                    appends[i],
                    append_commits[i],
                )
                print(name, KINDS[i][0], results[(name, i)], flush=True)
        large = VersionedStore.open(spark, str(root / "large_src"))
        colds = []
        for i, (_, shard) in enumerate(KINDS):
            runs = []
            for n in range(args.rounds):
                cold = Replica.create(spark, large.path, str(root / f"large_cold_{i}_{n}"), shard)
                runs.append(timed(spark, f"cold_{i}_{n}", cold.sync))
            colds.append(middle(runs))
        write(args, results, colds, seals)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def write(args, results, colds, seals) -> None:
    load = os.getloadavg()
    met = {True: "met", False: "missed"}
    shapes = (("MERGE-shaped", 2), ("insert-only", 4))
    lines = [
        "# Replica benchmark (issue 13)",
        "",
        "Command: `flock /tmp/lakehouse-bench.lock .venv/bin/python bench/bench_replica.py "
        f"--keys {args.keys} --versions {args.versions} --changed {args.changed} --rounds {args.rounds}"
        f"{'' if args.out.resolve() == BENCH / 'RESULTS_replica.md' else f' --out {args.out}'}`",
        f"Date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; load average "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (2 cores); {sys.version.split()[0]}",
        "",
        f"Each change set changes {2 * args.changed:,} rows of the store. Every time is the median of "
        f"{args.rounds} runs (the run shown). `rows` is what the sync reports: "
        "change rows applied (row-level), or the live rows of the files added and removed (file-level).",
        "",
        "| replica | store rows | initial restore (s) | change set | sync (s) | rows "
        "| Spark jobs of the sync |",
        "|---|---:|---:|---|---:|---:|---:|",
        *(
            f"| {label} | {store[0]:,} | {store[1]:.1f} | {shape} | {store[at][0]:.2f} "
            f"| {store[at][1].rows:,} | {store[at][2]} |"
            for i, (label, _) in enumerate(KINDS)
            for store in (results[("small", i)], results[("large", i)])
            for shape, at in shapes
        ),
        "",
    ]
    for i, (label, _) in enumerate(KINDS):
        small, large = results[("small", i)], results[("large", i)]
        cold_s, cold_result, cold_jobs = colds[i]
        lines += [
            f"**{label}.** Cold restore of the {large[0]:,}-row store into a fresh replica (at its latest "
            f"version): {cold_result.rows:,} rows, {cold_s:.1f} s, {cold_jobs} Spark jobs.",
            "",
        ]
        for shape, at in shapes:
            scale, speedup = large[at][0] / small[at][0], cold_s / large[at][0]
            lines += [
                f"- {shape}: same change set, {large[0]:,}-row vs {small[0]:,}-row store: {scale:.2f}x "
                f"(target <= 1.3x: {met[scale <= 1.3]}); incremental sync of {2 * args.changed:,} "
                f"changed rows ({2 * args.changed / large[0]:.1%} of the store) vs the cold restore: "
                f"{speedup:.1f}x faster "
                f"(target >= 10x: {met[speedup >= 10]}).",
            ]
        lines.append("")
    lines += [
        "The seal a MERGE-shaped sync mirrors, and what of that sync is Delta's Change Data Feed: the "
        "source's `seal()` (median), the change (CDC) files of the last round's seal commit, and for the "
        "median shard sync its range's change rows of the shard read and counted alone, after the sync "
        "(preimages left out, as the sync leaves them out); the open-version rows are the shard replica's "
        "`segment IS NULL` rows at the end, which the sync's MERGE joins with the changes (the files "
        "Delta's skipping by the changes' partitions and `valid_from` bounds leaves):",
        "",
        "| store rows | source `seal()` (s) | Spark jobs | seal's change (CDC) files | change read (s) "
        "| change rows | shard sync (s) | open-version rows of the replica |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
        *(
            f"| {results[(name, 0)][0]:,} | {seal[0][0]:.1f} | {seal[0][2]} "
            f"| {seal[1].get('numTargetChangeFilesAdded', '0')} | {seal[2][0]:.2f} | {seal[2][1]:,} "
            f"| {results[(name, len(KINDS) - 1)][2][0]:.2f} | {seal[3]:,} |"
            for name, seal in seals.items()
        ),
        "",
        "Replica commit of each timed sync (`DESCRIBE HISTORY`, `operationMetrics`):",
        "",
        *(
            f"- {label}, {name}, {shape}: `{results[(name, i)][at + 1]}`"
            for i, (label, _) in enumerate(KINDS)
            for name in ("small", "large")
            for shape, at in shapes
        ),
    ]
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
