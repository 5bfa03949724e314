from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse.demo import DemoSize, rate_updates, run_demo, transactions
from lakehouse.schemas import load_schema


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


def test_demo_writes_its_inputs_checks_its_tables_and_summarizes(
    spark: SparkSession, tmp_path: Path
) -> None:
    size = DemoSize(rate_updates=20, transactions=50)
    lines: list[str] = []
    run_demo(spark, str(tmp_path), size, lines.append)
    assert spark.read.format("delta").load(str(tmp_path / "rate_updates")).count() == 20
    txns = spark.read.format("delta").load(str(tmp_path / "transactions"))
    assert txns.agg(F.countDistinct("txn_id")).first()[0] == 50
    assert any("currency-rate updates" in line for line in lines)
    assert any(line.startswith("[versioned] put_all: 20 updates") for line in lines)
    assert any(line.startswith("[versioned] EUR now:") for line in lines)
    assert any(line.startswith("[dedup]") for line in lines)
    assert any(line.startswith("[asof]") for line in lines)
    verdicts = [line for line in lines if line.startswith("[quality] ")]
    assert verdicts[-1] == f"[quality] Data Docs: {tmp_path / 'quality' / 'docs' / 'index.html'}"
    checked = {line.split()[2] for line in verdicts[:-1]}
    assert checked >= {
        "asof_enriched.txn_priced",
        "assignment.assignment.assignment",
        "assignment_subscriptions.assignment.subscriptions",
        "dedup_index.txn_dedup_index",
        "versioned_store.rates_store",
    }
    assert all(line.startswith("[quality] PASS") for line in verdicts[:-1]), verdicts
    priced = spark.read.format("delta").load(str(tmp_path / "txn_priced"))
    assert priced.select("txn_id").distinct().count() == priced.count() == 50
    _check_summary(spark, lines, n_records=txns.count(), n_txns=50)


def _check_summary(spark: SparkSession, lines: list[str], n_records: int, n_txns: int) -> None:
    """A summary near the end: per-step counts that match the tables, locations, runnable SQL (then
    only the quality verdicts follow)."""
    summary = lines[lines.index("Summary") :]
    dedup = next(line.split() for line in summary if line.strip().startswith("dedup "))
    assert dedup[1:3] == [str(n_records), str(n_txns)]
    assert f"{n_records - n_txns} duplicates dropped" in " ".join(dedup)
    asof = next(line for line in summary if line.strip().startswith("asof "))
    assert "lookups outside retention" in asof
    assert any(line.strip().startswith("versioned ") for line in summary)
    assert any(line.strip().startswith("assignment ") for line in summary)
    try_at = next(i for i, line in enumerate(summary) if line.startswith("Try"))
    tables = summary[summary.index("Tables") + 1 : try_at]
    assert len(tables) >= 6
    for line in tables:
        assert Path(line.split(": ", 1)[1]).is_dir(), line
    queries = [line.strip() for line in summary[try_at + 1 :] if not line.startswith("[quality] ")]
    assert len(queries) >= 2
    for query in queries:
        assert spark.sql(query.rstrip(";")).count() > 0, query
