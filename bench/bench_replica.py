"""Replica benchmark: a shard's catch-up costs the logical changes, not the table (issues 13 and 37).

Two versioned stores with the same keys: a small one (``--keys`` keys, one version each) and a large one
(the same keys, ``--versions`` versions each). Each round changes the store three ways, and two caught-up
replicas of each store sync each change (timed): a replica of ``Shard(0, 1)`` (every row as one task's
share: it follows the store's logical changelog, issue 37) and a whole-table replica (``shard=None``:
copies of the source's files, replaying the range's file actions):

- **batches**: ``put_all`` of a new version for ``--changed`` keys (with ``--changed 100000``, 1% of a
  10M-row store), appended to the store's pending partition. The shard replica appends the batch's
  versions to its own pending partition.
- **seal**: the store's ``seal()`` of those versions (each new version inserted into its segment, each
  old latest version closed: ``2 * --changed`` rows rewritten). No read changes: the shard replica's
  checkpoint moves on without copying a row; the whole-table replica copies the seal's new files.
- **both**: another batch and its seal, synced as one range.

Between rounds every replica runs its own maintenance (``Replica.maintain``: the shard replica seals
itself, each writes its Delta checkpoint when 10 commits follow the last), untimed. Then
the large store is restored from nothing into ``--rounds`` fresh replicas of each kind (timed). Every figure
is the median run; each incremental sync is compared with its kind's cold restore, and the large store's
with the small store's. A tiny store is synced every way first (untimed), so no timed sync pays the JVM's
first use of a path. Each timed call runs in its own Spark job group: the results give its job count and
the replica commit's ``operationMetrics``.

**Failover** (issue 37): the failover drill (:func:`lakehouse.replica.failover.run_failover_drill`, two
tasks, three clients, one standby each) on another large store, fed two batches of ``--changed`` keys: the
active client of task ``0_0`` dies with the last batch unsynced, the next assignment promotes the
caught-up standby, which syncs the rest and serves a read (``get`` of one key through the replica opened
as a store); next to it a cold restore of the same shard at the same version and the same read (one run
each: the drill's own order).

Run: ``flock /tmp/bench.lock .venv/bin/python bench/bench_replica.py [--keys 1000000 --versions 10
--changed 100000 --rounds 3] [--part all|sync|failover] [--out FILE]``; writes ``bench/RESULTS_replica.md``
(or ``--out``). ``--part`` runs one part only and keeps the other's section of the file as it was.
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

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse.config import load_settings
from lakehouse.replica import Replica, Shard
from lakehouse.replica.failover import generated_drill, run_failover_drill
from lakehouse.session import get_spark
from lakehouse.versioned import VersionedStore
from lakehouse.versioned.segments import segment_column

BENCH = Path(__file__).resolve().parent
SCHEMA = T.StructType([T.StructField("k", T.LongType()), T.StructField("v", T.DoubleType())])
STEP_S = 1800
RETENTION = timedelta(days=365)
INTERVAL = timedelta(hours=6)
VACUUM_INTERVAL = timedelta(days=1)
#: The replica kinds compared: (label, shard).
KINDS = (("Shard(0, 1), logical changelog", Shard(0, 1)), ("whole table, file copies", None))
#: The change cases of a round.
CASES = ("batches", "seal", "both")
#: Where the failover section of the results file starts.
FAILOVER_HEADING = "## Failover"
#: ``lakehouse failover-drill``'s generated store at its defaults: keys and batches.
DRILL_KEYS, DRILL_BATCHES = 1000, 6
STORE_META = '{"lakehouse": {"app_id": "lakehouse.versioned_store", "batch_id": %d, "stream_time_us": %d}}'


def bulk_store(spark: SparkSession, path: str, keys: int, versions: int) -> VersionedStore:
    """A store of ``keys`` x ``versions`` versions written with one append (its CDF records the inserts).

    Its handle never seals by itself (``seal_policy=None``): the rounds' seals are the ones each case
    names (with the default policy a 10% batch of the small store sealed inside ``put_all``, leaving the
    seal case nothing to sync)."""
    store = VersionedStore.create(spark, path, "k", SCHEMA, RETENTION, INTERVAL, seal_policy=None)
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
    """A restore, a batch's and a seal's sync of a tiny store, and a replica seal, so timed calls pay no
    first-use costs."""
    store = bulk_store(spark, str(root / "warm_src"), 1000, 2)
    replicas = [
        Replica.create(spark, store.path, str(root / f"warm_{i}"), s) for i, (_, s) in enumerate(KINDS)
    ]
    for replica in replicas:
        replica.sync()
    for batch_id in (1,):
        store.put_all(change_set(spark, 100, (2 + batch_id) * STEP_S), batch_id=batch_id, sequence_by="seq")
        for replica in replicas:
            replica.sync()
        store.seal()
        for replica in replicas:
            replica.sync()
    replicas[0].seal()


def latest_version(spark: SparkSession, path: str) -> int:
    return spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").first()["version"]


def floor_copy(spark: SparkSession, source: str, version: int, target: str) -> float:
    """The **floor** of a batch's sync: bare Spark and Delta reading the rows the source commit ``version``
    inserted and appending them to a plain Delta table, with nothing else (no checkpoint, no shard
    filter, no metadata). The rows are read the cheapest way Delta has: its DataFrame over the commit's
    added files (``DeltaLog.createDataFrame``, the read its streaming source makes of an append; the
    commit's Change Data Feed costs about 0.1 s more). Whatever follows a changelog pays at least this."""
    start = time.perf_counter()
    jvm = spark.sparkContext._jvm
    scala = jvm.scala.jdk.javaapi.CollectionConverters
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, source)
    snapshot = log.update(False, jvm.scala.Option.empty(), jvm.scala.Option.empty())
    added = jvm.java.util.ArrayList()
    commit = log.getChanges(version, version, jvm.scala.Option.empty(), True).next()
    for action in scala.asJava(commit._2()):
        if action.getClass().getSimpleName() == "AddFile":
            added.add(action)
    rows = log.createDataFrame(snapshot, scala.asScala(added).toList(), False, jvm.scala.Option.empty())
    DataFrame(rows, spark).write.format("delta").mode("append").save(target)
    return time.perf_counter() - start


