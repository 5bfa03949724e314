"""The demo's generated data sent to Kafka topics (``lakehouse kafka produce-demo``)."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse.demo_data import RATE_PARTITIONS, TXN_PARTITIONS, DemoSize, rate_updates, transactions
from lakehouse.kafka_source import create_topic, produce

TRANSACTIONS_TOPIC = "transactions"
RATES_TOPIC = "rates"


def produce_demo(spark: SparkSession, bootstrap_servers: str, size: DemoSize) -> dict[str, int]:
    """Send the demo's transactions (re-sends included) and rate changelog; return records per topic.

    ``transactions``: key ``txn_id``, JSON value ``currency, amount, event_time``. ``rates``: a compacted
    topic, key ``currency``, value ``rate, event_time, deleted``, deletes as tombstones (null values, the
    event time in their ``event_time`` header). ``[pipeline.demo_kafka]`` reads both.
    Each Kafka partition's records are sent by one task in the demo's arrival order (offset).
    """
    create_topic(spark, bootstrap_servers, TRANSACTIONS_TOPIC, partitions=TXN_PARTITIONS)
    create_topic(spark, bootstrap_servers, RATES_TOPIC, partitions=RATE_PARTITIONS, compacted=True)
    txns = transactions(spark, size).select(
        "txn_id", "currency", "amount", F.col("timestamp").alias("event_time"), "partition", "offset"
    )
    rates = rate_updates(spark, size)
    sent = {}
    for topic, df, key, tombstone in (
        (TRANSACTIONS_TOPIC, txns, "txn_id", None),
        (
            RATES_TOPIC,
            rates.select("currency", "rate", "event_time", "deleted", "partition", "offset"),
            "currency",
            F.col("deleted"),
        ),
    ):
        ordered = df.repartition(
            df.sparkSession.sparkContext.defaultParallelism, "partition"
        ).sortWithinPartitions("partition", "offset")
        sendable = ordered.drop("offset")
        produce(sendable, bootstrap_servers, topic, key=key, tombstone=tombstone, timestamp="event_time")
        sent[topic] = df.count()
    return sent
