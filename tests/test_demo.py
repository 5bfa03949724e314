from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse.demo import T0, DemoSize, rate_updates, run_demo, transactions
from lakehouse.schemas import load_schema
from lakehouse.versioned.demo import demo_step as versioned_demo_step


def test_generated_inputs_follow_their_schemas_and_story(spark: SparkSession) -> None:
    size = DemoSize(rate_updates=60, transactions=300)
    rates = rate_updates(spark, size)
    assert [f.name for f in rates.schema] == [f.name for f in load_schema("demo_rate_updates")]
    assert rates.where("deleted").count() > 0
    assert rates.where("deleted AND rate IS NOT NULL").count() == 0
    txns = transactions(spark, size)
    assert txns.count() > size.transactions  # re-sent duplicates
    assert txns.select("partition", "offset").distinct().count() == txns.count()
    assert txns.groupBy("txn_id").count().where("count > 1").count() > 0


def test_demo_writes_its_inputs(spark: SparkSession, tmp_path: Path) -> None:
    lines: list[str] = []
    run_demo(spark, str(tmp_path), DemoSize(rate_updates=20, transactions=50), lines.append)
    assert spark.read.format("delta").load(str(tmp_path / "rate_updates")).count() == 20
    txns = spark.read.format("delta").load(str(tmp_path / "transactions"))
    assert txns.agg(F.countDistinct("txn_id")).first()[0] == 50
    assert any("currency-rate updates" in line for line in lines)
    assert any(line.startswith("[versioned] put_all: 20 updates") for line in lines)
    assert any(line.startswith("[versioned] EUR now:") for line in lines)
    assert any(line.startswith("[dedup]") for line in lines)
    assert any(line.startswith("[asof]") for line in lines)
    priced = spark.read.format("delta").load(str(tmp_path / "txn_priced"))
    assert priced.select("txn_id").distinct().count() == priced.count() == 50
    _, rerun = versioned_demo_step(spark, str(tmp_path), str(tmp_path / "rate_updates"), T0)
    assert any("replay skipped" in line for line in rerun)
