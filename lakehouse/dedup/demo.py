"""The dedup step of ``lakehouse demo``: exactly-once deduplication of the demo's transactions."""

from __future__ import annotations

from datetime import timedelta

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse.dedup.deduplicator import Deduplicator
from lakehouse.summary import StepReport

DEMO_INTERVAL = timedelta(days=1)


def demo_step(
    spark: SparkSession, root: str, interval: timedelta = DEMO_INTERVAL
) -> tuple[list[str], StepReport]:
    """Deduplicate ``{root}/transactions`` by ``txn_id`` (two batches, a replay, a purge).

    Batch 0 holds the first deliveries (``offset`` below the number of distinct transactions), batch 1 the
    at-least-once re-sends. The index, sink and quarantine under ``root`` are created on the first run and
    opened afterwards: re-running the step replays batches 0 and 1 (same forwarded records, nothing
    written), so it prints the same lines and the sink still holds each transaction once. Returns the
    lines to print and the step's report.
    """
    source = spark.read.format("delta").load(f"{root}/transactions")
    index, sink, quarantine = (
        f"{root}/{name}" for name in ("txn_dedup_index", "txn_deduped", "txn_duplicates")
    )
    dedup = Deduplicator.create(spark, index, by="txn_id", interval=interval, quarantine_path=quarantine)
    first_sends = source.agg(F.countDistinct("txn_id").alias("n")).first()
    assert first_sends is not None
    cut = F.col("offset") < F.lit(first_sends["n"])
    lines, runs = [], []
    for batch_id, batch in enumerate((source.where(cut), source.where(~cut))):
        s = dedup.run(batch, batch_id, sink=sink)
        runs.append(s)
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
        f"[dedup] index {index}: {live} entries; purge keeps buckets >= {purged.below_bucket} "
        f"(expired ones are dropped, metadata only); stream time {purged.stream_time}"
    )
    report = StepReport(
        "dedup",
        sum(s.input for s in runs),
        sum(s.forwarded for s in runs),
        {
            "duplicates dropped": sum(s.duplicates for s in runs),
            "late": sum(s.late for s in runs),
            "re-deliveries forwarded": sum(s.replayed for s in runs),
        },
        {"seen-ID index": index, "deduplicated sink": sink, "quarantine": quarantine},
    )
    return lines, report
