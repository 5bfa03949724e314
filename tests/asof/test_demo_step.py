"""The demo step prices transactions at the rate valid at their time."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse.asof.demo import demo_step
from lakehouse.versioned import VersionedStore


@pytest.mark.slow
def test_demo_step_prices_each_transaction_at_the_rate_of_its_time(spark: SparkSession, tmp_path) -> None:
    updates = spark.createDataFrame(
        [("EUR", "1.10", 60, 0), ("EUR", "1.20", 120, 1), ("GBP", None, 60, 2)],
        "currency string, rate string, s long, seq long",
    ).select(
        "currency",
        F.col("rate").cast("decimal(18,6)").alias("rate"),
        F.timestamp_seconds("s").alias("t"),
        "seq",
    )
    store = VersionedStore.create(
        spark,
        str(tmp_path / "rates"),
        "currency",
        updates.select("currency", "rate").schema,
        timedelta(hours=1),
    )
    store.put_all(updates, sequence_by="seq", timestamp="t")
    transactions = spark.createDataFrame(
        [
            ("t1", "EUR", "10.00", 30),
            ("t2", "EUR", "10.00", 60),
            ("t3", "EUR", "10.00", 150),
            ("t4", "GBP", "5", 90),
        ],
        "txn_id string, currency string, amount string, s long",
    ).select(
        "txn_id",
        "currency",
        F.col("amount").cast("decimal(18,2)").alias("amount"),
        F.timestamp_seconds("s").alias("timestamp"),
    )
    lines, _ = demo_step(spark, str(tmp_path), store, transactions)
    assert lines[0].startswith("[asof] priced 2 of 4 transactions")
    priced = spark.read.format("delta").load(str(tmp_path / "txn_priced"))
    got = {r["txn_id"]: r["amount_usd"] for r in priced.collect()}
    assert {k: None if v is None else str(v) for k, v in got.items()} == {
        "t1": None,
        "t2": "11.00",
        "t3": "12.00",
        "t4": None,
    }