def round_of(spark: SparkSession, store: VersionedStore, replicas: list[Replica], name: str, n: int, args):
    """One round: each case's change, then every replica's sync of it (timed), then the floor's copy of
    the case's batch (timed); returns per case the timed syncs, the replicas' commits and the floor's
    seconds (None for a seal: no row to copy), and the replicas' own maintenance after it (untimed)."""
    found = {}
    at_s = (args.versions + 4 * n) * STEP_S
    batch = 1 + 2 * n
    for case in CASES:
        written = None
        if case in ("batches", "both"):
            changes = change_set(spark, args.changed, at_s)
            store.put_all(changes, batch_id=batch, sequence_by="seq")
            written = latest_version(spark, store.path)
            batch, at_s = batch + 1, at_s + STEP_S
        if case in ("seal", "both"):
            store.seal()
        runs = [timed(spark, f"{case}_{name}_{n}_{i}", r.sync) for i, r in enumerate(replicas)]
        floor = None if written is None else floor_copy(spark, store.path, written, f"{store.path}_floor")
        found[case] = (runs, [last_commit(spark, r.path) for r in replicas], floor)
    for replica in replicas:  # their own maintenance, on the due rules (the shard replica seals itself)
        replica.maintain(seal_min_rows=1, optimize_min_files=0, vacuum_interval=VACUUM_INTERVAL)
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--versions", type=int, default=10)
    parser.add_argument("--changed", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3, help="timed runs of each sync and restore")
    parser.add_argument("--part", choices=("all", "sync", "failover"), default="all")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("RESULTS_replica.md"))
    args = parser.parse_args()
    settings = load_settings("local", overrides={"log_level": "ERROR", "driver_memory": "3g"})
    spark = get_spark({"spark.ui.enabled": "false"}, settings)
    root = Path(tempfile.mkdtemp(prefix="bench_replica_"))
    try:
        if args.part != "failover":  # the drill warms up itself: its catch-up is not a replica's first sync
            warm_up(spark, root)
        old = args.out.read_text() if args.out.exists() else ""
        sync_text, _, failover_text = old.partition(FAILOVER_HEADING)
        failover_text = FAILOVER_HEADING + failover_text if failover_text else ""
        if args.part != "failover":
            sync_text = sync_part(spark, root, args)
        if args.part != "sync":
            failover_text = failover_part(spark, root, args)
        args.out.write_text(sync_text.rstrip("\n") + "\n\n" + failover_text)
        print(args.out.read_text())
    finally:
        shutil.rmtree(root, ignore_errors=True)


