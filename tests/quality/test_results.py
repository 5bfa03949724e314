"""The results table remembers each table's newest passed check in its log, through log cleanup."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pyspark.sql import SparkSession

from lakehouse.quality._gx import RuleResult
from lakehouse.quality.job import TableVerdict
from lakehouse.quality.results import PassedCheck, append_results, last_passes
from lakehouse.quality.rules import Rule
from tests.durability import age_log, deleted_since, enable_fast_cleanup
from tests.replica.helpers import jobs_of

RULE = Rule("some_rule", "a rule")
T0 = datetime(2024, 1, 1, tzinfo=UTC)


def verdict(path: str, version: int, success: bool) -> TableVerdict:
    result = RuleResult(RULE, success, 0 if success else 1, () if success else ("k",))
    return TableVerdict(path, "versioned_store", version, f"suite.{path}", (result,))


def test_the_newest_passed_check_of_each_table_is_read_from_the_log_without_a_spark_job(
    spark: SparkSession, tmp_path
) -> None:
    path = str(tmp_path / "results")
    assert last_passes(spark, path, ["a"]) == {}  # no results table yet
    append_results(spark, path, T0, [verdict("a", 3, True), verdict("b", 1, False)])
    # A later failed check of "a" leaves its passed one as the start of the next incremental check.
    append_results(spark, path, T0 + timedelta(hours=1), [verdict("a", 5, False), verdict("b", 2, True)])
    found, jobs = jobs_of(spark, "passes", lambda: last_passes(spark, path, ["a", "b", "c"]))
    assert found == {
        "a": PassedCheck(3, T0),
        "b": PassedCheck(2, T0 + timedelta(hours=1)),
    }
    assert jobs == 0
    # The rows agree: the newest run in which every expectation of "b" passed read version 2.
    rows = spark.read.format("delta").load(path).where("table_path = 'b' AND success").collect()
    found_rows = [(r["table_version"], r["run_time"].astimezone(UTC)) for r in rows]
    assert found_rows == [(2, T0 + timedelta(hours=1))]


def test_passed_checks_survive_checkpoints_and_log_cleanup(spark: SparkSession, tmp_path) -> None:
    path = str(tmp_path / "results")
    append_results(spark, path, T0, [verdict("a", 7, True)])
    enable_fast_cleanup(spark, path)
    append_results(spark, path, T0 + timedelta(minutes=1), [verdict("b", 1, False)])
    before = age_log(path)
    for n in range(2, 6):  # later runs that check another table only
        append_results(spark, path, T0 + timedelta(minutes=n), [verdict("b", n, n % 2 == 0)])
    assert "00000000000000000000.json" in deleted_since(path, before)
    assert last_passes(spark, path, ["a", "b"]) == {
        "a": PassedCheck(7, T0),
        "b": PassedCheck(4, T0 + timedelta(minutes=4)),
    }
