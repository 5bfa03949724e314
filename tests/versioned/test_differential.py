"""Random record sequences through put_all in random batch splits, compared with the reference model."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse.versioned import VersionedStore
from lakehouse.versioned.pending import PENDING_SEGMENT
from tests.reference.ordering import Record, processing_order
from tests.reference.versioned import VersionedStoreModel
from tests.versioned.helpers import assert_matches_model, at, batch_frame, create_store, ms_of

KEYS = ("a", "b", "c")
VALUES = (None, "x", "y", "z")
record_strategy = st.tuples(
    st.sampled_from(KEYS), st.sampled_from(VALUES), st.integers(0, 40), st.integers(0, 2)
)
sequence_strategy = st.fixed_dictionaries(
    {
        "records": st.lists(record_strategy, min_size=1, max_size=14),
        "cuts": st.lists(st.integers(1, 13), max_size=2),
        "seals": st.lists(st.booleans(), min_size=3, max_size=3),
        "retention": st.sampled_from([0, 5, 20]),
        "interval": st.sampled_from([2, 7]),
        "probes": st.lists(
            st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.integers(-1, 42))), max_size=4
        ),
    }
)


def _with_offsets(
    records: list[tuple[str, str | None, int, int]],
) -> list[tuple[str, str | None, int, int, int]]:
    offsets = dict.fromkeys(range(3), 0)
    numbered = []
    for key, value, ts, partition in records:
        numbered.append((key, value, ts, partition, offsets[partition]))
        offsets[partition] += 1
    return numbered


def _split(records: list, cuts: list[int]) -> list[list]:
    bounds = sorted({c for c in cuts if 0 < c < len(records)})
    edges = [0, *bounds, len(records)]
    return [records[a:b] for a, b in itertools.pairwise(edges)]


def _apply_to_model(model: VersionedStoreModel, batch: list[tuple[str, str | None, int, int, int]]) -> None:
    by_coordinates = {(p, o): (k, v, ts) for k, v, ts, p, o in batch}
    for record in processing_order([Record(p, o, ts) for _, _, ts, p, o in batch]):
        key, value, ts = by_coordinates[(record.partition, record.offset)]
        model.put(key, value, ts)


@settings(max_examples=300, deadline=None)
@given(sequence_strategy)
def test_model_history_is_contiguous_and_agrees_with_reads(case: dict) -> None:
    model = VersionedStoreModel(case["retention"])
    for batch in _split(_with_offsets(case["records"]), case["cuts"]):
        _apply_to_model(model, batch)
    history = model.history()
    for (k1, _, to, _), (k2, start, _, _) in itertools.pairwise(history):
        if k1 == k2:
            assert to == start
    horizon = model.stream_time - case["retention"]
    for key, start, to, value in history:
        as_of = max(start, horizon)  # the earliest non-expired read inside this version's validity
        if to is None or as_of < to:
            found = model.get(key, as_of)
            assert (found is None) == (value is None)
            assert found is None or (found.value, found.valid_from, found.valid_to) == (value, start, to)


@pytest.mark.slow
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=sequence_strategy)
@example(  # a version expired at its batch's commit is not written: the sealed one before it must not
    # be resolved against a later pending version ([0, 35) never existed; the truth is [0, 23))
    case={
        "records": [("a", None, t, 0) for t in (0, 23, 18, 0, 0, 34, 0, 20, 22, 16, 35, 22, 26)],
        "cuts": [1, 8],
        "seals": [True, False, False],
        "retention": 0,
        "interval": 2,
        "probes": [],
    }
)
@example(  # the same inside the sealed history: a late pending version before [15, 25), which expired at
    # commit, leaves the sealed [10, NULL) to be cut at 15, not 25
    case={
        "records": [("a", "x", t, 0) for t in (0, 10, 3, 15, 25, 45, 50)],
        "cuts": [2],
        "seals": [True, False, False],
        "retention": 20,
        "interval": 7,
        "probes": [("a", 12), ("a", 30)],
    }
)
def test_put_all_matches_model_for_random_sequences(
    spark: SparkSession, tmp_path_factory, case: dict
) -> None:
    path = str(tmp_path_factory.mktemp("store") / "table")
    store = create_store(spark, path, case["retention"], case["interval"])
    model = VersionedStoreModel(case["retention"])
    for batch, seal in zip(_split(_with_offsets(case["records"]), case["cuts"]), case["seals"], strict=False):
        _apply_to_model(model, batch)
        store.put_all(batch_frame(spark, batch))
        if seal:  # pending versions moved into their segments between batches, or not
            store.seal()
    for _ in range(2):  # reads resolve pending versions; after a seal, none is left
        _assert_reads_match(store, model, case["probes"])
        store.seal()
    physical = spark.read.format("delta").load(store.path)
    assert physical.where(F.col("segment") == PENDING_SEGMENT).count() == 0


def _assert_reads_match(store: VersionedStore, model: VersionedStoreModel, probes: list) -> None:
    assert_matches_model(store, model)
    some = store.spark.createDataFrame([("a",), ("c",), (None,)], "k string")
    of_some = store.versions(of_keys=some)  # resolved from those keys' rows alone
    whole = store.versions().where(F.col("k").isin("a", "c"))
    assert sorted(map(repr, of_some.collect())) == sorted(map(repr, whole.collect()))
    assert ms_of(store.stream_time) == model.stream_time
    for key, as_of in probes:
        expected = model.get(key, as_of)
        found = store.get(key, None if as_of is None else at(as_of))
        got = None if found is None else (found.value["v"], ms_of(found.valid_from), ms_of(found.valid_to))
        assert got == (None if expected is None else (expected.value, expected.valid_from, expected.valid_to))
