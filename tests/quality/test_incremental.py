"""An incremental check of a versioned store finds exactly the violations a full check finds: random store
histories (batches, seals, expiries) with random corruptions written through Delta behind the store's back,
after a passing check; and it reads only the segments a change can reach (the others made unreadable)."""

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
from tests.quality.helpers import append_behind_the_back, garble_segment_files, table_schema
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
    st.tuples(st.just("low_segment"), st.sampled_from(KEYS), TIMES),
    st.tuples(st.just("delete_closed_from"), st.sampled_from(KEYS), TIMES),
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
    elif kind == "shift_segment":
        closed = (F.col("k") == args[0]) & F.col("valid_to").isNotNull()
        table.update(closed, {"segment": F.col("segment") + 1})
    elif kind == "low_segment":  # a short version in segment 0, below every segment of its time
        key, start = args
        _append(spark, store, (key, at(start), at(start + 50), 0, False, "z"))
    else:  # the closed versions from a time on deleted: a gap, or a removed predecessor of the open one
        key, start = args
        table.delete((F.col("k") == key) & F.col("valid_to").isNotNull() & (F.col("valid_from") >= at(start)))


def _append(spark: SparkSession, store: VersionedStore, row: tuple) -> None:
    append_behind_the_back(spark, store.path, [row], table_schema(spark, store.path))


def _violations(check: TableCheck) -> Counter[tuple]:
    return Counter(tuple(row) for row in check.violations.collect())


# Pruning (lakehouse/quality/_incremental.py): keys a, b, c with one version a second from 0 to 5 s, 1 s
# segments (the version [i s, (i+1) s) lives in segment i + 1) and a retention longer than the history, then
# a passing check; then a new version of a at 6 s, sealed. Every change row starts at or after 5 s (a's
# open version [5 s, ...) is closed), so the incremental check reads segments 5 on and the latest only.
PRUNING_RETENTION_MS, PRUNING_INTERVAL_MS = 10_000, 1000
PRUNING_HISTORY = [(key, f"{key}{n}", n * 1000, 0) for n in range(6) for key in ("a", "b", "c")]


def _passed_then_recent_change(spark: SparkSession, path: str) -> tuple[VersionedStore, int]:
    """The store above, checked (passing), then changed at 6 s; returns it and the passing version."""
    store = create_store(spark, path, PRUNING_RETENTION_MS, PRUNING_INTERVAL_MS)
    _put(spark, store, PRUNING_HISTORY, 0)
    store.seal()
    passed, _ = store.state_version()
    assert check_table(spark, path, passed).violations.count() == 0
    _put(spark, store, [("a", "a6", 6000, 0)], 1)
    store.seal()
    return store, passed


def test_a_recent_change_is_checked_without_reading_older_segments(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> None:
    path = str(tmp_path_factory.mktemp("pruned") / "store")
    store, passed = _passed_then_recent_change(spark, path)
    version, _ = store.state_version()
    # Segments 1-4 unreadable: the full check fails reading them, the incremental one never opens them.
    assert len(garble_segment_files(path, range(1, 5))) >= 4
    incremental = check_table(spark, path, version, since=passed)
    assert incremental.scope == f"incremental since version {passed}: 1 keys"
    assert incremental.violations.count() == 0
    with pytest.raises(Exception, match=r"(?i)parquet"):
        check_table(spark, path, version).violations.count()


@pytest.mark.parametrize(
    ("row", "broken", "unread"),
    [
        # b's [5.5 s, 7 s) overlaps its open version [5 s, ...): corruption among the segments read.
        pytest.param(("b", 5500, 7000, 7), {("no_overlap", "b")}, range(1, 5), id="in_the_segments_read"),
        # A late version of b, [3.5 s, 5 s) in segment 5, over b's [3 s, 4 s) (segment 4) and [4 s, 5 s):
        # the change rows' segments (5 on) would leave [3 s, 4 s) out, its valid_from brings it in.
        pytest.param(("b", 3500, 5000, 5), {("no_overlap", "b")}, range(1, 3), id="late_version"),
        # c's [5.2 s, 5.4 s) belongs in segment 5; written to segment 1, which 5 s alone would prune.
        pytest.param(
            ("c", 5200, 5400, 1),
            {("no_overlap", "c"), ("segment_of_valid_to", "c")},
            range(0),
            id="wrong_low_segment",
        ),
    ],
)
def test_a_version_written_behind_the_back_after_a_recent_change_is_caught(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    row: tuple[str, int, int, int],
    broken: set[tuple[str, str]],
    unread: range,
) -> None:
    """The incremental check finds what the full one finds, with the segments ``unread`` it need not read
    made unreadable."""
    path = str(tmp_path_factory.mktemp("pruned_corrupt") / "store")
    store, passed = _passed_then_recent_change(spark, path)
    key, start, end, segment = row
    _append(spark, store, (key, at(start), at(end), segment, False, "z"))
    version, _ = store.state_version()
    full = _violations(check_table(spark, path, version))
    assert {(rule, key) for rule, key, _ in full} == broken
    garble_segment_files(path, unread)
    assert _violations(check_table(spark, path, version, since=passed)) == full


def test_removing_the_version_after_an_allowed_gap_is_checked_whole(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> None:
    path = str(tmp_path_factory.mktemp("pruned_gap") / "store")
    store = create_store(spark, path, 2000, PRUNING_INTERVAL_MS)
    _put(spark, store, [("a", "a0", 0, 0), ("a", "a1", 1000, 0)], 0)
    store.seal()
    _put(spark, store, [("a", f"a{n}", n * 1000, 0) for n in range(2, 6)], 1)
    store.seal()  # at stream time 5 s, horizon 3 s: [1 s, 2 s) and [2 s, 3 s) had expired, a gap
    stored = spark.read.format("delta").load(path)
    rows = stored.select(F.unix_millis("valid_from"), F.unix_millis("valid_to"))
    assert sorted(map(tuple, rows.collect())) == [(0, 1000), (3000, 4000), (4000, 5000), (5000, None)]
    passed, _ = store.state_version()
    assert check_table(spark, path, passed).violations.count() == 0
    # [3 s, 4 s) deleted: [0 s, 1 s) (segment 1) now ends before [4 s, 5 s), after the horizon.
    DeltaTable.forPath(spark, path).delete((F.col("k") == "a") & (F.col("valid_from") == at(3000)))
    version, _ = store.state_version()
    full = _violations(check_table(spark, path, version))
    assert {(rule, key) for rule, key, _ in full} == {("versions_touch", "a")}
    assert _violations(check_table(spark, path, version, since=passed)) == full
