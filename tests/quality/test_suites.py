"""Quality suites on real Delta tables: untouched tables pass, tables corrupted the way real bugs would
corrupt them fail, naming the expectation and a sample key."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse.quality import QualityReport, TableVerdict
from tests.quality.helpers import copy_table, segment_holding


def verdict(report: QualityReport, suite_suffix: str) -> TableVerdict:
    (found,) = [v for v in report.verdicts if v.suite.endswith(suite_suffix)]
    return found


def failed(found: TableVerdict) -> dict[str, tuple[str, ...]]:
    return {r.rule.name: r.sample_keys for r in found.results if not r.success}


def test_every_untouched_state_table_passes_its_suite(clean: tuple[dict[str, str], QualityReport]) -> None:
    _, report = clean
    kinds = sorted(v.kind for v in report.verdicts)
    assert kinds == [
        "asof_enriched",
        "assignment",
        "assignment_subscriptions",
        "dedup_index",
        "versioned_store",
    ]
    assert report.success, report.lines()
    assert all(line.startswith("[quality] PASS") for line in report.lines()[:-1])


def test_the_versioned_suite_checks_every_rule_and_sees_the_last_expire(
    clean: tuple[dict[str, str], QualityReport],
) -> None:
    found = verdict(clean[1], "rates")
    names = [r.rule.name for r in found.results]
    assert names == [
        "unique_key_valid_from",
        "valid_from_before_valid_to",
        "no_overlap",
        "versions_touch",
        "one_open_version",
        "segment_of_valid_to",
        "expired_segments_dropped",
    ]
    expiry = found.results[-1].rule.description
    # stream time T0 + 3.2 s, retention 1 s, 1 s segments: segments below that of T0 + 2.2 s were dropped
    assert f"segments below {segment_holding(2200)}" in expiry


def test_an_overlapping_version_written_behind_the_stores_back_fails(
    broken: tuple[dict[str, str], QualityReport],
) -> None:
    found = verdict(broken[1], "rates_overlap")
    assert not found.success
    # [1500, 2200) overlaps it and it overlaps [2200, 3200): two rows, one key
    assert failed(found) == {"no_overlap": ("EUR",)}
    assert next(r for r in found.results if r.rule.name == "no_overlap").unexpected_count == 2
    assert "FAIL" in found.line() and "no_overlap" in found.line() and "EUR" in found.line()


def test_a_second_open_version_fails(broken: tuple[dict[str, str], QualityReport]) -> None:
    broken_rules = failed(verdict(broken[1], "rates_second_open"))
    assert broken_rules["one_open_version"] == ("GBP",)
    assert broken_rules["no_overlap"] == ("GBP",)  # the tombstone is open and followed by a version


def test_a_dropped_segment_file_fails(broken: tuple[dict[str, str], QualityReport]) -> None:
    found = verdict(broken[1], "rates_dropped_file")
    assert failed(found) == {"versions_touch": ("EUR",)}
    # no commit shows a file lost behind Delta's back: the storage listing does; the whole store is checked
    assert found.scope.startswith("full: 1 data file(s) missing from storage")


def test_the_first_check_of_a_table_is_full(broken: tuple[dict[str, str], QualityReport]) -> None:
    lines = broken[0]["first_run"].splitlines()
    assert len(lines) == 7 and all(line.startswith("[quality] PASS") for line in lines), lines
    assert all(", full)" in line for line in lines if "versioned_store" in line)


def test_stores_changed_through_delta_are_checked_incrementally(
    broken: tuple[dict[str, str], QualityReport],
) -> None:
    _, report = broken
    # the copies were checked at version 5 (create, two batches each sealed, expire), all passing
    for suffix in ("rates_overlap", "rates_second_open"):
        assert verdict(report, suffix).scope == "incremental since version 5: 1 keys"
    untouched = verdict(report, "rates_untouched")
    assert untouched.success and untouched.scope == "incremental since version 5: 0 keys"
    assert "(versioned_store, version 5, incremental since version 5: 0 keys): 7 expectations met" in (
        untouched.line()
    )


def test_a_store_whose_change_data_is_lost_is_checked_whole(
    broken: tuple[dict[str, str], QualityReport],
) -> None:
    found = verdict(broken[1], "rates_no_change_data")
    assert found.success
    assert found.scope.startswith("full: the change data of versions 6-6 is unreadable"), found.scope


def test_a_duplicated_active_fails(broken: tuple[dict[str, str], QualityReport]) -> None:
    extra, report = broken
    broken_rules = failed(verdict(report, "assign.assignment"))
    key = f"generation=1 task={extra['duplicated_task']}"
    assert broken_rules["one_active_per_task"] == (key,)
    assert set(broken_rules) <= {"one_active_per_task", "one_role_per_client_task"}
    assert verdict(report, "assign.subscriptions").success


def test_results_table_has_one_row_per_expectation_per_run(
    spark: SparkSession, broken: tuple[dict[str, str], QualityReport]
) -> None:
    _, report = broken
    results = spark.read.format("delta").load(report.results_path)
    # the fixture's two runs (the clean copies, then the corrupted ones), then any run of the CLI test
    first, second = sorted(row["run_id"] for row in results.select("run_id").distinct().collect())[:2]
    rows = results.where(F.col("run_id") == second)
    expected = sum(len(v.results) for v in report.verdicts)
    assert rows.count() == expected
    assert results.where(F.col("run_id") == first).count() == expected  # the same tables, all passing
    overlap = rows.where(F.col("suite").endswith("rates_overlap") & (F.col("expectation") == "no_overlap"))
    (row,) = overlap.collect()
    assert (row["success"], row["unexpected_count"], row["sample_keys"]) == (False, 2, ["EUR"])
    overlap_verdict = verdict(report, "rates_overlap")
    # create, two put_all batches each sealed, expire, then the append behind the store's back
    assert row["table_version"] == overlap_verdict.version == 6


def test_a_run_with_failures_exits_non_zero_from_the_cli(
    spark: SparkSession,
    broken: tuple[dict[str, str], QualityReport],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    from lakehouse.cli import main

    _, report = broken
    table = next(v.path for v in report.verdicts if v.suite.endswith("rates_overlap"))
    # A copy: these runs rebuild their warehouse's Data Docs index, which test_data_docs reads.
    warehouse = copy_table(str(Path(table).parent), tmp_path / "warehouse")
    assert main(["--set", f"warehouse={warehouse}", "quality", f"{warehouse}/assign/subscriptions"]) == 0
    assert main(["--set", f"warehouse={warehouse}", "quality", "--full", "rates_overlap"]) == 1
    out = capsys.readouterr().out
    assert "[quality] FAIL rates_overlap (versioned_store, version 6, full)" in out
    assert "[quality] Data Docs: " in out
