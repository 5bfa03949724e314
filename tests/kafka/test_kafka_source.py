"""A real broker: Kafka records in the dedup input's shape, tombstones, and a killed ingest restarted."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse.kafka_broker import Broker
from lakehouse.kafka_source import create_topic, kafka_records, produce
from tests.child import child_env
from tests.kafka import ingest_child

pytestmark = pytest.mark.slow
T0 = datetime(2024, 1, 1, tzinfo=UTC)
CHILD = Path(__file__).with_name("ingest_child.py")


def _read_topic(spark: SparkSession, broker: Broker, topic: str, schema: str, **kwargs: str):
    raw = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    return kafka_records(raw, schema, **kwargs)


def test_compacted_changelog_maps_kafka_columns_and_tombstones(
    spark: SparkSession, kafka_broker: Broker
) -> None:
    topic = "changelog_test"
    assert create_topic(spark, kafka_broker.bootstrap_servers, topic, partitions=2, compacted=True)
    assert not create_topic(spark, kafka_broker.bootstrap_servers, topic, partitions=2, compacted=True)
    updates = spark.createDataFrame(
        [("EUR", 1.08, False, 0), ("GBP", 1.27, False, 1), ("EUR", None, True, 0), ("EUR", 1.09, False, 0)],
        "currency string, rate double, deleted boolean, partition int",
    ).coalesce(1)  # one producer task: sent in this order
    produce(
        updates.select(F.col("currency").alias("key"), "rate", "deleted", "partition"),
        kafka_broker.bootstrap_servers,
        topic,
        tombstone=F.col("deleted"),
    )
    rows = _read_topic(spark, kafka_broker, topic, "rate double, deleted boolean").orderBy(
        "partition", "offset"
    )
    got = [(r.topic, r.partition, r.offset, r.key, r.rate) for r in rows.collect()]
    assert got == [
        (topic, 0, 0, "EUR", 1.08),
        (topic, 0, 1, "EUR", None),  # the tombstone: a null value, every value field NULL
        (topic, 0, 2, "EUR", 1.09),
        (topic, 1, 0, "GBP", 1.27),
    ]
    assert rows.schema["timestamp"].dataType.simpleString() == "timestamp"


def _transactions(spark: SparkSession, ids: range):
    return spark.createDataFrame(
        [(f"t{i}", i, T0 + timedelta(seconds=i), i % 2) for i in ids],
        "key string, amount int, event_time timestamp, partition int",
    ).withColumn("txn_id", F.col("key"))


def _child(broker: Broker, topic: str, root: Path, kill_at: int | None = None) -> subprocess.CompletedProcess:
    command = [sys.executable, str(CHILD), broker.bootstrap_servers, topic, str(root)]
    if kill_at is not None:
        command.append(str(kill_at))
    env = child_env(PYTHONPATH=str(Path(__file__).parents[2]))
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=600, check=False)


def _stats(done: subprocess.CompletedProcess) -> list[dict]:
    return [json.loads(line[6:]) for line in done.stdout.splitlines() if line.startswith("stats ")]


def test_killed_ingest_restarts_exactly_once(
    spark: SparkSession, kafka_broker: Broker, tmp_path: Path
) -> None:
    topic = "ingest_test"
    servers = kafka_broker.bootstrap_servers
    create_topic(spark, servers, topic, partitions=2)
    produce(_transactions(spark, range(12)), servers, topic)
    # An application-level re-send: the same ids again, at new offsets (and later), after the originals.
    produce(_transactions(spark, range(2, 6)), servers, topic)

    crashed = _child(kafka_broker, topic, tmp_path / "killed", kill_at=1)
    assert crashed.returncode == -9, crashed.stderr[-2000:]
    assert len(_stats(crashed)) == 0 or _stats(crashed)[-1]["batch_id"] == 0
    restarted = _child(kafka_broker, topic, tmp_path / "killed")
    assert restarted.returncode == 0, restarted.stderr[-2000:]
    stats = _stats(restarted)
    # Spark re-reads the killed batch's offsets under its batch id: a replay, forwarded from the index as
    # it was before that batch's commit (each of its records counted as replayed), appended to the sink once.
    assert stats[0]["batch_id"] == 1 and stats[0]["replay"]
    assert stats[0]["details"]["replayed"] == stats[0]["records_in"] - stats[0]["duplicates"] > 0
    assert all(not s["replay"] and s["details"]["replayed"] == 0 for s in stats[1:])

    uninterrupted = ingest_child.run(spark, servers, topic, str(tmp_path / "once"), None)
    killed = ingest_child.spec(servers, topic, str(tmp_path / "killed")).tables
    once = ingest_child.spec(servers, topic, str(tmp_path / "once")).tables
    sink = spark.read.format("delta").load(killed.deduped)
    once_sink = spark.read.format("delta").load(once.deduped)
    produced = _read_topic(spark, kafka_broker, topic, ingest_child.VALUE_SCHEMA, timestamp="event_time")
    assert produced.count() == 16
    # Every produced id exactly once; the re-sent copies (new offsets, same id) were dropped as duplicates.
    assert sink.groupBy("txn_id").count().where("count != 1").count() == 0
    assert sorted(r.txn_id for r in sink.collect()) == sorted(f"t{i}" for i in range(12))
    assert sorted(sink.collect()) == sorted(once_sink.collect())
    assert sum(m.duplicates for m in uninterrupted) == 4
    index = spark.read.format("delta").load(killed.dedup_index)
    once_index = spark.read.format("delta").load(once.dedup_index)
    assert sorted(index.collect()) == sorted(once_index.collect())
