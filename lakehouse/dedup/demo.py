"""The dedup step of ``lakehouse demo``: exactly-once deduplication of the demo's transactions."""

from __future__ import annotations

from datetime import timedelta

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse.dedup.deduplicator import Deduplicator

DEMO_INTERVAL = timedelta(days=1)


def demo_step(spark: SparkSession, root: str, interval: timedelta = DEMO_INTERVAL) -> list[str]:
    """Deduplicate ``{root}/transactions`` by ``txn_id`` (two batches, a replay, a purge); lines to print.

    Batch 0 holds the first deliveries (``offset`` below the number of distinct transactions), batch 1 the
    at-least-once re-sends. The index, sink and quarantine under ``root`` are recreated on every run.
    """
    source = spark.read.format("delta").load(f"{root}/transactions")
    index, sink, quarantine = (
        f"{root}/{name}" for name in ("txn_dedup_index", "txn_deduped", "txn_duplicates")
    )
    for path in (index, sink, quarantine):
        _delete(spark, path)
    dedup = Deduplicator.create(spark, index, by="txn_id", interval=interval, quarantine_path=quarantine)
    first_sends = source.agg(F.countDistinct("txn_id").alias("n")).first()
    assert first_sends is not None
    cut = F.col("offset") < F.lit(first_sends["n"])
    lines = []
    for batch_id, batch in enumerate((source.where(cut), source.where(~cut))):
        s = dedup.run(batch, batch_id, sink=sink)
        lines.append(
            f"[dedup] batch {batch_id}: {s.input} records -> {s.forwarded} forwarded, "
            f"{s.duplicates} duplicates dropped (quarantined), {s.late} late, {s.replayed} replayed"
        )
    again = dedup.run(source.where(~cut), 1, sink=sink)
    sunk = spark.read.format("delta").load(sink)
    distinct = sunk.select("txn_id").distinct().count()
    lines.append(
        f"[dedup] batch 1 re-run: replay={again.replay}, {again.forwarded} forwarded again, nothing written; "
        f"sink holds {sunk.count()} rows for {distinct} distinct txn_ids -> {sink}"
    )
    purged = dedup.purge()
    live = dedup.index().count()
    lines.append(
        f"[dedup] index {index}: {live} entries; purge dropped {purged.files_removed} expired file(s) "
        f"(metadata only); stream time {purged.stream_time}"
    )
    return lines


def _delete(spark: SparkSession, path: str) -> None:
    """Remove ``path`` recursively on whatever filesystem it lives (the demo recreates its tables)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).delete(hadoop_path, True)