def sync_part(spark: SparkSession, root: Path, args) -> str:
    """The incremental syncs against cold restores, as the results file's text."""
    results: dict[tuple[str, str, int], tuple] = {}
    floors_s: dict[tuple[str, str], float | None] = {}
    sizes = {}
    for name, versions in (("small", 1), ("large", args.versions)):
        store = bulk_store(spark, str(root / f"{name}_src"), args.keys, versions)
        sizes[name] = args.keys * versions
        replicas = [
            Replica.create(spark, store.path, str(root / f"{name}_replica_{i}"), shard)
            for i, (_, shard) in enumerate(KINDS)
        ]
        for replica in replicas:
            replica.sync()
        rounds = [round_of(spark, store, replicas, name, n, args) for n in range(args.rounds)]
        for case in CASES:
            floors = [found[case][2] for found in rounds if found[case][2] is not None]
            floors_s[(name, case)] = sorted(floors)[len(floors) // 2] if floors else None
            for i in range(len(KINDS)):
                runs = [found[case][0][i] for found in rounds]
                median = middle(runs)
                commit = rounds[runs.index(median)][case][1][i]
                results[(name, case, i)] = (median, commit)
                print(name, case, KINDS[i][0], median[0], median[1], flush=True)
    large = str(root / "large_src")
    colds = []
    for i, (_, shard) in enumerate(KINDS):
        runs = []
        for n in range(args.rounds):
            cold = Replica.create(spark, large, str(root / f"large_cold_{i}_{n}"), shard)
            runs.append(timed(spark, f"cold_{i}_{n}", cold.sync))
        colds.append(middle(runs))
        print("cold", KINDS[i][0], colds[-1][0], flush=True)
    return write(args, sizes, results, colds, floors_s)


def command(args) -> str:
    default = args.out.resolve() == BENCH / "RESULTS_replica.md"
    return (
        "`flock /tmp/bench.lock .venv/bin/python bench/bench_replica.py "
        f"--keys {args.keys} --versions {args.versions} --changed {args.changed} --rounds {args.rounds} "
        f"--part {args.part}{'' if default else f' --out {args.out}'}`"
    )


def load_line() -> str:
    load = os.getloadavg()
    return (
        f"Date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; load average at the end "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (2 cores shared with other sessions); "
        f"{sys.version.split()[0]}"
    )


def failover_part(spark: SparkSession, root: Path, args) -> str:
    """The failover drill at its own size (``lakehouse failover-drill``) and on a store of ``--keys`` x
    ``--versions`` rows, as the results file's text."""
    small = generated_drill(spark, str(root / "drill"), DRILL_KEYS, DRILL_BATCHES, echo=lambda _line: None)
    small_row = drill_row(spark, small, str(root / "drill"), f"the drill's own size ({DRILL_KEYS:,} keys)")
    drill = root / "failover"
    store = bulk_store(spark, str(drill / "source"), args.keys, args.versions)
    at_s = (args.versions + 1) * STEP_S
    batches = [change_set(spark, args.changed, at_s + n * STEP_S) for n in range(2)]

    def put(store: VersionedStore, batch, batch_id: int) -> None:
        store.put_all(batch, batch_id=batch_id + 1, sequence_by="seq")  # the bulk write is batch 0

    report = run_failover_drill(spark, str(drill), store, batches, put=put, echo=lambda _line: None)
    large_row = drill_row(spark, report, str(drill), f"{args.keys * args.versions:,} rows")
    lines = [
        f"{FAILOVER_HEADING} (the drill at its own size and at {args.keys * args.versions:,} rows)",
        "",
        f"Command: {command(args)}",
        load_line(),
        "",
        "The failover drill (`run_failover_drill`: tasks 0_0 and 0_1, three clients, one standby each): the "
        "last batch is unsynced when the client active for 0_0 dies; the next generation promotes the client "
        "that held the standby. At its own size it is `lakehouse failover-drill` (a generated store of "
        f"{DRILL_KEYS:,} keys, {DRILL_BATCHES} batches); the large one is a store of "
        f"{args.keys * args.versions:,} rows fed two batches of {args.changed:,} keys. One run each, in the "
        "drill's order (the catch-up, then the cold restore); the first read is a `get` of one key through "
        "the replica opened as a store.",
        "",
        "| drill | to serving 0_0 | versions | rows written | sync or restore (s) | first read (s) "
        "| total (s) | failover vs cold restore | reads equal the source's |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
        *small_row,
        *large_row,
        "",
    ]
    return "\n".join(lines)


def drill_row(spark: SparkSession, report, root: str, label: str) -> list[str]:
    """The results table's two rows of a drill: the promoted standby's catch-up and the cold restore, each
    with the first read through it."""
    reads = {}
    for name, client in (("promoted", report.promoted), ("cold", "cold")):
        path = f"{root}/clients/{client}/{report.task}"
        replica = VersionedStore.open(spark, path)
        key = replica.table().select(*replica.settings.keys).first()[0]
        seconds, _, _ = timed(spark, f"read_{name}", lambda r=replica, k=key: r.get(k))
        reads[name] = seconds
    catch_up, cold = report.catch_up, report.cold_restore
    failover_s = catch_up.seconds + reads["promoted"]
    cold_s = cold.seconds + reads["cold"]
    return [
        f"| {label} | promoted standby: sync the rest, read | {catch_up.versions} | {catch_up.rows:,} | "
        f"{catch_up.seconds:.2f} | {reads['promoted']:.2f} | {failover_s:.2f} | "
        f"{cold_s / max(failover_s, 1e-3):.1f}x faster | {report.reads_equal} |",
        f"| {label} | cold restore of the shard, read | {cold.versions} | {cold.rows:,} | "
        f"{cold.seconds:.2f} | {reads['cold']:.2f} | {cold_s:.2f} | | |",
    ]


def write(args, sizes, results, colds, floors) -> str:
    met = {True: "met", False: "missed"}
    lines = [
        "# Replica benchmark (issues 13 and 37)",
        "",
        f"Command: {command(args)}",
        load_line(),
        "",
        f"A batch writes a new version of {args.changed:,} keys ({args.changed / sizes['large']:.1%} of the "
        f"large store); its seal rewrites {2 * args.changed:,} rows. Every time is the median of "
        f"{args.rounds} runs (the run shown). `rows` is what the sync reports: versions written into the "
        "replica's pending partition (logical), or the live rows of the files added and removed (file "
        "copies).",
        "",
        "| replica | store rows | change | sync (s) | rows | Spark jobs | vs cold restore |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for i, (label, _) in enumerate(KINDS):
        cold_s = colds[i][0]
        for name in ("small", "large"):
            for case in CASES:
                (seconds, result, jobs), _ = results[(name, case, i)]
                lines.append(
                    f"| {label} | {sizes[name]:,} | {case} | {seconds:.2f} | {result.rows:,} | {jobs} "
                    f"| {cold_s / max(seconds, 1e-3):.1f}x faster |"
                )
    lines.append("")
    for i, (label, _) in enumerate(KINDS):
        cold_s, cold_result, cold_jobs = colds[i]
        lines += [
            f"**{label}.** Cold restore of the {sizes['large']:,}-row store into a fresh replica: "
            f"{cold_result.rows:,} rows, {cold_s:.2f} s, {cold_jobs} Spark jobs.",
            "",
        ]
        for case in CASES:
            small = results[("small", case, i)][0][0]
            large = results[("large", case, i)][0][0]
            scale, speedup = large / max(small, 1e-3), cold_s / max(large, 1e-3)
            floor = floors[("large", case)]
            at_floor = (
                ""
                if floor is None
                else f"; the floor (bare Delta: the batch's files read by Delta, appended: {floor:.2f} s) "
                f"is {cold_s / max(floor, 1e-3):.1f}x faster than the cold restore, the sync "
                f"{large / max(floor, 1e-3):.2f}x the floor"
            )
            lines.append(
                f"- {case}: {sizes['large']:,}-row vs {sizes['small']:,}-row store {scale:.2f}x (target <= "
                f"1.3x: {met[scale <= 1.3]}); vs the cold restore {speedup:.1f}x faster (target >= 10x: "
                f"{met[speedup >= 10]}){at_floor}."
            )
        lines.append("")
    lines += [
        "Replica commit of each timed sync of the large store (`DESCRIBE HISTORY`, `operationMetrics`):",
        "",
        *(
            f"- {label}, {case}: `{results[('large', case, i)][1]}`"
            for i, (label, _) in enumerate(KINDS)
            for case in CASES
        ),
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
