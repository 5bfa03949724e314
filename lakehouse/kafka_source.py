"""Kafka topics in and out of Spark: records in the dedup input's shape, topics, producing.

Reading goes through Spark's Kafka source (``org.apache.spark:spark-sql-kafka-0-10_2.13``, resolved with
the Delta jars into every embedded session). A Kafka record becomes one row: ``topic``, ``partition``,
``offset``, ``timestamp`` (Kafka's record timestamp, or a value field chosen as event time), ``key`` (the
record key as a string) and the fields of the value parsed as JSON by a given schema. A tombstone (a
null value, as in a compacted changelog topic) has every value field NULL, which is what the versioned
store reads as a delete.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse.errors import InvalidInputError, SchemaMismatchError

#: The columns of a Kafka record besides its key (whose column is named by the caller).
KAFKA_COLUMNS = ("topic", "partition", "offset", "timestamp")
#: Producer settings of :func:`produce`: no idempotence, retries on, all replicas acknowledge. A retried
#: send may then be written twice (a broker-side re-delivery), as with any at-least-once producer.
AT_LEAST_ONCE_PRODUCER = {
    "kafka.enable.idempotence": "false",
    "kafka.acks": "all",
    "kafka.retries": "10",
    "kafka.max.in.flight.requests.per.connection": "5",
}


def read_kafka(
    spark: SparkSession,
    bootstrap_servers: str,
    topic: str,
    value_schema: T.StructType | str,
    *,
    timestamp: str | None = None,
    key: str = "key",
    max_offsets_per_trigger: int = 0,
    options: Mapping[str, str] | None = None,
) -> DataFrame:
    """A streaming read of ``topic`` from its earliest offsets, as :func:`kafka_records`.

    The offsets read so far live in the query's checkpoint (Spark's Kafka source commits nothing to
    Kafka). ``max_offsets_per_trigger`` caps the records of one micro-batch (0: all available at once).
    ``options`` are passed to the Kafka source as they are (``kafka.*`` go to the consumer).
    """
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("failOnDataLoss", "true")
        .option("includeHeaders", "true")
    )
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", max_offsets_per_trigger)
    for key, value in (options or {}).items():
        reader = reader.option(key, value)
    return kafka_records(reader.load(), value_schema, timestamp=timestamp, key=key)


def kafka_records(
    raw: DataFrame, value_schema: T.StructType | str, *, timestamp: str | None = None, key: str = "key"
) -> DataFrame:
    """Spark Kafka source rows -> ``topic, partition, offset, timestamp, <key>`` and the value's fields.

    Args:
        raw: Rows with the Kafka source's columns (``key`` and ``value`` binary).
        value_schema: Schema of the JSON value (a StructType or a DDL string). A null value (tombstone)
            or a field missing from the JSON gives NULL fields.
        timestamp: A value field (timestamp type) used as the record's ``timestamp`` instead of Kafka's
            record timestamp; it is not repeated among the value columns. A tombstone has no value: its
            time is its header of that name (written by :func:`produce`), else Kafka's record timestamp.
        key: The name of the record key's column (a string).

    Raises:
        SchemaMismatchError: a value field other than ``timestamp`` is named like a Kafka column (or
            ``key``), or ``timestamp`` is not a value field.
    """
    schema = value_schema if isinstance(value_schema, T.StructType) else T.StructType.fromDDL(value_schema)
    names = schema.fieldNames()
    kafka_columns = (*KAFKA_COLUMNS, key)
    clashes = [n for n in names if n in kafka_columns and n != timestamp]
    if clashes:
        raise SchemaMismatchError("Kafka value schema: fields named like Kafka's columns", clashes)
    if timestamp is not None and timestamp not in names:
        raise SchemaMismatchError("Kafka value schema: the timestamp field", [timestamp])
    value = F.from_json(F.col("value").cast("string"), schema)
    event_time = F.col("timestamp")
    if timestamp is not None:
        event_time = F.coalesce(value[timestamp], _header(raw, timestamp), event_time)
    return raw.select(
        "topic",
        "partition",
        "offset",
        event_time.alias("timestamp"),
        F.col("key").cast("string").alias(key),
        *[value[n].alias(n) for n in names if n != timestamp],
    )


def _header(raw: DataFrame, name: str) -> Column:
    """The time in header ``name`` of each record, written by :func:`produce` as epoch microseconds (NULL
    without headers or without that header)."""
    if "headers" not in raw.columns:
        return F.lit(None).cast("timestamp")
    found = F.filter("headers", lambda header: header["key"] == name)
    return F.timestamp_micros(F.get(found, 0)["value"].cast("string").cast("long"))


def produce(
    df: DataFrame,
    bootstrap_servers: str,
    topic: str,
    *,
    key: str = "key",
    tombstone: Column | None = None,
    timestamp: str | None = None,
    options: Mapping[str, str] | None = None,
) -> None:
    """Send each row of ``df`` to ``topic``: ``key`` as the record key, the other columns as a JSON value.

    A ``partition`` column (int) chooses the partition; otherwise Kafka's partitioner does (by key). Rows
    where ``tombstone`` is true are sent with a null value (a delete in a compacted topic), and their
    ``timestamp`` column (an event time), if named, in a header of that name (epoch microseconds). Each Spark
    partition of ``df`` is sent by its own producer in row order: send a one-partition ``df`` when the
    order across all rows matters. The producer
    is :data:`AT_LEAST_ONCE_PRODUCER` (``options`` win), so a retried send may land twice.
    """
    if key not in df.columns:
        raise InvalidInputError(f"produce: no key column {key!r} in {df.columns}")
    fields = [c for c in df.columns if c not in (key, "partition")]
    value = F.to_json(F.struct(*fields))
    if tombstone is not None:
        value = F.when(tombstone, F.lit(None).cast("string")).otherwise(value)
    columns = [F.col(key).cast("string").alias("key"), value.alias("value")]
    if "partition" in df.columns:
        columns.append(F.col("partition").cast("int").alias("partition"))
    if tombstone is not None and timestamp is not None:
        micros = F.unix_micros(F.col(timestamp)).cast("string").cast("binary")
        header = F.struct(F.lit(timestamp).alias("key"), micros.alias("value"))
        columns.append(F.when(tombstone, F.array(header)).alias("headers"))
    writer = df.select(*columns).write.format("kafka").option("kafka.bootstrap.servers", bootstrap_servers)
    for name, setting in {**AT_LEAST_ONCE_PRODUCER, **(options or {})}.items():
        writer = writer.option(name, setting)
    writer.option("topic", topic).save()


def create_topic(
    spark: SparkSession, bootstrap_servers: str, topic: str, partitions: int = 1, compacted: bool = False
) -> bool:
    """Create ``topic`` (``cleanup.policy=compact`` when ``compacted``); False if it exists already.

    Uses the Kafka admin client of the Spark driver's JVM (it comes with the Kafka source).
    """
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    admin_props = jvm.java.util.Properties()
    admin_props.put("bootstrap.servers", bootstrap_servers)
    admin = jvm.org.apache.kafka.clients.admin.Admin.create(admin_props)
    try:
        if topic in set(admin.listTopics().names().get()):
            return False
        optional = jvm.java.util.Optional
        # Replication factor: the broker's default (py4j cannot pass a Java short).
        new = jvm.org.apache.kafka.clients.admin.NewTopic(topic, optional.of(partitions), optional.empty())
        if compacted:
            configs = jvm.java.util.HashMap()
            configs.put("cleanup.policy", "compact")
            new = new.configs(configs)
        admin.createTopics(jvm.java.util.Collections.singletonList(new)).all().get()
        return True
    finally:
        admin.close()
