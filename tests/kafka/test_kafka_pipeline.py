"""Kafka topics as the pipeline's sources: the demo's data through a real broker, run as the jobs run it."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse.demo_data import DemoSize, rate_updates, transactions
from lakehouse.kafka_broker import Broker
from lakehouse.kafka_demo import produce_demo
from lakehouse.pipeline import load_pipeline, run_pipeline
from lakehouse.versioned import VersionedStore

pytestmark = pytest.mark.slow
VERSION_COLUMNS = ("currency", "valid_from", "valid_to", "tombstone", "rate")


def _rows(df: DataFrame, columns: tuple[str, ...]) -> list[tuple]:
    return sorted((tuple(r) for r in df.select(*columns).collect()), key=repr)


def test_demo_pipeline_reads_its_topics_exactly_once(
    spark: SparkSession, kafka_broker: Broker, tmp_path: Path
) -> None:
    size = DemoSize(rate_updates=40, transactions=40)
    sent = produce_demo(spark, kafka_broker.bootstrap_servers, size)
    servers = {"kafka_bootstrap_servers": kafka_broker.bootstrap_servers}
    spec = load_pipeline("demo_kafka", str(tmp_path / "wh"), overrides=servers)
    first = run_pipeline(spark, spec, emit=lambda metrics: None)
    assert {m.stage for m in first} >= {"materialize", "ingest", "enrich"}

    # Every transaction once in the sink; the re-sent copies (new offsets, same id) dropped as duplicates.
    generated = transactions(spark, size)
    deduped = spark.read.format("delta").load(spec.tables.deduped)
    assert _rows(deduped, ("txn_id",)) == _rows(generated.select("txn_id").distinct(), ("txn_id",))
    ingest = [m for m in first if m.stage == "ingest"]
    assert sum(m.records_in for m in ingest) == sent["transactions"]
    assert sum(m.duplicates for m in ingest) == sent["transactions"] - deduped.count()

    # The compacted changelog (tombstones carry their event time in a header) gives the store that the
    # same updates put directly give.
    reference = VersionedStore.create(
        spark,
        str(tmp_path / "reference"),
        "currency",
        rate_updates(spark, size).select("currency", "rate").schema,
        spec.history_retention,
    )
    reference.put_all(rate_updates(spark, size), batch_id=0, deletes="deleted", timestamp="event_time")
    reference.expire()  # as the pipeline's maintain stage did
    store = spark.read.format("delta").load(spec.tables.store)
    assert _rows(store, VERSION_COLUMNS) == _rows(reference.table(), VERSION_COLUMNS)
    assert store.where("tombstone").count() > 0

    enriched = spark.read.format("delta").load(spec.tables.enriched)
    assert _rows(enriched, ("txn_id",)) == _rows(deduped, ("txn_id",))
    assert enriched.where(F.col("rate_rate").isNotNull()).count() > 0

    # A second run finds nothing new in the topics (the offsets are in the stages' checkpoints).
    second = run_pipeline(spark, spec, emit=lambda metrics: None)
    assert sum(m.records_in for m in second if m.stage in ("materialize", "ingest")) == 0
    assert spark.read.format("delta").load(spec.tables.deduped).count() == deduped.count()
