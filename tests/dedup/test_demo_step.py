"""The demo step runs on the demo's generated transactions and keeps one row per transaction."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from lakehouse.dedup.demo import demo_step
from lakehouse.demo import DemoSize, transactions


@pytest.mark.slow
def test_demo_step_keeps_each_transaction_once(spark: SparkSession, tmp_path: Path) -> None:
    root = str(tmp_path)
    transactions(spark, DemoSize(rate_updates=10, transactions=30)).write.format("delta").save(
        f"{root}/transactions"
    )
    lines, _ = demo_step(spark, root)
    assert len(lines) == 4 and all(line.startswith("[dedup]") for line in lines)
    sink = spark.read.format("delta").load(f"{root}/txn_deduped")
    assert sink.count() == sink.select("txn_id").distinct().count() == 30
    assert "replay=True" in lines[2]
