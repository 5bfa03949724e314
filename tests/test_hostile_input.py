"""Hostile input (issue 17): hypothesis mutates a good batch; each case is refused in one line, writing
nothing, or taken under its documented handling. The run's summary prints how many cases were tried."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from delta.tables import DeltaTable
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse.asof import asof_join
from lakehouse.asof.grace import asof_join_with_grace
from lakehouse.assignment import ClientState, assign
from lakehouse.assignment.job import DEMO_CONFIG
from lakehouse.assignment.store import AssignmentStore, Subscription
from lakehouse.dedup import Deduplicator
from lakehouse.delta_ops import latest_version
from lakehouse.errors import LakehouseError
from lakehouse.versioned import VersionedStore

#: Cases tried per outcome, printed in the run's summary (see tests/conftest.py).
CASES: Counter[str] = Counter()

BATCH = "k string, v double, timestamp timestamp, partition int, offset long"
STORE_SCHEMA = T.StructType([T.StructField("k", T.StringType()), T.StructField("v", T.DoubleType())])
FIRST_US = 1_700_000_000_000_000

#: Each mutation of a good batch: (name, refused by ``put_all``, refused by a dedup ``run``, the mutation).
#: Where one of them takes it, its documented handling applies (see the README): other columns are ignored
#: (the dedup sink takes them), a NULL dedup id or offset is forwarded and never saved or a replay, records
#: sharing a partition and offset are all applied by a store and written once to a dedup sink.
Mutation = tuple[str, bool, bool, Callable[[DataFrame], DataFrame]]


def _set(column: str, value: Callable[[], Column]) -> Callable[[DataFrame], DataFrame]:
    """``column`` := ``value()`` (columns are built when a session exists, not at import)."""
    return lambda df: df.withColumn(column, value())


def _on_second_row(column: str, value: Callable[[], Column]) -> Callable[[DataFrame], DataFrame]:
    """``column`` := ``value()`` on the record at offset 1 only."""
    return lambda df: df.withColumn(column, F.when(F.col("offset") == 1, value()).otherwise(F.col(column)))


MUTATIONS: list[Mutation] = [
    *[
        (f"missing {c}", True, True, lambda df, c=c: df.drop(c))
        for c in ("k", "timestamp", "partition", "offset")
    ],
    ("extra column", False, False, _set("note", lambda: F.lit("ignored"))),
    ("timestamp as string", True, True, _set("timestamp", lambda: F.col("timestamp").cast("string"))),
    ("partition as string", True, True, _set("partition", lambda: F.col("partition").cast("string"))),
    ("offset as double", True, True, _set("offset", lambda: F.col("offset").cast("double"))),
    ("key as struct", True, False, _set("k", lambda: F.struct("k"))),
    ("NULL key", True, False, _on_second_row("k", lambda: F.lit(None).cast("string"))),
    ("NULL timestamp", True, True, _on_second_row("timestamp", lambda: F.lit(None).cast("timestamp"))),
    ("NULL partition", True, True, _on_second_row("partition", lambda: F.lit(None).cast("int"))),
    ("NULL offset", True, False, _on_second_row("offset", lambda: F.lit(None).cast("long"))),
    (
        "year 10000",
        True,
        True,
        _on_second_row("timestamp", lambda: F.timestamp_micros(F.lit(253402300800000000))),
    ),
    (
        "year 0",
        True,
        True,
        _on_second_row("timestamp", lambda: F.timestamp_micros(F.lit(-62135596800000001))),
    ),
    (
        "year 9999",
        False,
        False,
        _on_second_row("timestamp", lambda: F.timestamp_micros(F.lit(253402300799999999))),
    ),
    ("NaN value", False, False, _on_second_row("v", lambda: F.lit(float("nan")))),
    ("1 MB key", False, False, _on_second_row("k", lambda: F.repeat(F.lit("k"), 1_000_000))),
    ("same partition and offset", False, False, _set("offset", lambda: F.lit(0).cast("long"))),
]
BATCH_IDS: list[tuple[str, bool, Any]] = [
    ("batch id 0", False, 0),
    ("batch id 41.5", True, 41.5),
    ("batch id '3'", True, "3"),
    ("batch id True", True, True),
    ("batch id -1", True, -1),
]


def _good(spark: SparkSession) -> DataFrame:
    rows = [("a", 1.0, 0, 0), ("b", 2.0, 1, 1), ("a", 3.0, 2, 2)]
    frame = spark.createDataFrame(
        [(k, v, None, 0, o) for k, v, _, o in rows],
        "k string, v double, timestamp timestamp, partition int, offset long",
    )
    return frame.withColumn("timestamp", F.timestamp_micros(F.lit(FIRST_US) + F.col("offset") * 1_000_000))


def _versions(spark: SparkSession, paths: list[str]) -> list[int | None]:
    return [
        latest_version(DeltaTable.forPath(spark, p)) if DeltaTable.isDeltaTable(spark, p) else None
        for p in paths
    ]


def _try(name: str, refused: bool, write: Callable[[], object], versions: Callable[[], list]) -> None:
    """Run ``write``: a refusal must be a one-line LakehouseError that wrote nothing."""
    before = versions()
    try:
        write()
    except LakehouseError as error:
        assert refused, f"{name}: refused although it has a documented handling: {error}"
        assert "\n" not in str(error), f"{name}: a multi-line error: {error}"
        assert versions() == before, f"{name}: refused but wrote"
        CASES[f"refused: {name}"] += 1
        return
    assert not refused, f"{name}: accepted"
    CASES[f"handled: {name}"] += 1


SLOW = settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
CASE = st.tuples(st.sampled_from(MUTATIONS), st.sampled_from(BATCH_IDS))
#: Found by CI: a year-0 record older than stream time minus the retention was dropped as late, not refused.
YEAR_0 = (next(m for m in MUTATIONS if m[0] == "year 0"), BATCH_IDS[0])


@pytest.mark.slow
@SLOW
@given(CASE)
@example(YEAR_0)
def test_a_store_refuses_a_hostile_batch_in_one_line_or_takes_it_as_documented(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, case: tuple[Mutation, tuple]
) -> None:
    (name, bad_batch, _, mutate), (id_name, bad_id, batch_id) = case
    path = str(tmp_path_factory.mktemp("store") / "store")
    store = VersionedStore.create(spark, path, "k", STORE_SCHEMA, timedelta(hours=1))
    batch = mutate(_good(spark))
    _try(
        f"put_all: {name}, {id_name}",
        bad_batch or bad_id,
        lambda: store.put_all(batch, batch_id=batch_id),
        lambda: _versions(spark, [path]),
    )


@pytest.mark.slow
@SLOW
@given(CASE)
@example(YEAR_0)
def test_a_deduplicator_refuses_a_hostile_batch_in_one_line_or_takes_it_as_documented(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, case: tuple[Mutation, tuple]
) -> None:
    (name, _, bad_batch, mutate), (id_name, bad_id, batch_id) = case
    root: Path = tmp_path_factory.mktemp("dedup")
    index, sink = str(root / "index"), str(root / "sink")
    dedup = Deduplicator.create(spark, index, by="k", interval=timedelta(hours=1))
    batch = mutate(_good(spark))
    _try(
        f"dedup run: {name}, {id_name}",
        bad_batch or bad_id,
        lambda: dedup.run(batch, batch_id, sink=sink),
        lambda: _versions(spark, [index, sink]),
    )


# ---------------------------------------------------------------------- issue 39: the last raw errors
def _one_line(error: pytest.ExceptionInfo[LakehouseError]) -> str:
    message = str(error.value)
    assert "\n" not in message, message
    return message


def test_an_asof_join_with_an_event_outside_years_1_to_9999_is_refused_in_one_line(
    spark: SparkSession, tmp_path: Path
) -> None:
    store = VersionedStore.create(spark, str(tmp_path / "store"), "k", STORE_SCHEMA, timedelta(hours=1))
    good = _good(spark).select("k", "timestamp")
    for name, us in (("year 10000", 253402300800000000), ("year 1", -62135596800000001)):
        hostile = good.withColumn(
            "timestamp",
            F.when(F.col("k") == "b", F.timestamp_micros(F.lit(us))).otherwise(F.col("timestamp")),
        )
        with pytest.raises(LakehouseError, match="outside years 1 to 9999") as raised:
            asof_join(hostile, store).collect()
        _one_line(raised)
        CASES[f"refused: as-of join, {name}"] += 1


def test_a_grace_join_without_its_timestamp_or_into_a_sink_of_another_schema_is_refused_in_one_line(
    spark: SparkSession, tmp_path: Path
) -> None:
    store = VersionedStore.create(spark, str(tmp_path / "store"), "k", STORE_SCHEMA, timedelta(hours=1))
    store.put_all(_good(spark))
    sink = str(tmp_path / "sink")
    spark.createDataFrame([(1,)], "other int").write.format("delta").save(sink)
    run = {"grace": timedelta(0), "pending_path": str(tmp_path / "pending"), "sink_path": sink}
    stream = _good(spark).select("k", "timestamp")
    with pytest.raises(LakehouseError, match="timestamp") as raised:
        asof_join_with_grace(stream.drop("timestamp"), store, batch_id=0, **run)
    _one_line(raised)
    with pytest.raises(LakehouseError, match="grace sink") as raised:
        asof_join_with_grace(stream, store, batch_id=0, **run)
    _one_line(raised)
    assert _versions(spark, [sink]) == [0] and not (tmp_path / "pending").exists()
    CASES["refused: grace join, missing timestamp / sink of another schema"] += 2


def test_an_assignment_store_refuses_a_none_tag_and_a_subscription_other_than_the_stored_one(
    spark: SparkSession, tmp_path: Path
) -> None:
    store = AssignmentStore.create(spark, str(tmp_path / "assignment"), DEMO_CONFIG)
    tasks = ["0_0", "0_1"]
    with pytest.raises(LakehouseError, match="tag") as raised:
        store.write_subscriptions(0, {"x": ClientState("x", tags={"zone": None})}, tasks)  # type: ignore[dict-item]
    _one_line(raised)
    clients = {"x": ClientState("x", tags={"zone": "z0"}), "y": ClientState("y", tags={"zone": "z1"})}
    store.write_subscriptions(0, clients, tasks)
    other = Subscription(0, datetime.now(UTC), clients, ("0_5",), ())
    with pytest.raises(LakehouseError, match="differs from the stored one") as raised:
        store.write_assignment(other, assign(clients, ["0_5"], (), store.config))
    _one_line(raised)
    assert store.latest_assigned_generation() is None
    stored = store.subscription(0)
    assert store.write_assignment(stored, assign(clients, tasks, (), store.config)) is True
    assert store.assignment(0).count() >= 2
    CASES["refused: assignment, None tag / other subscription"] += 2
