"""The as-of join's step of ``lakehouse demo``: price each transaction at the rate valid at its time."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse.asof.join import asof_join_with_stats
from lakehouse.summary import StepReport
from lakehouse.versioned.store import VersionedStore


def demo_step(
    spark: SparkSession, root: str, store: VersionedStore, transactions_df: DataFrame
) -> tuple[list[str], StepReport]:
    """Join ``transactions_df`` (``currency``, ``amount``, ``timestamp``) with the rate store as of each
    transaction's time; write ``<root>/txn_priced`` (overwritten on every run); return the lines to print
    and the step's report.

    A transaction before its currency's first rate, or while the rate is deleted, keeps NULL rate columns.
    """
    result = asof_join_with_stats(
        transactions_df, store, on="currency", timestamp="timestamp", prefix="rate_"
    )
    priced = result.frame.withColumn(
        "amount_usd", (F.col("amount") * F.col("rate_rate")).cast("decimal(18,2)")
    )
    path = f"{root}/txn_priced"
    priced.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(path)
    counts = (
        spark.read.format("delta")
        .load(path)
        .agg(F.count(F.lit(1)).alias("n"), F.count("rate_rate").alias("priced"))
        .first()
    )
    assert counts is not None
    stats = result.stats
    pruning = (
        "no segment pruning" if stats.first_segment is None else f"segments >= {stats.first_segment} read"
    )
    lines = [
        f"[asof] priced {counts['priced']} of {counts['n']} transactions at the rate valid at their time "
        f"({counts['n'] - counts['priced']} before a first rate or while it was deleted) -> {path}",
        f"[asof] batch {stats.min_time} .. {stats.max_time}: {pruning}, time buckets of {stats.bucket}, "
        f"{stats.expired_lookups} lookups older than the store's retention",
    ]
    sample = (
        spark.read.format("delta")
        .load(path)
        .where(F.col("rate_rate").isNotNull())
        .orderBy("timestamp")
        .first()
    )
    if sample is not None:
        lines.append(
            f"[asof] e.g. {sample['txn_id']} at {sample['timestamp']:%H:%M:%S}: {sample['amount']} "
            f"{sample['currency']} x {sample['rate_rate']} (rate valid from "
            f"{sample['rate_valid_from']:%H:%M:%S}) = {sample['amount_usd']}"
        )
    report = StepReport(
        "asof",
        counts["n"],
        counts["n"],
        {
            "priced": counts["priced"],
            "without a rate": counts["n"] - counts["priced"],
            "lookups outside retention": stats.expired_lookups,
        },
        {"priced transactions": path},
    )
    return lines, report
