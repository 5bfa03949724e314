"""A topic deleted and re-created under the pipeline: ingest stops in one line naming the partition, both
offsets and how to acknowledge the reset, and the sink keeps what it had; acknowledged
(``records_incarnation``), the new topic's records at the old offsets are written."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from lakehouse.errors import LakehouseError
from lakehouse.kafka_broker import Broker
from lakehouse.kafka_source import produce
from lakehouse.pipeline import run_pipeline
from tests.pipeline.helpers import spec

pytestmark = pytest.mark.slow
TOPIC = "reset_transactions"


def _send(spark: SparkSession, servers: str, rows: list[tuple[str, str | None, float]]) -> None:
    frame = spark.createDataFrame(rows, "key string, txn_id string, amount double").coalesce(1)
    produce(frame, servers, TOPIC)


def _delete_topic(spark: SparkSession, servers: str) -> None:
    jvm = spark.sparkContext._jvm
    props = jvm.java.util.Properties()
    props.put("bootstrap.servers", servers)
    admin = jvm.org.apache.kafka.clients.admin.Admin.create(props)
    try:
        admin.deleteTopics(jvm.java.util.List.of(TOPIC)).all().get()
        deadline = time.monotonic() + 30
        while TOPIC in set(admin.listTopics().names().get()) and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        admin.close()


def test_a_recreated_topic_stops_ingest_in_one_line_naming_the_partition_and_offsets(
    spark: SparkSession, kafka_broker: Broker, tmp_path: Path
) -> None:
    servers = kafka_broker.bootstrap_servers
    pipeline = spec(
        tmp_path,
        records=TOPIC,
        records_format="kafka",
        records_schema="txn_id string, amount double",
        kafka_bootstrap_servers=servers,
        max_files_per_trigger=0,
    )
    _send(spark, servers, [("a", None, 1.0), ("b", None, 2.0), ("c", "t1", 3.0)])
    run_pipeline(spark, pipeline, "ingest", emit=lambda m: None)
    _delete_topic(spark, servers)
    _send(spark, servers, [("d", None, 4.0), ("e", None, 5.0)])  # offsets 0 and 1 again
    with pytest.raises(LakehouseError) as stopped:
        run_pipeline(spark, pipeline, "ingest", emit=lambda m: None)
    message = str(stopped.value)
    assert "\n" not in message and f"Partition {TOPIC}-0 offset was changed from 3 to 2" in message
    assert "records_incarnation=1" in message
    assert spark.read.format("delta").load(pipeline.tables.deduped).count() == 3
    acknowledged = replace(pipeline, records_incarnation=1)
    run_pipeline(spark, acknowledged, "ingest", emit=lambda m: None)
    sink = spark.read.format("delta").load(pipeline.tables.deduped)
    kept = sorted((r["key"], r["offset"]) for r in sink.collect())
    assert kept == [("a", 0), ("b", 1), ("c", 2), ("d", 0), ("e", 1)]
