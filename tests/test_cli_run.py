"""``lakehouse run --json``: one JSON line per stage even when a stage has nothing new."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from lakehouse.cli import main
from lakehouse.history import Commit
from lakehouse.pipeline.due import seal_due, vacuum_due
from lakehouse.pipeline.metrics import BatchMetrics

NOW = datetime(2024, 3, 1, tzinfo=UTC)
STORE_APP = "lakehouse.versioned_store"


def test_run_json_prints_one_line_per_stage_when_nothing_is_new(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    landing = tmp_path / "warehouse" / "demo" / "landing"
    for folder in ("transactions", "rate_updates"):
        (landing / folder).mkdir(parents=True)  # landed folders, no file in them yet
    assert main(["run", "all", "--pipeline", "demo", "--json"]) == 0
    out, err = capsys.readouterr()
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["stage"] for line in lines] == ["materialize", "ingest", "enrich", "maintain", "assign"]
    nothing_new = [line["stage"] for line in lines if line["details"].get("nothing_new")]
    assert nothing_new == ["materialize", "ingest", "enrich", "assign"]
    maintain = lines[3]["details"]
    assert isinstance(maintain["skipped"], dict) and maintain["optimized"] == "none"
    assert err.startswith("lakehouse run: starting Spark to run all of pipeline demo (warehouse ")


def test_maintain_says_why_in_words_and_keeps_the_machine_form_in_json() -> None:
    pending = 2**63 - 1
    created = Commit(0, NOW - timedelta(hours=1), "CREATE TABLE", {}, {})
    write = Commit(1, NOW, "WRITE", {"numOutputRows": "44"}, {"app_id": STORE_APP, "lowest_segment": pending})
    seal = seal_due(1, [write, created], 50_000)
    assert not seal and seal.said == "44 of 50 000 pending rows"
    assert "44 rows written to the pending partition" in seal.reason
    vacuum = vacuum_due([write, created], timedelta(days=7), timedelta(days=1), NOW)
    assert vacuum.said == "the table is younger than its file retention (7 days)"
    metrics = BatchMetrics(
        "demo",
        "maintain",
        None,
        details={"optimized": "none", "skipped": {"seal": seal.reason}},
        said=f"optimized none; seal: skipped, {seal.said}",
    )
    assert metrics.describe().startswith("[demo:maintain]: 0 in, 0 out, optimized none; seal: skipped, 44 of")
    assert BatchMetrics.nothing_new("demo", "ingest", 2.04).describe() == "[demo:ingest]: nothing new (2.0s)"
    as_json = json.loads(metrics.to_json())
    assert as_json["details"]["skipped"] == {"seal": seal.reason} and "said" not in as_json
