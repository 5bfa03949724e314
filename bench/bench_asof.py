"""As-of join benchmark: asof_join vs the naive join + row_number, Tempo's asofJoin, and the floor.

Three workloads (issue 5): (1) full history: the stream spans the whole table history; (2) a hot key
carrying ``--hot`` of the events and of the versions; (3) incremental: a long history (``--segments``
validTo segments) and a stream batch covering only its latest 1 %.

Run: ``.venv/bin/python bench/bench_asof.py [--events 10000000 --keys 1000000 --versions 10] [--out F]``;
prints (and writes to ``F``) one markdown table row per workload. Tables and stream batches are generated
straight into Delta (one append each), then every peer runs in this one process on the same data; each
result is written to the ``noop`` sink (full materialization) and checked row for row against asof_join
(one full outer join on the event id).

Peers: *naive* = equi-join on key, ``valid_from <= t``, ``row_number`` over the event by ``valid_from``
desc (skipped where the hot key makes it quadratic: ``--naive-limit`` candidate pairs); *floor* = a lookup
join with the latest version per key (not temporal: what any stream-table join costs); *tempo* =
``dbl-tempo`` ``asofJoin(skipNulls=False)`` (default union+window path), if importable.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse.asof import asof_join_with_stats
from lakehouse.commit_log import CommitLog
from lakehouse.config import load_settings
from lakehouse.session import get_spark
from lakehouse.versioned import VersionedStore
from lakehouse.versioned.segments import segment_column
from lakehouse.versioned.store import APP_ID

SCHEMA = T.StructType([T.StructField("k", T.LongType()), T.StructField("v", T.DoubleType())])
STEP_S = 60  # versions of an ordinary key are STEP_S apart
HOT_KEY = 0


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def sink(df: DataFrame) -> None:
    df.write.format("noop").mode("overwrite").save()


def bulk_store(
    spark: SparkSession, path: str, keys: int, versions: int, hot: float, interval: timedelta
) -> VersionedStore:
    """``keys`` x ``versions`` versions STEP_S apart, plus (hot > 0) a hot key with a ``hot`` share of all
    versions over the same time span; written directly (one append) for speed."""
    span_s = versions * STEP_S
    store = VersionedStore.create(spark, path, "k", SCHEMA, timedelta(seconds=span_s * 2), interval)
    ordinary = spark.range(keys * versions).select(
        (F.col("id") % keys + 1).alias("k"),
        ((F.col("id") / keys).cast("long") * STEP_S).cast("double").alias("from_s"),
        F.lit(float(STEP_S)).alias("len_s"),
    )
    frames = [ordinary]
    hot_versions = int(keys * versions * hot / (1 - hot)) if hot > 0 else 0
    if hot_versions:
        step = span_s / hot_versions
        frames.append(
            spark.range(hot_versions).select(
                F.lit(HOT_KEY).cast("long").alias("k"),
                (F.col("id") * step).alias("from_s"),
                F.lit(step).alias("len_s"),
            )
        )
    rows = frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])
    start = F.timestamp_micros((F.col("from_s") * 1e6).cast("long"))
    end_s = F.col("from_s") + F.col("len_s")
    to = F.when(end_s < span_s - 1e-6, F.timestamp_micros((end_s * 1e6).cast("long")))
    table = rows.select(
        "k",
        start.alias("valid_from"),
        to.alias("valid_to"),
        segment_column(to, int(interval.total_seconds() * 1e6)).alias("segment"),
        F.lit(False).alias("tombstone"),
        F.rand(1).alias("v"),
    )
    stream_time_us = int((span_s - STEP_S) * 1e6)
    table.write.format("delta").mode("append").partitionBy("segment").options(
        **CommitLog(spark, path, APP_ID).writer_options(None, {"stream_time_us": stream_time_us})
    ).save(path)
    return store


def stream(
    spark: SparkSession, path: str, events: int, keys: int, t0_s: float, t1_s: float, hot: float
) -> DataFrame:
    """``events`` records with uniform keys (a ``hot`` share on the hot key) and times in [t0, t1),
    written to a Delta table at ``path`` (a batch job reads its batch from storage) and read back."""
    key = F.when(F.rand(7) < hot, F.lit(HOT_KEY)).otherwise((F.rand(8) * keys).cast("long") + 1)
    t = F.timestamp_micros(((F.lit(t0_s) + F.rand(9) * (t1_s - t0_s)) * 1e6).cast("long"))
    batch = spark.range(events).select(F.col("id"), key.alias("k"), t.alias("timestamp"))
    batch.write.format("delta").save(path)
    return spark.read.format("delta").load(path)


def naive(events: DataFrame, table: DataFrame) -> DataFrame:
    candidates = events.join(
        table.select("k", "valid_from", "tombstone", "v"),
        on=(events["k"] == table["k"]) & (table["valid_from"] <= events["timestamp"]),
        how="left",
    ).drop(table["k"])
    by_event = (
        Window.partitionBy("id")
        .orderBy(F.col("valid_from").desc_nulls_last())
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    ranked = candidates.withColumn("rn", F.row_number().over(by_event)).where("rn = 1")
    return ranked.select(
        "id", "k", "timestamp", F.when(~F.col("tombstone"), F.col("v")).alias("v"), "valid_from"
    )


def floor(events: DataFrame, table: DataFrame) -> DataFrame:
    latest = table.where(F.col("valid_to").isNull()).select("k", "v", "valid_from")
    return events.join(latest, on="k", how="left")


def tempo_join(events: DataFrame, table: DataFrame) -> DataFrame:
    from tempo import TSDF  # bench-only peer: dbl-tempo (+ ipython, scipy) in the bench venv

    right = table.select("k", F.col("valid_from").alias("timestamp"), "v")
    joined = TSDF(events, ts_col="timestamp", partition_cols=["k"]).asofJoin(
        TSDF(right, ts_col="timestamp", partition_cols=["k"]),
        right_prefix="r",
        skipNulls=False,
        suppress_null_warning=True,
    )
    return joined.df.select("id", "k", "timestamp", F.col("r_v").alias("v"))


def differing(a: DataFrame, b: DataFrame, events: int) -> int:
    """Events whose (v, valid_from) differ between two results (one side missing counts; a duplicated
    event id counts too, as extra rows), in one full outer join on the event id."""
    x = a.select("id", F.col("v").alias("xv"))
    y = b.select("id", F.col("v").alias("yv"))
    row = (
        x.join(y, on="id", how="full_outer")
        .agg(F.count(F.lit(1)).alias("rows"), F.count(F.when(~F.col("xv").eqNullSafe(F.col("yv")), 1)))
        .first()
    )
    assert row is not None
    return int(row[1]) + abs(int(row["rows"]) - events)


def join_strategy(df: DataFrame) -> str:
    """The join operator and the count of shuffles in the (initial, pre-AQE) physical plan."""
    plan = df._jdf.queryExecution().executedPlan().toString()
    kinds = ("SortMergeJoin", "ShuffledHashJoin", "BroadcastHashJoin", "BroadcastNestedLoopJoin")
    found = [k for k in kinds if k in plan]
    return f"{'+'.join(found) or '?'}, {plan.count('Exchange hashpartitioning')} shuffles"


@dataclass(frozen=True)
class Workload:
    """One workload: its store, its stream batch, and whether the naive peer is affordable on it."""

    name: str
    store: VersionedStore
    events: DataFrame
    event_count: int
    naive: bool


def workload(work: Workload, repeats: int) -> list[str]:
    """asof_join and the floor ``repeats`` times (best kept: the first run of a process pays JIT and
    Delta-log warm-up), naive and Tempo once. asof_join's time includes its planning (the stream
    aggregate and the store's history read), also shown alone."""
    table = work.store.table()
    events = work.events
    plan_s: list[float] = []

    def ours() -> DataFrame:
        start = time.perf_counter()
        frame = asof_join_with_stats(events, work.store).frame
        plan_s.append(time.perf_counter() - start)
        return frame.select("id", "k", "timestamp", "v", "valid_from")

    runs: dict[str, Callable[[], DataFrame] | None] = {
        "asof_join": ours,
        "floor": lambda: floor(events, table),
        "naive": (lambda: naive(events, table)) if work.naive else None,
        "tempo": (lambda: tempo_join(events, table)) if tempo_available() else None,
    }
    seconds: dict[str, float | None] = {}
    for peer, build in runs.items():
        times = repeats if peer in ("asof_join", "floor") else 1
        seconds[peer] = None if build is None else min(timed(lambda b=build: sink(b())) for _ in range(times))
    result = asof_join_with_stats(events, work.store)
    mine = result.frame.select("id", "k", "timestamp", "v", "valid_from")
    checks = [
        f"{peer} differs in {differing(mine, build(), work.event_count)} rows"
        for peer, build in runs.items()
        if build and peer in ("naive", "tempo")
    ]
    stream_files = set(events.inputFiles())
    read = {
        peer: len(set(build().inputFiles()) - stream_files)
        for peer, build in (("asof", lambda: mine), *runs.items())
        if build and peer != "asof_join"
    }
    files = " / ".join(f"{peer} {n}" for peer, n in read.items()) + f" of {len(table.inputFiles())}"
    cell = {p: "n/a" if s is None else f"{s:.1f}" for p, s in seconds.items()}
    ratio = (seconds["asof_join"] or 0) / (seconds["floor"] or 1)
    stats = result.stats
    return [
        f"| {work.name} | {cell['asof_join']} ({min(plan_s):.1f}) | {cell['floor']} | {cell['naive']} | "
        f"{cell['tempo']} | {ratio:.2f} | {files} | {stats.hot_keys} | "
        f"{join_strategy(mine)} / {join_strategy(floor(events, table))} | {'; '.join(checks) or '-'} |"
    ]


