"""``lakehouse demo`` is the pipeline: the generated data lands in ``[pipeline.demo]``'s folders in two parts
and each run of the stages reads its part only (one demo at a tiny size, checked against the data)."""

from __future__ import annotations

import contextlib
import io
import shlex
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from lakehouse.cli import main
from lakehouse.demo import demo_spec, run_demo
from lakehouse.demo_data import DemoSize, landing_parts, rate_updates, transactions
from lakehouse.pipeline import BatchMetrics
from lakehouse.schemas import load_schema
from tests.test_readme import run_quickstart

SIZE = DemoSize(rate_updates=20, transactions=50)


def _rows(df: DataFrame, *columns: str) -> list[tuple[object, ...]]:
    return sorted(tuple(row) for row in df.select(*columns).collect())


def _in(run: list[BatchMetrics], stage: str) -> int:
    return sum(m.records_in for m in run if m.stage == stage)


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
    first, rest = landing_parts(txns, "timestamp", size)
    assert 0 < rest.count() < first.count()
    assert first.join(rest, on="txn_id", how="left_semi").isEmpty()  # a re-send lands with its original


@pytest.mark.slow
def test_demo_lands_its_data_runs_the_pipeline_twice_and_summarizes(
    spark: SparkSession, tmp_path: Path
) -> None:
    spec = demo_spec(str(tmp_path / "wh"))
    assert spec.root == str(tmp_path / "wh" / "demo")
    assert spec.records.startswith(f"{spec.root}/") and spec.assignment_root.startswith(f"{spec.root}/")
    lines: list[str] = []
    runs = run_demo(spark, spec, SIZE, lines.append)
    txns, rates = transactions(spark, SIZE), rate_updates(spark, SIZE)

    # The landing folders hold the generated data, landed in two parts; each run read only its part.
    landed = spark.read.schema(txns.schema).json(spec.records)
    assert _rows(landed, "txn_id", "partition", "offset") == _rows(txns, "txn_id", "partition", "offset")
    assert spark.read.parquet(spec.changelog).count() == SIZE.rate_updates
    names = {p.name.split("-")[0] for p in Path(spec.records).iterdir() if not p.name.startswith((".", "_"))}
    assert names == {"part1", "part2"}
    parts = zip(landing_parts(txns, "timestamp", SIZE), landing_parts(rates, "event_time", SIZE), strict=True)
    for run, (txn_part, rate_part) in zip(runs, parts, strict=True):
        assert _in(run, "ingest") == txn_part.count() > 0
        assert _in(run, "materialize") == rate_part.count() > 0
    assert {m.batch_id for m in runs[1] if m.stage == "ingest"} == {1}

    # Each transaction once in the sink and once enriched; the re-sends dropped as duplicates.
    deduped = spark.read.format("delta").load(spec.tables.deduped)
    enriched = spark.read.format("delta").load(spec.tables.enriched)
    generated_ids = _rows(txns.select("txn_id").distinct(), "txn_id")
    assert _rows(deduped, "txn_id") == _rows(enriched, "txn_id") == generated_ids
    assert sum(m.duplicates for run in runs for m in run) == txns.count() - SIZE.transactions
    assigned = [(m.records_in, m.details["generation"]) for run in runs for m in run if m.stage == "assign"]
    assert assigned == [(6, 1), (5, 2)]
    assert any(line.startswith("[replica] reads from the promoted replica") for line in lines)

    _check_summary(spark, lines, runs)
    verdicts = [line for line in lines if line.startswith("[quality] ")]
    assert verdicts[-1] == f"[quality] Data Docs: {Path(spec.root) / 'quality' / 'docs' / 'index.html'}"
    checked = {line.split()[2] for line in verdicts[:-1]}
    assert checked >= {
        "enriched",
        "assignment.assignment",
        "dedup_index",
        "store",
    }
    assert all(line.startswith("[quality] PASS") for line in verdicts[:-1]), verdicts

    # The README's quickstart: what it tells a user to try after the demo works on the demo's tables.
    printed = run_quickstart(str(tmp_path / "wh"))
    assert "(1 row)" in printed[next(c for c in printed if c.startswith("lakehouse store get"))]


def _check_summary(spark: SparkSession, lines: list[str], runs: list[list[BatchMetrics]]) -> None:
    """A summary after the runs: per run and stage the counts of the metrics, the tables' locations, SQL
    commands that run (then only the quality verdicts follow)."""
    summary = lines[lines.index("Summary") :]
    for run, metrics in enumerate(runs, start=1):
        ingest = next(line.split() for line in summary if line.split()[:2] == [str(run), "ingest"])
        records_out = sum(m.records_out for m in metrics if m.stage == "ingest")
        assert ingest[3:5] == [str(_in(metrics, "ingest")), str(records_out)]
        duplicates = sum(m.duplicates for m in metrics)
        # The summary leaves zeros out (a small run may see no re-send).
        shown = f"{duplicates} duplicates dropped" if duplicates else "duplicates dropped"
        assert (shown in " ".join(ingest)) == bool(duplicates)
        assert any(line.split()[:2] == [str(run), "enrich"] for line in summary)
    try_at = next(i for i, line in enumerate(summary) if line.startswith("Try"))
    tables = summary[summary.index("Tables") + 1 : try_at]
    assert len(tables) >= 9
    for line in tables:
        assert Path(line.split(": ", 1)[1]).is_dir(), line
    commands = [line.strip() for line in summary[try_at + 1 :] if not line.startswith("[quality] ")]
    assert len(commands) >= 3
    for command in commands:  # as printed, through the CLI: delta-rs, no fallback to Spark
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(shlex.split(command)[1:])
        assert code == 0, (command, err.getvalue())
        assert "Spark" not in err.getvalue(), (command, err.getvalue())
        assert "(0 rows)" not in out.getvalue(), command
