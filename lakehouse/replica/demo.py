"""The replicas' step of ``lakehouse demo``: standby replicas of the rates store's tasks and a failover.

Self-contained: the rate updates are fed, in four batches by offset, into a rates store of its own at
``<root>/failover/rates_store`` (the demo's other steps load theirs in one batch), so the standbys have
versions to fall behind on. Re-running replays the batches and re-opens the replicas.
"""

from __future__ import annotations

from datetime import timedelta

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse.replica.failover import run_failover_drill
from lakehouse.versioned.store import VersionedStore

BATCHES = 4
PARTITIONS = 2


def demo_step(spark: SparkSession, root: str, rates_path: str, history_retention: timedelta) -> list[str]:
    """Run the failover drill on the rate updates at ``rates_path``; returns the lines to print."""
    updates = spark.read.format("delta").load(rates_path)
    row = updates.agg(F.max("offset").alias("last")).first()
    last = 0 if row is None or row["last"] is None else int(row["last"])
    width = last // BATCHES + 1
    offset = F.col("offset")
    batches = [updates.where((offset >= n * width) & (offset < (n + 1) * width)) for n in range(BATCHES)]
    schema = updates.select("currency", "rate").schema
    store = VersionedStore.create(
        spark, f"{root}/failover/rates_store", "currency", schema, history_retention
    )
    lines: list[str] = []
    run_failover_drill(
        spark, f"{root}/failover", store, batches, PARTITIONS, put=_put_rates, echo=lines.append
    )
    return lines


def _put_rates(store: VersionedStore, batch: DataFrame, batch_id: int) -> None:
    store.put_all(batch, batch_id=batch_id, deletes="deleted", timestamp="event_time")