def tempo_available() -> bool:
    try:
        import tempo  # noqa: F401  (bench-only peer)
    except ImportError:
        return False
    return True


def run(args: argparse.Namespace) -> list[str]:
    settings = load_settings(
        "local", overrides={"log_level": "ERROR", "shuffle_partitions": str(args.partitions)}
    )
    spark = get_spark({"spark.ui.enabled": "false"}, settings)
    root = Path(tempfile.mkdtemp(prefix="bench-asof-"))
    span_s = args.versions * STEP_S
    lines = [
        f"{args.events:,} events, {args.keys:,} keys x {args.versions} versions; `local[*]` on 2 cores, "
        f"{args.partitions} shuffle partitions, AQE as configured by lakehouse.session; asof_join and floor "
        f"best of {args.repeats}, naive and tempo once. Load average at start: {os.getloadavg()}.",
        "",
        "| workload | asof_join s (planning s) | floor s | naive s | tempo s | asof/floor | store files read "
        "| hot keys | join: asof / floor | row check vs asof_join |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    hot_pairs = (args.events * args.hot) * (args.keys * args.versions * args.hot / (1 - args.hot))
    try:
        interval = timedelta(seconds=span_s / 10)
        uniform = bulk_store(spark, str(root / "uniform"), args.keys, args.versions, 0.0, interval)
        events = stream(spark, str(root / "s1"), args.events, args.keys, 0, span_s, 0.0)
        lines += workload(Workload("full history", uniform, events, args.events, True), args.repeats)
        hot = bulk_store(spark, str(root / "hot"), args.keys, args.versions, args.hot, interval)
        events = stream(spark, str(root / "s2"), args.events, args.keys, 0, span_s, args.hot)
        name = f"hot key ({args.hot:.0%})"
        lines += workload(
            Workload(name, hot, events, args.events, hot_pairs <= args.naive_limit), args.repeats
        )
        long_versions = args.versions * args.long
        long_span = long_versions * STEP_S
        long_interval = timedelta(seconds=long_span / args.segments)
        long_keys = max(1, args.keys // args.long)
        history = bulk_store(spark, str(root / "long"), long_keys, long_versions, 0.0, long_interval)
        count = args.events // 10
        events = stream(spark, str(root / "s3"), count, long_keys, long_span * 0.99, long_span, 0.0)
        name = f"incremental ({args.segments} segments, last 1%)"
        lines += workload(Workload(name, history, events, count, True), args.repeats)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return [*lines, "", f"Load average at end: {os.getloadavg()}."]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--versions", type=int, default=10)
    parser.add_argument("--hot", type=float, default=0.1, help="hot key share")
    parser.add_argument("--long", type=int, default=20, help="incremental: x versions/key")
    parser.add_argument("--segments", type=int, default=120, help="incremental: segments")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2, help="runs of asof_join and floor, best kept")
    parser.add_argument(
        "--naive-limit", type=float, default=1e10, help="skip naive above this many hot-key candidate pairs"
    )
    parser.add_argument("--out", help="also write the table to this file")
    args = parser.parse_args()
    lines = run(args)
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
