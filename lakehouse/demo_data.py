"""The demo's data: currency-rate updates (some out of order, some deleted) and a transactions stream with
at-least-once re-sends, generated with Spark expressions (seeded: every run sees the same data).

``lakehouse demo`` lands them in two parts (:func:`landing_parts`), ``lakehouse kafka produce-demo`` sends
them to Kafka topics.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse.schemas import load_schema

T0 = datetime(2024, 1, 1, tzinfo=UTC)
CURRENCIES = ("EUR", "GBP", "JPY", "CHF")
RATE_STEP_S = 60
RATE_PARTITIONS = 2
TXN_PARTITIONS = 3
OUT_OF_ORDER_FRACTION = 0.15
DELETE_FRACTION = 0.05
DUPLICATE_FRACTION = 0.10
SEED = 889
#: The share of the generated time span that lands for the demo's first run; the rest lands for its second.
FIRST_RUN_FRACTION = 0.9


@dataclass(frozen=True)
class DemoSize:
    """How much data the demo generates."""

    rate_updates: int = 40
    transactions: int = 200


def rate_updates(spark: SparkSession, size: DemoSize) -> DataFrame:
    """Rate updates, one per ``RATE_STEP_S``; some arrive late (out of order), some are deletes."""
    rows = spark.range(size.rate_updates)
    currency = F.element_at(
        F.array(*[F.lit(c) for c in CURRENCIES]), (F.col("id") % len(CURRENCIES) + 1).cast("int")
    )
    late = F.rand(SEED) < OUT_OF_ORDER_FRACTION
    # A late update was valid earlier than its arrival slot: it lands in history, splitting an interval.
    slot = F.when(late, F.col("id") - len(CURRENCIES) * 3).otherwise(F.col("id"))
    deleted = F.rand(SEED + 1) < DELETE_FRACTION
    base = {"EUR": 1.08, "GBP": 1.27, "JPY": 0.0067, "CHF": 1.13}
    base_rate = F.element_at(F.create_map(*[F.lit(x) for kv in base.items() for x in kv]), currency)
    rate = (base_rate * (1 + (F.rand(SEED + 2) - 0.5) / 50)).cast("decimal(18,6)")
    generated = rows.select(
        currency.alias("currency"),
        F.when(deleted, F.lit(None)).otherwise(rate).alias("rate"),
        deleted.alias("deleted"),
        (F.lit(T0) + F.make_interval(secs=F.greatest(slot, F.lit(0)) * RATE_STEP_S)).alias("event_time"),
        (F.col("id") % RATE_PARTITIONS).cast("int").alias("partition"),
        (F.col("id") / RATE_PARTITIONS).cast("long").alias("offset"),
    )
    return _conform(generated, "demo_rate_updates")


def transactions(spark: SparkSession, size: DemoSize) -> DataFrame:
    """Transactions in the shape of Spark's Kafka source; ``DUPLICATE_FRACTION`` are re-sent later."""
    originals = spark.range(size.transactions).select(
        F.concat(F.lit("t"), F.col("id")).alias("txn_id"),
        F.element_at(
            F.array(*[F.lit(c) for c in CURRENCIES]),
            (F.floor(F.rand(SEED + 3) * len(CURRENCIES)) + 1).cast("int"),
        ).alias("currency"),
        (F.rand(SEED + 4) * 1000).cast("decimal(18,2)").alias("amount"),
        (F.lit(T0) + F.make_interval(secs=F.rand(SEED + 5) * size.rate_updates * RATE_STEP_S)).alias(
            "timestamp"
        ),
        F.col("id").alias("arrival"),
    )
    resent = originals.where(F.rand(SEED + 6) < DUPLICATE_FRACTION).withColumn(
        "arrival", F.col("arrival") + size.transactions
    )
    records = originals.unionByName(resent)
    partition = (F.abs(F.hash("txn_id")) % TXN_PARTITIONS).cast("int")
    generated = records.select(
        F.col("txn_id").alias("key"),
        F.to_json(F.struct("txn_id", "currency", "amount")).alias("value"),
        F.lit("transactions").alias("topic"),
        partition.alias("partition"),
        F.col("arrival").alias("offset"),
        "timestamp",
        "txn_id",
        "currency",
        "amount",
    )
    return _conform(generated, "demo_transactions")


def _conform(df: DataFrame, schema_name: str) -> DataFrame:
    schema = load_schema(schema_name)
    return df.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields])


def landing_parts(df: DataFrame, time_column: str, size: DemoSize) -> tuple[DataFrame, DataFrame]:
    """``df`` (generated at ``size``) split by ``time_column``: the first ``FIRST_RUN_FRACTION`` of the
    generated time span, then the rest (a re-sent transaction keeps its original's time: same part)."""
    span = timedelta(seconds=size.rate_updates * RATE_STEP_S)
    first = F.col(time_column) < F.lit(T0 + span * FIRST_RUN_FRACTION)
    return df.where(first), df.where(~first)
