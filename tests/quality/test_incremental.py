"""An incremental check of a versioned store finds exactly the violations a full check finds: random store
histories (batches, seals, expiries) with random corruptions written through Delta behind the store's back,
after a passing check."""

from __future__ import annotations

from collections import Counter

import pytest
from delta.tables import DeltaTable
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse.quality.rules import TableCheck
from lakehouse.quality.suites import check_table
from lakehouse.versioned import VersionedStore
from lakehouse.versioned.segments import segment_of
from tests.quality.helpers import append_behind_the_back, table_schema
from tests.versioned.helpers import at, batch_frame, create_store

RETENTION_MS, INTERVAL_MS = 1000, 500
KEYS = ("a", "b", "c")
TIMES = st.integers(0, 40).map(lambda n: n * 100)
record = st.tuples(st.sampled_from(KEYS), st.sampled_from([None, "x", "y"]), TIMES, st.integers(0, 1))
batch = st.tuples(st.just("batch"), st.lists(record, min_size=1, max_size=5))
own_write = st.one_of(batch, st.just(("seal",)), st.just(("expire",)))
corruption = st.one_of(
    st.tuples(st.just("overlap"), st.sampled_from(KEYS), TIMES, st.integers(1, 15).map(lambda n: n * 100)),
    st.tuples(st.just("open"), st.sampled_from(KEYS), TIMES),
    st.tuples(st.just("delete_latest"), st.sampled_from(KEYS)),
    st.tuples(st.just("shift_segment"), st.sampled_from(KEYS)),
)
# The store's own writes after the passing check, then one corruption (batches and seals may refuse to
# write over a corrupted store; an expiry's partition drop may follow it).
after = st.tuples(st.lists(own_write, max_size=3), corruption, st.booleans()).map(
    lambda drawn: [*drawn[0], drawn[1], *([("expire",)] if drawn[2] else [])]
)
history = st.fixed_dictionaries({"before": st.lists(record, min_size=1, max_size=6), "after": after})


@settings(max_examples=2, deadline=None, derandomize=True)
@given(history)
def test_incremental_violations_equal_full_ones(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, case: dict
) -> None:
    path = str(tmp_path_factory.mktemp("incremental") / "store")
    store = create_store(spark, path, RETENTION_MS, INTERVAL_MS)
    _put(spark, store, case["before"], 0)
    store.seal()
    passed, _ = store.state_version()
    assert check_table(spark, path, passed).violations.count() == 0
    for n, change in enumerate(case["after"], start=1):
        _apply(spark, store, change, n)
    version, _ = store.state_version()
    full = check_table(spark, path, version)
    incremental = check_table(spark, path, version, since=passed)
    assert incremental.scope.startswith(("incremental since", "full: ")), incremental.scope
    assert _violations(incremental) == _violations(full), (case, incremental.scope)


def _put(spark: SparkSession, store: VersionedStore, records: list, batch_id: int) -> None:
    rows = [(key, value, ms, partition, offset) for offset, (key, value, ms, partition) in enumerate(records)]
    store.put_all(batch_frame(spark, rows), batch_id=batch_id)


def _apply(spark: SparkSession, store: VersionedStore, change: tuple, n: int) -> None:
    """One step of a store's later history: its own writes, or a corruption made through Delta."""
    kind, *args = change
    table = DeltaTable.forPath(spark, store.path)
    if kind == "batch":
        _put(spark, store, args[0], n)
    elif kind == "seal":
        store.seal()
    elif kind == "expire":
        store.expire()
    elif kind == "overlap":
        key, start, length = args
        segment = segment_of((start + length) * 1000, store.settings.interval_us)
        _append(spark, store, (key, at(start), at(start + length), segment, False, "z"))
    elif kind == "open":
        _append(spark, store, (args[0], at(args[1]), None, None, False, "z"))
    elif kind == "delete_latest":
        table.delete((F.col("k") == args[0]) & F.col("valid_to").isNull())
    else:
        closed = (F.col("k") == args[0]) & F.col("valid_to").isNotNull()
        table.update(closed, {"segment": F.col("segment") + 1})


def _append(spark: SparkSession, store: VersionedStore, row: tuple) -> None:
    append_behind_the_back(spark, store.path, [row], table_schema(spark, store.path))


def _violations(check: TableCheck) -> Counter[tuple]:
    return Counter(tuple(row) for row in check.violations.collect())
