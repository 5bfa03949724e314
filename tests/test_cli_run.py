"""``lakehouse run --json``: one JSON line per stage even when a stage has nothing new."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from lakehouse.cli import main


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

    assert main(["run", "maintain", "--pipeline", "demo"]) == 0
    said = capsys.readouterr().out.strip()
    assert said.startswith("[demo:maintain]: 0 in, 0 out, optimized none; ")
    assert "seal: skipped, nothing pending" in said and "{" not in said
