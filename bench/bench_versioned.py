"""Versioned store benchmark: put_all vs textbook SCD2 MERGE vs plain append; table-size scaling; expiry.

Run: ``.venv/bin/python bench/bench_versioned.py [--keys 1000000 --versions 5 --batch 100000]``; writes
``bench/RESULTS_versioned.md``. Every peer runs in this one process on the same generated data.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse import delta_ops
from lakehouse.config import load_settings
from lakehouse.session import get_spark
from lakehouse.versioned import VersionedStore
from lakehouse.versioned.segments import segment_column
from lakehouse.versioned.store import APP_ID

SCHEMA = T.StructType([T.StructField("k", T.LongType()), T.StructField("v", T.DoubleType())])
STEP_S = 1800  # one version per key every 30 minutes: history spans many 15-minute segments
RETENTION = timedelta(hours=6)
INTERVAL = timedelta(minutes=15)


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def bulk_store(spark: SparkSession, path: str, keys: int, versions: int) -> VersionedStore:
    """A store of ``keys`` x ``versions`` versions, written directly (one append) for speed."""
    store = VersionedStore.create(spark, path, "k", SCHEMA, RETENTION, INTERVAL)
    rows = spark.range(keys * versions).select(
        (F.col("id") % keys).alias("k"), (F.col("id") / keys).cast("long").alias("n"), F.rand(1).alias("v")
    )
    start = F.timestamp_seconds(F.col("n") * STEP_S)
    to = F.when(F.col("n") < versions - 1, F.timestamp_seconds((F.col("n") + 1) * STEP_S))
    table = rows.select(
        "k",
        start.alias("valid_from"),
        to.alias("valid_to"),
        segment_column(to, int(INTERVAL.total_seconds() * 1e6)).alias("segment"),
        F.lit(False).alias("tombstone"),
        "v",
    )
    stream_time_us = (versions - 1) * STEP_S * 1_000_000
    table.write.format("delta").mode("append").options(
        **delta_ops.writer_options(APP_ID, None, stream_time_us=stream_time_us)
    ).save(path)
    return store


def update_batch(spark: SparkSession, keys: int, versions: int, size: int, late: float) -> DataFrame:
    """``size`` updates of random keys after the store's last version; a fraction ``late`` out of order."""
    ts_s = F.when(F.rand(3) < late, (versions - 1) * STEP_S - F.floor(F.rand(4) * 120) - 1).otherwise(
        versions * STEP_S + F.floor(F.rand(5) * 60)
    )
    return spark.range(size).select(
        (F.abs(F.xxhash64("id")) % keys).alias("k"),
        F.rand(6).alias("v"),
        F.timestamp_seconds(ts_s).alias("timestamp"),
        (F.col("id") % 8).cast("int").alias("partition"),
        F.col("id").alias("offset"),
    )


def scd2_table(spark: SparkSession, store_path: str, path: str) -> None:
    """The SCD2 peer's table: the same versions, unpartitioned, with an ``is_current`` flag."""
    spark.read.format("delta").load(store_path).select(
        "k", "v", "valid_from", "valid_to", F.col("valid_to").isNull().alias("is_current")
    ).write.format("delta").save(path)


def scd2_merge(spark: SparkSession, path: str, batch: DataFrame) -> None:
    """The textbook Delta SCD2 MERGE: close the current row, insert the new one (wrong for out-of-order)."""
    latest = batch.groupBy("k").agg(F.max_by("v", "timestamp").alias("v"), F.max("timestamp").alias("ts"))
    staged = latest.select(F.col("k").alias("merge_key"), "*").unionByName(
        latest.select(F.lit(None).cast("long").alias("merge_key"), "*")
    )
    (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(staged.alias("s"), "t.k = s.merge_key AND t.is_current")
        .whenMatchedUpdate(set={"is_current": "false", "valid_to": "s.ts"})
        .whenNotMatchedInsert(
            values={"k": "s.k", "v": "s.v", "valid_from": "s.ts", "valid_to": "null", "is_current": "true"}
        )
        .execute()
    )


def run(args: argparse.Namespace) -> list[str]:
    settings = load_settings(
        "local", overrides={"log_level": "ERROR", "shuffle_partitions": str(args.partitions)}
    )
    spark = get_spark({"spark.ui.enabled": "false"}, settings)
    root = Path(tempfile.mkdtemp(prefix="bench-versioned-"))
    lines = [
        f"Machine: 2 cores; `local[*]`, {args.partitions} shuffle partitions. Store: {args.keys:,} keys; "
        f"batch {args.batch:,} updates, {args.late:.0%} out of order. "
        f"Retention {RETENTION}, segments {INTERVAL}.",
        "",
        "| workload | store versions | put_all (s) | SCD2 MERGE (s) | plain append (s) | put_all / append |",
        "|---|---|---|---|---|---|",
    ]
    per_batch = {}
    for versions in (args.versions, args.versions * args.scale):
        path = str(root / f"store{versions}")
        store = bulk_store(spark, path, args.keys, versions)
        scd2_table(spark, path, str(root / f"scd2_{versions}"))
        batch = update_batch(spark, args.keys, versions, args.batch, args.late).cache()
        batch.count()
        ours = timed(lambda s=store, b=batch: s.put_all(b, batch_id=0))
        peer = timed(lambda v=versions, b=batch: scd2_merge(spark, str(root / f"scd2_{v}"), b))
        floor = timed(lambda v=versions, b=batch: b.write.format("delta").save(str(root / f"append_{v}")))
        per_batch[versions] = ours
        lines.append(
            f"| 1 batch | {args.keys * versions:,} | {ours:.1f} | {peer:.1f} | {floor:.1f} "
            f"| {ours / floor:.2f}x |"
        )
        batch.unpersist()
        shutil.rmtree(root / f"scd2_{versions}", ignore_errors=True)
    small, large = per_batch[args.versions], per_batch[args.versions * args.scale]
    lines += [
        "",
        f"Table-size scaling: {args.scale}x more versions costs {large / small:.2f}x per batch "
        "(target <= 1.3x).",
        "",
    ]
    lines += expiry_lines(spark, root, args)
    shutil.rmtree(root, ignore_errors=True)
    return lines


def expiry_lines(spark: SparkSession, root: Path, args: argparse.Namespace) -> list[str]:
    """Time ``expire()`` on two stores whose expired segments differ 10x in row count."""
    lines = ["| expiry | expired versions | files removed | expire() (s) |", "|---|---|---|---|"]
    for keys in (args.keys // 10, args.keys):
        path = str(root / f"expire{keys}")
        store = bulk_store(spark, path, keys, 2)
        store.put_all(
            update_batch(spark, keys, 2, 1, 0.0).withColumn(
                "timestamp", F.timestamp_seconds(F.lit(int(RETENTION.total_seconds()) + 3600))
            ),
            batch_id=0,
        )
        seconds = timed(store.expire)
        metrics = DeltaTable.forPath(spark, path).history(1).first()["operationMetrics"]
        lines.append(
            f"| {keys:,} rows/segment | {metrics.get('numDeletedRows')} | {metrics.get('numRemovedFiles')} "
            f"| {seconds:.2f} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--versions", type=int, default=1, help="versions per key of the smaller store")
    parser.add_argument(
        "--scale", type=int, default=10, help="the larger store has this many times more versions"
    )
    parser.add_argument("--batch", type=int, default=100_000)
    parser.add_argument("--late", type=float, default=0.1)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--out", default="bench/RESULTS_versioned.md")
    args = parser.parse_args()
    lines = run(args)
    Path(args.out).write_text("## Versioned store (issue 3)\n\n" + "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
