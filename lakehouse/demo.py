"""``lakehouse demo``: KIP-889's story end to end on generated data in a local Delta warehouse.

Currency-rate updates (some out of order, some deleted) and a transactions stream with at-least-once
duplicates are generated with Spark expressions (seeded, so every run sees the same data) and written as
Delta tables. Each lakehouse feature adds its step and prints what it did.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse.asof.demo import demo_step as asof_demo_step
from lakehouse.assignment.job import demo_step as assignment_demo_step
from lakehouse.dedup.demo import demo_step as dedup_demo_step
from lakehouse.quality.demo import demo_step as quality_demo_step
from lakehouse.replica.demo import demo_step as replica_demo_step
from lakehouse.schemas import load_schema
from lakehouse.summary import StepReport, summary_lines
from lakehouse.versioned.demo import HISTORY_RETENTION
from lakehouse.versioned.demo import demo_step as versioned_demo_step

T0 = datetime(2024, 1, 1, tzinfo=UTC)
CURRENCIES = ("EUR", "GBP", "JPY", "CHF")
RATE_STEP_S = 60
RATE_PARTITIONS = 2
TXN_PARTITIONS = 3
OUT_OF_ORDER_FRACTION = 0.15
DELETE_FRACTION = 0.05
DUPLICATE_FRACTION = 0.10
SEED = 889


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


def run_demo(
    spark: SparkSession, root: str, size: DemoSize = DemoSize(), echo: Callable[[str], None] = print
) -> None:
    """Run every demo step against Delta tables under ``root`` (overwritten), printing what each did."""
    rates_path, txn_path = f"{root}/rate_updates", f"{root}/transactions"
    rates = rate_updates(spark, size)
    rates.write.format("delta").mode("overwrite").save(rates_path)
    stats = (
        spark.read.format("delta")
        .load(rates_path)
        .agg(F.count("*").alias("n"), F.sum(F.col("deleted").cast("int")).alias("deletes"))
        .first()
    )
    assert stats is not None
    echo(f"[inputs] {stats['n']} currency-rate updates ({stats['deletes']} deletes) -> {rates_path}")
    transactions(spark, size).write.format("delta").mode("overwrite").save(txn_path)
    n_txn = spark.read.format("delta").load(txn_path).count()
    echo(f"[inputs] {n_txn} transaction records (with at-least-once re-sends) -> {txn_path}")
    rates_store, lines, versioned = versioned_demo_step(spark, root, rates_path, T0)
    dedup_lines, dedup = dedup_demo_step(spark, root)
    deduplicated = spark.read.format("delta").load(f"{root}/txn_deduped")
    asof_lines, asof = asof_demo_step(spark, root, rates_store, deduplicated)
    assignment_lines, assignment = assignment_demo_step(spark, f"{root}/assignment")
    replica_lines = replica_demo_step(spark, root, rates_path, HISTORY_RETENTION)
    for line in [*lines, *dedup_lines, *asof_lines, *assignment_lines, *replica_lines]:
        echo(line)
    for line in summary_lines([versioned, dedup, asof, assignment], _queries(versioned, asof, assignment)):
        echo(line)
    for line in quality_demo_step(spark, root):
        echo(line)


def _queries(versioned: StepReport, asof: StepReport, assignment: StepReport) -> list[str]:
    """SQL statements worth trying on the demo's tables (Delta path identifiers: no registration needed)."""
    rates, priced = versioned.tables["rates store"], asof.tables["priced transactions"]
    return [
        f"SELECT currency, rate, valid_from, valid_to FROM delta.`{rates}` WHERE currency = 'EUR' "
        "ORDER BY valid_from;",
        f"SELECT txn_id, timestamp, currency, amount, rate_rate, amount_usd FROM delta.`{priced}` "
        "ORDER BY timestamp LIMIT 5;",
        f"SELECT generation, role, count(*) FROM delta.`{assignment.tables['assignment']}` "
        "GROUP BY 1, 2 ORDER BY 1, 2;",
    ]
