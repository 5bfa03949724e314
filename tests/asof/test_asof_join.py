"""asof_join against the versioned-store model: KIP-889's example, bounds, tombstones, expiry, pruning."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse.asof import ColumnClashError, asof_join, asof_join_with_stats
from lakehouse.errors import InvalidInputError, SchemaMismatchError
from lakehouse.versioned import VersionedStore
from tests.asof.helpers import expected, joined, store_with, stream
from tests.reference.versioned import VersionedStoreModel
from tests.versioned.helpers import at, batch_frame

# Key "kip": KIP-889's table b0@0, b3@3. Key "k": x@10, deleted@20, y@30. Key "m": z@5.
PUTS = [
    ("kip", "b0", 0),
    ("kip", "b3", 3),
    ("k", "x", 10),
    ("k", None, 20),
    ("k", "y", 30),
    ("m", "z", 5),
]
LONG_RETENTION_MS = 1_000_000


@pytest.fixture(scope="module")
def rates(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> tuple[VersionedStore, VersionedStoreModel]:
    path = str(tmp_path_factory.mktemp("asof") / "rates")
    return store_with(spark, path, PUTS, LONG_RETENTION_MS, interval_ms=7)


def test_kip889_example_joins_each_record_with_the_version_at_its_time(spark: SparkSession, rates) -> None:
    store, _ = rates
    # Arrival order a1@1, a4@4, a2@2 (a2 is out of order): the table is read as of each record's time.
    events = stream(spark, [("kip", 1), ("kip", 4), ("kip", 2)])
    assert joined(asof_join(events, store, timestamp="timestamp")) == {
        0: ("b0", 0),
        1: ("b3", 3),
        2: ("b0", 0),
    }


BOUNDARY_EVENTS = [
    ("k", 9),  # before the first version
    ("k", 10),  # exactly at valid_from: inclusive
    ("k", 19),
    ("k", 20),  # exactly at valid_to, which is a tombstone's valid_from
    ("k", 29),
    ("k", 30),
    ("k", 500),  # the open latest version
    ("missing", 10),
    (None, 10),
    ("k", None),
    ("m", 5),
    ("m", 4),
]


def test_left_join_matches_the_model_on_bounds_tombstones_and_missing_keys(
    spark: SparkSession, rates
) -> None:
    store, model = rates
    found = joined(asof_join(stream(spark, BOUNDARY_EVENTS), store, how="left"))
    assert found == {i: expected(model, k, ms) for i, (k, ms) in enumerate(BOUNDARY_EVENTS)}
    assert found[1] == ("x", 10) and found[3] is None and found[5] == ("y", 30)


def test_inner_join_drops_unmatched_records(spark: SparkSession, rates) -> None:
    store, model = rates
    found = joined(asof_join(stream(spark, BOUNDARY_EVENTS), store, how="inner"))
    want = {i: expected(model, k, ms) for i, (k, ms) in enumerate(BOUNDARY_EVENTS)}
    assert found == {i: v for i, v in want.items() if v is not None}


@pytest.mark.parametrize("bucket_ms", [None, 1, 3, 10_000])
def test_every_bucket_width_gives_the_same_rows(spark: SparkSession, rates, bucket_ms: int | None) -> None:
    store, model = rates
    events = [(k, ms) for k in ("k", "kip", "m") for ms in range(-1, 36, 2)]
    bucket = None if bucket_ms is None else timedelta(milliseconds=bucket_ms)
    result = asof_join_with_stats(stream(spark, events), store, bucket=bucket, hot_events=4)
    assert joined(result.frame) == {i: expected(model, k, ms) for i, (k, ms) in enumerate(events)}
    if bucket_ms is None:  # one bucket over the batch's range, and each key hot (18 events >= 4)
        assert result.stats.bucket == timedelta(microseconds=36_001)
        assert result.stats.hot_keys == 3


@pytest.mark.parametrize("hot_events", [1, 1_000])
def test_plan_is_an_equi_join_on_key_and_bucket_never_a_cross_join(
    spark: SparkSession, rates, hot_events: int
) -> None:
    store, _ = rates
    plan = _explain(asof_join(stream(spark, [("k", 12), ("k", 13)]), store, hot_events=hot_events))
    assert "SortMergeJoin" in plan or "BroadcastHashJoin" in plan or "ShuffledHashJoin" in plan
    # A hot key (2 events >= 1) is joined on (key, bucket); otherwise the key alone is the join key.
    assert ("__asof_table_bucket" in plan) == (hot_events == 1)
    assert "CartesianProduct" not in plan and "BroadcastNestedLoopJoin" not in plan


def test_clashing_value_column_raises_unless_prefixed(spark: SparkSession, rates) -> None:
    store, _ = rates
    events = stream(spark, [("k", 12)]).withColumn("v", F.lit("stream"))
    with pytest.raises(ColumnClashError) as raised:
        asof_join(events, store)
    assert raised.value.clashes == ["v"]
    out = asof_join(events, store, prefix="rate_")
    assert out.columns == ["id", "k", "ms", "timestamp", "v", "rate_v", "rate_valid_from"]
    row = out.first()
    assert (row["v"], row["rate_v"]) == ("stream", "x")


def test_clashing_valid_from_raises_and_suffix_resolves_it(spark: SparkSession, rates) -> None:
    store, _ = rates
    events = stream(spark, [("k", 12)]).withColumn("valid_from", F.col("timestamp"))
    with pytest.raises(ColumnClashError, match="valid_from"):
        asof_join(events, store)
    assert asof_join(events, store, suffix="_rate").columns[-2:] == ["v_rate", "valid_from_rate"]


def test_bad_arguments_raise_before_any_spark_job(spark: SparkSession, rates) -> None:
    store, _ = rates
    events = stream(spark, [("k", 12)])
    with pytest.raises(InvalidInputError, match="how"):
        asof_join(events, store, how="right")
    with pytest.raises(InvalidInputError, match="key columns"):
        asof_join(events, store, on="id")
    with pytest.raises(SchemaMismatchError, match="expected timestamp"):
        asof_join(events, store, timestamp="ms")
    with pytest.raises(SchemaMismatchError, match="missing columns"):
        asof_join(events.drop("k"), store)
    with pytest.raises(SchemaMismatchError, match=r"k: expected string \(the table side's\), got int"):
        asof_join(events.withColumn("k", F.lit(1)), store)


def test_scd2_dataframe_with_multi_column_key_and_no_tombstone_column(spark: SparkSession) -> None:
    versions = spark.createDataFrame(
        [("eu", "EUR", 1.1, 0, 10), ("eu", "EUR", 1.2, 10, None), ("us", "EUR", 0.9, 5, None)],
        "region string, currency string, rate double, from_ms long, to_ms long",
    ).select(
        "region",
        "currency",
        "rate",
        F.timestamp_millis("from_ms").alias("valid_from"),
        F.timestamp_millis("to_ms").alias("valid_to"),
    )
    events = spark.createDataFrame(
        [
            (0, "eu", "EUR", 9),
            (1, "eu", "EUR", 10),
            (2, "us", "EUR", 4),
            (3, "us", "EUR", 5),
            (4, "eu", "USD", 5),
        ],
        "id long, region string, currency string, ms long",
    ).withColumn("timestamp", F.timestamp_millis("ms"))
    found = joined(asof_join(events, versions, on=["region", "currency"]), value="rate")
    assert found == {0: (1.1, 0), 1: (1.2, 10), 2: None, 3: (0.9, 5), 4: None}
    with pytest.raises(InvalidInputError, match="on= is required"):
        asof_join(events, versions)


# ------------------------------------------------------------------ expiry and segment pruning
# Key "p": a version every 10 ms from 0 to 100; key "q": one version at 40, then nothing.
# Retention 10 ms, segment interval 5 ms: stream time 100, horizon 90.
EXPIRY_PUTS = [("q", "q40", 40)] + [("p", f"p{ms}", ms) for ms in range(0, 101, 10)]


@pytest.fixture(scope="module")
def short(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> tuple[VersionedStore, VersionedStoreModel]:
    # Two batches (up to 50, then the rest): a batch writes no version already expired at its commit, so
    # p40 (valid to 50, expired only by the second batch) is what stays in an old segment (10).
    path = str(tmp_path_factory.mktemp("asof") / "short")
    store, model = store_with(spark, path, EXPIRY_PUTS[:7], retention_ms=10, interval_ms=5)
    store.seal()
    rest = EXPIRY_PUTS[7:]
    for key, value, ms in rest:
        model.put(key, value, ms)
    records = [(k, v, ms, 0, offset) for offset, (k, v, ms) in enumerate(rest, start=7)]
    store.put_all(batch_frame(spark, records))
    store.seal()  # the versions in their segments, so the join can prune them
    return store, model


def test_expired_lookups_are_answered_by_the_latest_version_only_and_counted(
    spark: SparkSession, short, caplog: pytest.LogCaptureFixture
) -> None:
    store, model = short
    # p@50 is expired (50 < 90): p's latest starts at 100 > 50, so no match even though p50 is stored
    # (unless expired); q@50 is expired and q's latest (q40) started before: it answers. p@89 expired too.
    events = [("p", 50), ("q", 50), ("p", 89), ("p", 90), ("p", 95), ("q", 30)]
    with caplog.at_level(logging.WARNING, logger="lakehouse.asof.join"):
        result = asof_join_with_stats(stream(spark, events), store)
        found = joined(result.frame)
    assert found == {i: expected(model, k, ms) for i, (k, ms) in enumerate(events)}
    assert found == {0: None, 1: ("q40", 40), 2: None, 3: ("p90", 90), 4: ("p90", 90), 5: None}
    assert result.stats.expired_lookups == 4
    assert "4 stream record(s) older than" in caplog.text


def test_old_segments_are_pruned_by_the_batch_start(spark: SparkSession, short) -> None:
    store, model = short
    events = stream(spark, [("p", 95), ("p", 100), ("q", 97)])
    result = asof_join_with_stats(events, store)
    assert result.stats.first_segment == 19  # floor(95 ms / 5 ms)
    plan = _explain(result.frame)
    assert "PartitionFilters" in plan and "segment" in plan.split("PartitionFilters", 1)[1].split("\n")[0]
    every_file = set(store.table().inputFiles())
    read = set(_scan_files(result.frame))
    assert read < every_file
    assert all("segment=__HIVE_DEFAULT_PARTITION__" in f or _segment(f) >= 19 for f in read)
    assert any(_segment(f) < 19 for f in every_file - read)
    assert joined(result.frame) == {0: ("p90", 90), 1: ("p100", 100), 2: ("q40", 40)}
    assert expected(model, "p", 95) == ("p90", 90)


def _explain(frame) -> str:
    return frame._jdf.queryExecution().executedPlan().toString()


def _scan_files(frame) -> list[str]:
    return frame.inputFiles()


def _segment(path: str) -> int:
    part = next(p for p in path.split("/") if p.startswith("segment="))
    value = part.split("=", 1)[1]
    return 10**18 if value == "__HIVE_DEFAULT_PARTITION__" else int(value)


def test_empty_stream_batch_reads_no_version(spark: SparkSession, rates) -> None:
    store, _ = rates
    events = stream(spark, [("k", 1)]).where(F.lit(False))
    result = asof_join_with_stats(events, store)
    assert result.stats.records == 0 and result.stats.min_time is None
    assert result.frame.collect() == []
    assert at(0).tzinfo is not None


def test_rows_and_stream_time_come_from_the_delta_version_read_when_the_join_is_called(
    spark: SparkSession, tmp_path
) -> None:
    store, _ = store_with(spark, str(tmp_path / "store"), [("k", "a", 0)], retention_ms=10, interval_ms=5)
    events = stream(spark, [("k", 7), ("k", 3)])
    pinned = asof_join(events, store)
    # Committed after the call: b@5 and c@30 (stream time 30, horizon 20, so k@7 and k@3 become expired).
    store.put_all(batch_frame(spark, [("k", "b", 5, 0, 1), ("k", "c", 30, 0, 2)]))
    # Rows of the new version with the old horizon would answer k@7 with b: neither snapshot's answer.
    assert joined(pinned) == {0: ("a", 0), 1: ("a", 0)}
    assert joined(asof_join(events, store)) == {0: None, 1: None}
