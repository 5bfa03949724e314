"""Each suite's rule-breaking rows, on small frames: the rules that need a hand-made violation."""

from __future__ import annotations

from datetime import timedelta

from pyspark.sql import DataFrame, SparkSession

from lakehouse.assignment import AssignmentConfig
from lakehouse.dedup.settings import DedupSettings
from lakehouse.quality.assignment import assignment_violations
from lakehouse.quality.dedup import dedup_violations
from tests.quality.helpers import EPOCH, at

ASSIGNMENT = "generation long, client string, task string, role string"
SUBSCRIPTIONS = (
    "generation long, process_id string, tags map<string,string>, stateful_tasks array<string>, "
    "stateless_tasks array<string>, prev_active array<string>, prev_standby array<string>, "
    "task_lags map<string,long>"
)
INDEX = "task int, txn_id string, entry_ts timestamp, bucket long"


def found(violations: DataFrame) -> set[tuple[str, str]]:
    return {(row["rule"], row["key"]) for row in violations.collect()}


def zones(spark: SparkSession, lags: dict[str, int] | None = None, **zone_of: str) -> DataFrame:
    """Subscriptions of generation 1 (tasks 0_0 and 0_1); ``lags`` is every client's report."""
    rows = [
        (1, pid, {"zone": zone}, ["0_0", "0_1"], [], [], [], lags or {})
        for pid, zone in sorted(zone_of.items())
    ]
    return spark.createDataFrame(rows, SUBSCRIPTIONS)


def test_a_standby_in_the_actives_zone_while_another_zone_is_free_breaks_tag_diversity(
    spark: SparkSession,
) -> None:
    members = zones(spark, c0="z0", c1="z0", c2="z1")
    config = AssignmentConfig(num_standby_replicas=1, rack_aware_assignment_tags=("zone",))
    same_zone = spark.createDataFrame(
        [
            (1, "c0", "0_0", "active"),
            (1, "c1", "0_0", "standby"),
            (1, "c2", "0_1", "active"),
            (1, "c0", "0_1", "standby"),
        ],
        ASSIGNMENT,
    )
    assert found(assignment_violations(same_zone, members, config)) == {
        ("standby_tag_diversity", "generation=1 task=0_0 client=c1")
    }
    spread = spark.createDataFrame(
        [
            (1, "c0", "0_0", "active"),
            (1, "c2", "0_0", "standby"),
            (1, "c2", "0_1", "active"),
            (1, "c0", "0_1", "standby"),
        ],
        ASSIGNMENT,
    )
    assert found(assignment_violations(spread, members, config)) == set()
    # Once clients have state for 0_0, stickiness and catch-up come first: its placement is not judged.
    with_state = zones(spark, {"0_0": 0}, c0="z0", c1="z0", c2="z1")
    assert found(assignment_violations(same_zone, with_state, config)) == set()


def test_a_missing_standby_and_a_client_in_two_roles_are_reported(spark: SparkSession) -> None:
    members = zones(spark, c0="z0", c1="z1")
    config = AssignmentConfig(num_standby_replicas=1)
    rows = [
        (1, "c0", "0_0", "active"),
        (1, "c0", "0_0", "standby"),
        (1, "c1", "0_1", "active"),
        (1, "c0", "0_1", "standby"),
    ]
    assert found(assignment_violations(spark.createDataFrame(rows, ASSIGNMENT), members, config)) == {
        ("one_role_per_client_task", "generation=1 task=0_0 client=c0"),
    }
    rows = rows[:1] + rows[2:]
    assert found(assignment_violations(spark.createDataFrame(rows, ASSIGNMENT), members, config)) == {
        ("standbys_per_stateful_task", "generation=1 task=0_0"),
    }


def test_two_live_entries_a_wrong_bucket_and_a_purged_bucket_are_reported(spark: SparkSession) -> None:
    settings = DedupSettings(
        by=("txn_id",), interval=timedelta(minutes=10), bucket_width=timedelta(minutes=1)
    )
    bucket = (at(0) - EPOCH) // timedelta(minutes=1)
    index = spark.createDataFrame(
        [
            (0, "a", at(0), bucket),
            (0, "a", at(60_000), bucket + 1),  # both within 10 minutes of stream time: two live entries
            (0, "b", at(0), bucket + 5),  # not the bucket of its entry_ts
            (0, "c", at(-3_600_000), bucket - 60),  # below the last purge's bound
        ],
        INDEX,
    )
    violations = dedup_violations(index, settings, {0: at(120_000)}, purged_below=bucket - 10)
    assert found(violations) == {
        ("one_live_entry_per_id", '{"task":0,"txn_id":"a"}'),
        ("bucket_of_entry_ts", '{"task":0,"txn_id":"b"}'),
        ("purged_buckets_dropped", '{"task":0,"txn_id":"c"}'),
    }
