"""The versioned store's step of ``lakehouse demo``: currency rates as a KIP-889 versioned store."""

from __future__ import annotations

from datetime import datetime, timedelta

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse.summary import StepReport
from lakehouse.versioned.store import VersionedStore

HISTORY_RETENTION = timedelta(hours=1)  # longer than the 40 minutes of generated data
DEMO_BATCH_ID = 0


def demo_step(
    spark: SparkSession, root: str, rates_path: str, t0: datetime
) -> tuple[VersionedStore, list[str], StepReport]:
    """Load the rate changelog at ``rates_path`` into a versioned store at ``<root>/rates_store``.

    Returns the store, the lines to print and the step's report. Re-running the demo replays batch 0:
    nothing is written.
    """
    updates = spark.read.format("delta").load(rates_path)
    store = VersionedStore.create(
        spark, f"{root}/rates_store", "currency", updates.select("currency", "rate").schema, HISTORY_RETENTION
    )
    result = store.put_all(updates, batch_id=DEMO_BATCH_ID, deletes="deleted", timestamp="event_time")
    lines = []
    if result.replayed:
        lines.append(
            f"[versioned] batch {DEMO_BATCH_ID} was committed before: replay skipped, store unchanged"
        )
    versions = (
        store.table()
        .agg(
            F.count(F.lit(1)).alias("versions"),
            F.count(F.when(F.col("tombstone"), 1)).alias("tombstones"),
            F.count(F.when(F.col("segment").isNotNull(), 1)).alias("historical"),
            F.countDistinct("segment").alias("segments"),
        )
        .first()
    )
    assert versions is not None
    lines.append(
        f"[versioned] put_all: {result.records} updates, {result.dropped} dropped as older than stream time "
        f"minus {HISTORY_RETENTION}; store holds {versions['versions']} versions "
        f"({versions['tombstones']} tombstones, {versions['historical']} in {versions['segments']} validTo "
        f"segments), stream time {result.stream_time}"
    )
    probe = t0 + timedelta(minutes=10)
    now, then = store.get("EUR"), store.get("EUR", as_of=probe)
    lines.append(f"[versioned] EUR now: {_rate(now)}; EUR as of {probe:%H:%M}: {_rate(then)}")
    expired = store.expire()
    lines.append(
        f"[versioned] expire: dropped segments below {expired.first_live_segment} "
        f"({expired.removed_files} files, {expired.removed_rows} versions) with a metadata-only delete"
    )
    report = StepReport(
        "versioned",
        result.records,
        result.rows_written,
        {"late updates not put": result.dropped, "versions stored": versions["versions"]},
        {"rates store": store.path},
    )
    return store, lines, report


def _rate(record: object) -> str:
    if record is None:
        return "none (absent or deleted)"
    value = getattr(record, "value", {})["rate"]
    valid_from = getattr(record, "valid_from", None)
    return f"{value} (valid from {valid_from:%H:%M:%S})"
