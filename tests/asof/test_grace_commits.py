"""Grace pipelines' commits: pipelines sharing a sink never skip each other's batches."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse.asof.grace import asof_join_with_grace
from tests.asof.helpers import joined, stream
from tests.versioned.helpers import batch_frame, create_store

GRACE = timedelta(milliseconds=10)


def test_pipelines_sharing_a_sink_never_skip_each_others_batches(spark: SparkSession, tmp_path: Path) -> None:
    """19.5: B's batch 0 is emitted although A committed a batch 0 to the same sink."""
    store = create_store(spark, str(tmp_path / "store"), retention_ms=100, interval_ms=10)
    store.put_all(batch_frame(spark, [("k", "v0", 0, 0, 0), ("k", "v20", 20, 0, 1)]))  # stream time 20
    sink = str(tmp_path / "sink")
    a_stream = stream(spark, [("k", 5)])
    a = asof_join_with_grace(
        a_stream, store, grace=GRACE, pending_path=str(tmp_path / "a"), sink_path=sink, batch_id=0
    )
    b_stream = stream(spark, [("k", 6)]).withColumn("id", F.col("id") + 10)
    b = asof_join_with_grace(
        b_stream, store, grace=GRACE, pending_path=str(tmp_path / "b"), sink_path=sink, batch_id=0
    )
    assert (a.emitted, b.emitted, a.replayed, b.replayed) == (1, 1, False, False)
    assert joined(spark.read.format("delta").load(sink)) == {0: ("v0", 0), 10: ("v0", 0)}
